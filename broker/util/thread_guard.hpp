// No exception crosses a thread boundary. Every job the broker hands to a
// thread (its thread pools, std::async peer queries, the forwarder, the I/O
// contexts) runs under guarded(): an exception out of it is logged as one
// JSON line on stderr and counted, and the thread carries on. An exception
// left to reach the top of a thread would std::terminate the broker; when
// the job came from durable state (a decision left 'forwarding') every
// restart would end the same way.
#pragma once
#include <exception>
#include <string_view>

#include "broker/util/crash_report.hpp"

namespace shardnet::broker {

// {"t":..,"level":"error","msg":"job failed","job":WHERE,"reason":WHY}
void log_failed_job(std::string_view where, std::string_view why) noexcept;
// Jobs that threw since the broker started (GET /metrics).
unsigned long long failed_jobs() noexcept;

// Runs fn(); false when it threw (logged, counted, swallowed).
// The thread it runs on reports a crash on a stack of its own
// (crash_report.hpp): asked once per thread, nothing after that.
template <class F>
bool guarded(std::string_view where, F &&fn) noexcept {
    report_crashes_on_this_thread();
    try {
        fn();
        return true;
    } catch (const std::exception &e) {
        log_failed_job(where, e.what());
    } catch (...) {
        log_failed_job(where, "an exception that is not a std::exception");
    }
    return false;
}

}  // namespace shardnet::broker
