#include "broker/util/thread_guard.hpp"

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>

namespace shardnet::broker {

namespace {
std::atomic<unsigned long long> failures{0};
}

void log_failed_job(std::string_view where, std::string_view why) noexcept {
    failures.fetch_add(1, std::memory_order_relaxed);
    // Building the line may itself throw (memory): then a fixed line, so
    // that the guard never throws.
    try {
        const double t = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        const std::string line = boost::json::serialize(boost::json::object{
            {"t", t}, {"level", "error"}, {"msg", "job failed"}, {"job", where}, {"reason", why.substr(0, 2000)}});
        std::fprintf(stderr, "%s\n", line.c_str());
    } catch (...) {
        std::fputs("{\"level\":\"error\",\"msg\":\"job failed\"}\n", stderr);
    }
}

unsigned long long failed_jobs() noexcept { return failures.load(std::memory_order_relaxed); }

}  // namespace shardnet::broker
