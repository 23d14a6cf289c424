#include "broker/core/store_answer.hpp"

#include "broker/store/store_error.hpp"

#include <atomic>

namespace shardnet::broker::detail {

namespace {
std::atomic<unsigned long long> refusals[4];   // by StoreFault
}

unsigned long long store_refusals(StoreFault kind) { return refusals[int(kind)].load(std::memory_order_relaxed); }

ApiResponse store_error_response(const std::exception &e) {
    const auto *se = dynamic_cast<const StoreError *>(&e);
    ApiResponse r;
    const StoreFault kind = se ? se->fault() : StoreFault::other;
    refusals[int(kind)].fetch_add(1, std::memory_order_relaxed);
    switch (kind) {
    case StoreFault::full:
        r = error_response(503, "store_full", e.what());
        r.retry_after = kRetryFullSeconds;
        break;
    case StoreFault::io:
        r = error_response(503, "store_unavailable", e.what());
        r.retry_after = kRetryIoSeconds;
        break;
    case StoreFault::busy:
        r = error_response(503, "store_busy", e.what());
        r.retry_after = kRetryBusySeconds;
        break;
    case StoreFault::other: r = error_response(500, "store", e.what()); break;
    }
    return r;
}

}  // namespace shardnet::broker::detail
