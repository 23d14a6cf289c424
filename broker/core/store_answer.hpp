// How a handler answers a failed database call. The disk full, failing or
// locked past store_busy_ms is a 503 with Retry-After (the client, or the
// agent at its next heartbeat, tries again; nothing of the request was
// kept); anything else SQLite refused is a 500.
#pragma once
#include <exception>

#include "broker/http/api_message.hpp"
#include "broker/store/store.hpp"
#include "broker/store/store_error.hpp"

namespace shardnet::broker::detail {

// Seconds a client is asked to wait (Retry-After) for each kind.
inline constexpr unsigned kRetryFullSeconds = 30;
inline constexpr unsigned kRetryIoSeconds = 30;
inline constexpr unsigned kRetryBusySeconds = 1;

// 503 store_full / store_unavailable / store_busy with Retry-After for a
// StoreError of those kinds; 500 store for any other exception. The
// message is what the store said (the cause and the database's path first).
ApiResponse store_error_response(const std::exception &e);
// How many answers store_error_response gave for each kind (the metrics).
unsigned long long store_refusals(StoreFault kind);

}  // namespace shardnet::broker::detail
