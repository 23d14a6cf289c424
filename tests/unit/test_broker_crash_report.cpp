// Every broker thread that asks for it has a signal stack of its own, so a
// stack overflow there is reported too (broker/util/crash_report.hpp).
#include <doctest/doctest.h>
#include <csignal>
#include <thread>

#include "broker/util/crash_report.hpp"

TEST_CASE("a thread's signal stack: set once asked, kept on a second ask, turned off at its exit") {
    stack_t before{}, set{}, again{};
    std::thread t([&] {
        sigaltstack(nullptr, &before);
        shardnet::broker::report_crashes_on_this_thread();
        sigaltstack(nullptr, &set);
        shardnet::broker::report_crashes_on_this_thread();
        sigaltstack(nullptr, &again);
    });
    t.join();
    CHECK((before.ss_flags & SS_DISABLE));
    CHECK_FALSE((set.ss_flags & SS_DISABLE));
    CHECK(set.ss_size >= 64 * 1024);
    CHECK(again.ss_sp == set.ss_sp);
    // Another thread has its own.
    stack_t other{};
    std::thread u([&] {
        shardnet::broker::report_crashes_on_this_thread();
        sigaltstack(nullptr, &other);
    });
    u.join();
    CHECK_FALSE((other.ss_flags & SS_DISABLE));
}
