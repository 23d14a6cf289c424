#include "broker/util/crash_report.hpp"

#include <csignal>
#include <cstring>
#include <execinfo.h>
#include <initializer_list>
#include <memory>
#include <new>
#include <unistd.h>

namespace shardnet::broker {

namespace {

void put(const char *s) {
    for (std::size_t n = std::strlen(s); n > 0;) {
        const ssize_t w = ::write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w, n -= std::size_t(w);
    }
}

// Only async-signal-safe calls (write, backtrace once primed, raise).
extern "C" void on_fatal(int sig) {
    char num[8] = {};   // a signal number has at most two digits
    char *d = num + sizeof num - 1;
    for (int v = sig; v > 0 && d > num; v /= 10) *--d = char('0' + v % 10);
    put("{\"level\":\"fatal\",\"msg\":\"shardnet-broker crashed\",\"signal\":");
    put(d);
    put(",\"name\":\"");
    put(sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    put("\"}\n");
    void *frames[64];
    const int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    std::signal(sig, SIG_DFL);
    raise(sig);
}

// A thread's signal stack: turned off before it is freed at the thread's exit.
struct AltStack {
    std::unique_ptr<char[]> mem;
    ~AltStack() {
        if (!mem) return;
        stack_t off{};
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, nullptr);
    }
};
thread_local AltStack this_thread_stack;

}  // namespace

void report_crashes_on_this_thread() noexcept {
    if (this_thread_stack.mem) return;
    constexpr std::size_t kSize = 64 * 1024;
    std::unique_ptr<char[]> mem(new (std::nothrow) char[kSize]);
    if (!mem) return;
    stack_t ss{};
    ss.ss_sp = mem.get();
    ss.ss_size = kSize;
    if (sigaltstack(&ss, nullptr) == 0) this_thread_stack.mem = std::move(mem);
}

void report_crashes() {
    // backtrace() loads libgcc on its first call: done now, not in the handler.
    void *prime[1];
    backtrace(prime, 1);
    static char alt[64 * 1024];
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = sizeof alt;
    sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &sa, nullptr);
}

}  // namespace shardnet::broker
