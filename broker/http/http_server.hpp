// HTTP/1.1 (plain or TLS) in front of the API (ApiHandler,
// api_message.hpp): Beast sessions, each on the one thread of its I/O
// context (so no strands are needed),
// a deadline on every read, header and body limits answered 431/413, a
// connection cap, one request in flight per connection (pipelined requests
// wait their turn in the read buffer, never in an unbounded queue).
#pragma once
#include <chrono>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <optional>
#include <vector>

#include "broker/config/config.hpp"
#include "broker/http/api_message.hpp"

namespace shardnet::broker {

struct Limits {
    std::size_t header_bytes, body_bytes;
    int read_timeout_ms, max_connections, sse_keepalive_ms;
    std::size_t sse_buffer_bytes;   // per event stream, queued beyond the socket: a slower reader is dropped
};

// A connection waiting for a request (a new one, a kept-alive one between
// requests, one whose header or body is still coming in): on its I/O
// thread's list, oldest first, so that a new connection over
// max_connections sheds the oldest of them, which is what a slowloris holds
// (with its header or its body), rather than being refused itself.
struct HeaderWait {
    HeaderWait *prev = nullptr, *next = nullptr;
    bool listed = false;
    virtual void shed() = 0;
protected:
    ~HeaderWait() = default;
};

// A connection whose answer its socket did not take at once (a slow or
// stalled reader): on its thread's second list, the one longest without
// progress first. At max_connections with no connection waiting for a
// header, that one is shed for the new connection, so that readers who
// hold every connection cannot lock an agent out.
struct SlowWrite {
    SlowWrite *prev = nullptr, *next = nullptr;
    bool listed = false;
    // When it was listed (its last progress): a writer is shed only once it
    // has gone a quarter of read_timeout_ms without taking 16 KiB, never
    // one that keeps up.
    std::chrono::steady_clock::time_point since;
    virtual void shed_writer() = 0;
protected:
    ~SlowWrite() = default;
};

// Oldest-first intrusive lists of a thread's connections (no allocation;
// only that thread touches them).
template <class Node>
struct Fifo {
    Node *oldest = nullptr, *newest = nullptr;
    void push(Node *w) {
        if (w->listed) return;
        w->listed = true;
        if constexpr (requires { w->since; }) w->since = std::chrono::steady_clock::now();
        w->prev = newest;
        w->next = nullptr;
        (newest ? newest->next : oldest) = w;
        newest = w;
    }
    void remove(Node *w) {
        if (!w->listed) return;
        w->listed = false;
        (w->prev ? w->prev->next : oldest) = w->next;
        (w->next ? w->next->prev : newest) = w->prev;
        w->prev = w->next = nullptr;
    }
};

class HttpServer {
public:
    // Binds now (throws with the address on failure); port 0 picks one.
    // Accepts on the first context and spreads connections over all of
    // them, one thread each: no lock shared between I/O threads.
    HttpServer(std::vector<std::unique_ptr<boost::asio::io_context>> &ios, const BrokerConfig &cfg, ApiHandler &service);
    unsigned short port() const { return port_; }
    void start();
    void stop();  // stop accepting; open sessions finish their request
    // After the I/O threads are gone: closes the acceptor, then destroys the
    // contexts (and with them the sessions, which point at this server).
    void shutdown();

    ApiHandler &service;
    Limits limits;
    // Counted per I/O thread, each on its own cache line: a request then
    // touches no line another thread writes.
    struct alignas(64) Counts {
        std::atomic<int> open{0};
        std::atomic<int> busy{0};   // a request read and not yet answered
        // Only ever touched on this thread: connections waiting for a
        // header, and those waiting for their reader.
        Fifo<HeaderWait> waiting;
        Fifo<SlowWrite> writing;
        void wait(HeaderWait *w) { waiting.push(w); }
        void done(HeaderWait *w) { waiting.remove(w); }
    };
    std::atomic<unsigned long long> shed{0};           // connections shed at max_connections: waiting for a header
    std::atomic<unsigned long long> shed_readers{0};   // ... waiting for their reader
    std::atomic<unsigned long long> refused{0};        // new connections refused there: none to shed
    int open_sessions() const;
    int busy_sessions() const;
    std::unique_ptr<boost::asio::ssl::context> tls;

private:
    void do_accept();
    std::vector<std::unique_ptr<boost::asio::io_context>> &ios_;
    std::size_t next_ = 0;
    std::vector<Counts> counts_;
    std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
    // Out of file descriptors (or memory), accept fails at once and would
    // fail again at once: the acceptor waits a little instead of spinning.
    std::optional<boost::asio::steady_timer> accept_pause_;
    unsigned short port_ = 0;
};

}  // namespace shardnet::broker
