// What the HTTP server and the broker's API hand each other: a request, its
// response, the one reply per request, a live event stream's sink, and the
// API's two entry points (ApiHandler, which Service implements). Nothing
// here knows about sockets or about the broker's modules.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "broker/trust/auth.hpp"

namespace shardnet::broker {

// Handlers read a request while they run; what they keep for later (a store
// job, a stream) they copy. The HTTP server reuses a connection's request.
struct ApiRequest {
    std::string method;   // "GET", "POST", ...
    std::string target;   // path and query
    std::string bearer;
    std::string body;
    ConnCache *conn_cache = nullptr;   // the connection's, when it has one
    std::string last_event_id{};   // the Last-Event-ID header, as sent (SSE reconnects)
    std::string if_none_match{};   // the dashboard's files: the ETags the client holds (web/)
    bool accepts_gzip = false;     // Accept-Encoding names gzip (the dashboard's files come compressed)
};

struct EventSink;

struct ApiResponse {
    unsigned status = 200;
    std::string body;
    const char *content_type = "application/json";   // a literal: a 204 then allocates nothing
    const char *allow = nullptr;   // 405: the methods the resource takes (a literal)
    unsigned retry_after = 0;      // 503: seconds to wait before trying again (Retry-After; 0: none)
    const char *headers = nullptr; // more header lines, each ending CRLF, kept alive by the handler (web/)
    // Held by the HTTP session until the answer is written (or the
    // connection dropped): the request's place in its token's budget, so a
    // token's answers to slow readers count while they are being written.
    std::shared_ptr<void> hold{};
    // A streaming answer (Server-Sent Events), a handler kind of its own:
    // the HTTP session writes the stream's header, makes the sink that
    // reaches this connection and hands it here; events then go to it
    // until the reader or the broker ends the stream.
    std::function<void(std::shared_ptr<EventSink>)> stream{};
};

// Called exactly once per request, on the calling thread or later from
// another (the HTTP session keeps itself alive until then, and only then).
using Reply = std::function<void(ApiResponse)>;

// A live event stream (Server-Sent Events): the HTTP layer's end of it.
struct EventSink {
    std::function<void(std::string)> push;   // one SSE message; must not block
    // The backlog comes a page (about page_bytes) at a time: after each,
    // the next page's reading is handed over here, and the HTTP layer calls
    // it once it has written what it holds. Must not block.
    std::function<void(std::function<void()>)> more;
    std::size_t page_bytes = 256u << 10;
    std::atomic<bool> open{true};
    TokenEntry who;   // who follows: asked again before each event (a run's owner can change)
    std::shared_ptr<void> slot;   // its place in the stream budget, given back with the sink
};

ApiResponse error_response(unsigned status, const std::string &code, const std::string &message,
                           const std::string &field = "");

// The API as the HTTP server sees it (Service, broker/service.hpp).
class ApiHandler {
public:
    virtual ~ApiHandler() = default;
    // Every request, streams included (ApiResponse::stream).
    virtual void handle(const ApiRequest &req, const Reply &reply) = 0;
};

}  // namespace shardnet::broker
