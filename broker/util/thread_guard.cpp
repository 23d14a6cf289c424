#include "broker/util/thread_guard.hpp"

#include <atomic>
#include <boost/json.hpp>

#include "broker/util/log.hpp"

namespace shardnet::broker {

namespace {
std::atomic<unsigned long long> failures{0};
}

void log_failed_job(std::string_view where, std::string_view why) noexcept {
    failures.fetch_add(1, std::memory_order_relaxed);
    try {
        log_json("error", "job failed", boost::json::object{{"job", where}, {"reason", why.substr(0, 2000)}});
    } catch (...) {
        log_json("error", "job failed");
    }
}

unsigned long long failed_jobs() noexcept { return failures.load(std::memory_order_relaxed); }

}  // namespace shardnet::broker
