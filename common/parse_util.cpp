#include "parse_util.hpp"

#include <charconv>
#include <csignal>
#include <cstring>

namespace shardnet {

std::optional<long long> parse_int(std::string_view s, long long lo, long long hi) {
    if (s.empty() || s.size() > 19) return std::nullopt;
    long long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    if (s[0] == '+' || (s[0] == '-' && lo >= 0)) return std::nullopt;
    if (v < lo || v > hi) return std::nullopt;
    return v;
}

namespace {
struct SigName { const char *name; int sig; };
constexpr SigName kSignals[] = {
    {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"URG", SIGURG},
    {"WINCH", SIGWINCH}, {"ALRM", SIGALRM},
};
}  // namespace

int parse_signal(std::string_view s) {
    if (s.substr(0, 3) == "SIG") s.remove_prefix(3);
    for (const auto &e : kSignals)
        if (s == e.name) return e.sig;
    // Numbers are accepted, but never SIGKILL/SIGSTOP: the point is to let the
    // trainer write an emergency checkpoint, which it cannot do if killed.
    auto n = parse_int(s, 1, 64);
    if (!n || *n == SIGKILL || *n == SIGSTOP) return 0;
    return static_cast<int>(*n);
}

std::string signal_name(int sig) {
    for (const auto &e : kSignals)
        if (e.sig == sig) return std::string("SIG") + e.name;
    return std::to_string(sig);
}

bool has_control_chars(std::string_view s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return true;
    return false;
}

bool is_safe_name(std::string_view s, std::size_t max) {
    if (s.empty() || s.size() > max) return false;
    auto ok = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-';
    };
    if (!ok(s[0]) || s[0] == '.' || s[0] == '-' || s[0] == '_') return false;
    for (char c : s)
        if (!ok(c)) return false;
    return true;
}

}  // namespace shardnet
