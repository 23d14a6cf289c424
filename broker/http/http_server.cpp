#include "broker/http/http_server.hpp"

#include "broker/util/log.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include "broker/http/request_parser.hpp"
#include "broker/http/sse_stream.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>
#include <thread>

namespace shardnet::broker {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
// Sockets and timers on the io_context's own executor type, not the
// type-erased any_io_executor: each operation then skips an executor copy
// through a virtual table (a few percent of a heartbeat's instructions).
using Executor = asio::io_context::executor_type;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using TlsStream = beast::ssl_stream<Socket>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>, Executor>;
using Clock = std::chrono::steady_clock;

namespace {

// The one reporter of a connection's failures: a JSON line on the log, at
// most one a second (a port scan must not flood it), with how many were not said.
void fail(const beast::error_code &ec, const char *what) {
    static std::atomic<long long> last{0}, unsaid{0};
    const long long now = std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
    long long seen = last.load(std::memory_order_relaxed);
    if (seen == now || !last.compare_exchange_strong(seen, now)) { unsaid.fetch_add(1, std::memory_order_relaxed); return; }
    log_json("warn", "connection failed", boost::json::object{{"what", what}, {"reason", ec.message()},
                                                          {"not_logged_since", unsaid.exchange(0)}});
}

// After a lingering close: how long, and how much, of what the client still
// sends is read and dropped so that the answer reaches it (a close with
// unread input makes the kernel send RST, and the client may lose the answer).
constexpr auto kLingerTime = std::chrono::milliseconds(2000);
constexpr std::size_t kLingerBytes = 8u << 20;

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>>, public HeaderWait, public SlowWrite {
public:
    template <class... Args>
    Session(HttpServer &srv, HttpServer::Counts &counts, Args &&...args)
        : srv_(srv), counts_(counts), stream_(std::forward<Args>(args)...) { ++counts_.open; }
    ~Session() {
        counts_.done(this);
        counts_.writing.remove(this);
        --counts_.open;
    }

    // Over max_connections, a new connection takes this one's place: it has
    // waited longest for a request's header.
    void shed() override {
        counts_.done(this);
        srv_.shed.fetch_add(1, std::memory_order_relaxed);
        fail(asio::error::connection_aborted, "shed at max_connections (waited longest for its request)");
        beast::error_code ignored;
        beast::get_lowest_layer(stream_).close(ignored);
        timer_.cancel();
    }

    // Over max_connections with none waiting for a header: this one's
    // reader has gone longest without taking kProgressBytes of its answer.
    void shed_writer() override {
        counts_.writing.remove(this);
        srv_.shed_readers.fetch_add(1, std::memory_order_relaxed);
        fail(asio::error::connection_aborted, "shed at max_connections (its reader the slowest: longest without taking 16 KiB)");
        beast::error_code ignored;
        beast::get_lowest_layer(stream_).close(ignored);
        timer_.cancel();
    }

    void run() {
        if constexpr (std::is_same_v<Stream, TlsStream>) {
            // On the session's own thread: a handshake waits for its
            // request as a header does, so at max_connections a connection
            // stuck in it (a trickled ClientHello) is sheddable too; the
            // header that follows keeps its place in that queue.
            asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
                self->arm_deadline();
                self->counts_.wait(self.get());
                self->stream_.async_handshake(asio::ssl::stream_base::server, [self](beast::error_code ec) {
                    if (!ec) return self->do_read();
                    // A failed handshake (plain HTTP to the TLS port, a client
                    // that distrusts our certificate, a shed one) is said, and
                    // its socket goes now, not at the deadline.
                    fail(ec, "TLS handshake");
                    beast::error_code ignored;
                    beast::get_lowest_layer(self->stream_).close(ignored);
                    self->timer_.cancel();
                });
            });
        } else {
            beast::error_code ec;
            stream_.non_blocking(true, ec);  // send() writes at once where it can; it never waits
            asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->do_read(); });
        }
    }

private:
    // One deadline for the whole request and its answer: a client that
    // trickles its headers or body (slowloris), or idles on a keep-alive
    // connection, is cut off when it passes. A request only moves the
    // deadline; the timer wakes once per timeout, not once per request
    // (a timer operation takes the reactor's lock).
    void arm_deadline() { arm_deadline_at(Clock::now() + std::chrono::milliseconds(srv_.limits.read_timeout_ms)); }
    void arm_deadline_at(Clock::time_point at) {
        deadline_ = at;
        if (timer_armed_) return;
        timer_armed_ = true;
        timer_.expires_at(deadline_);
        timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) { self->on_deadline(ec); });
    }

    void on_deadline(beast::error_code ec) {
        timer_armed_ = false;
        if (ec || deadline_ == Clock::time_point::max()) return;
        if (Clock::now() < deadline_) {  // moved on by a later request
            timer_armed_ = true;
            timer_.expires_at(deadline_);
            timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) { self->on_deadline(ec); });
            return;
        }
        beast::error_code ignored;
        beast::get_lowest_layer(stream_).close(ignored);  // pending operations end with operation_aborted
    }

    void do_read() {
        parser_.emplace(request_);
        parser_->eager(true);
        parser_->header_limit(std::uint32_t(srv_.limits.header_bytes));
        parser_->body_limit(srv_.limits.body_bytes);
        continue_sent_ = false;
        arm_deadline();
        counts_.wait(this);   // until the request is whole (a body trickled in holds a place as a slow header does)
        parse_buffered();
    }

    // Beast's parser on our own read loop: http::async_read's layers of
    // composed operations cost more than the parsing itself.
    void parse_buffered() {
        while (buffer_.size() > 0) {
            beast::error_code ec;
            const std::size_t used = parser_->put(buffer_.data(), ec);
            buffer_.consume(used);
            if (ec && ec != http::error::need_more) return on_read(ec);
            if (parser_->is_done()) return on_read({});
            if (ec || used == 0) break;  // the rest of a header, or more body, is still to come
        }
        // The header asked for a 100 before the body, and nothing refused it
        // (a Content-Length over body_bytes is a 413 already, without one).
        if (parser_->expect_continue && !continue_sent_ && parser_->version == 11 && parser_->is_header_done())
            return send_continue();
        stream_.async_read_some(buffer_.prepare(kReadSize), [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
            self->buffer_.commit(n);
            if (ec == asio::error::eof) {
                if (!self->parser_->got_some() && self->buffer_.size() == 0) return self->on_read(http::error::end_of_stream);
                return self->on_read(http::error::partial_message);
            }
            if (ec) return self->on_read(ec);
            self->parse_buffered();
        });
    }

    void send_continue() {
        continue_sent_ = true;
        static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
        std::size_t written = 0;
        if constexpr (std::is_same_v<Stream, Socket>) {
            beast::error_code ec;
            written = stream_.write_some(asio::buffer(k100.data(), k100.size()), ec);
            if (ec && ec != asio::error::would_block && ec != asio::error::try_again) return close();
            if (written == k100.size()) return parse_buffered();
        }
        asio::async_write(stream_, asio::buffer(k100.data() + written, k100.size() - written),
                          [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->close();
                              self->parse_buffered();
                          });
    }

    void on_read(beast::error_code ec) {
        if (HeaderWait::listed) counts_.done(this);
        if (ec == http::error::end_of_stream) return close();
        if (ec == http::error::body_limit)
            return refuse(413, "body_too_large", "request body exceeds " + std::to_string(srv_.limits.body_bytes) + " bytes");
        if (ec == http::error::header_limit)
            return refuse(431, "headers_too_large", "request headers exceed " + std::to_string(srv_.limits.header_bytes) + " bytes");
        if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) return;  // closed by the deadline
        if (ec && parser_->refusal_status) return refuse(parser_->refusal_status, "bad_request", parser_->refusal);
        if (ec) {
            if (buffer_.size() > 0 || parser_->got_some()) return refuse(400, "bad_request", "malformed HTTP: " + ec.message());
            return close();
        }
        ++counts_.busy;
        ApiRequest &ar = request_;
        ar.conn_cache = &conn_cache_;
        const bool keep = parser_->keep_alive();
        const unsigned version = parser_->version;
        // The request's deadline (arm_deadline) also covers its answer.
        in_handle_ = true;
        head_ = std::string_view(ar.method) == std::string_view("HEAD");
        keep_ = keep;
        version_ = version;
        // The reply captures a plain pointer, which std::function keeps
        // without allocating. An answer that comes later (from the store's
        // thread) is posted back to this connection's thread; it cannot run
        // before this function returns, and by then hold_ keeps the session.
        srv_.service.handle(ar, [self = this](ApiResponse r) {
            if (self->stream_.get_executor().running_in_this_thread() && self->in_handle_) {  // answered at once
                self->ready_ = std::move(r);
                return;
            }
            asio::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable {
                auto hold = std::move(self->hold_);
                self->send(std::move(r), self->keep_, self->version_);
            });
        });
        in_handle_ = false;
        if (!ready_) {
            hold_ = this->shared_from_this();
            return;
        }
        ApiResponse r = std::move(*ready_);
        ready_.reset();
        send(std::move(r), keep, version);
    }

    // A request that cannot be read: answered, and the connection closed.
    void refuse(unsigned status, const std::string &code, const std::string &message) {
        ++counts_.busy;
        head_ = false;
        linger_ = true;   // what the client still sends must not turn the answer into a reset
        send(error_response(status, code, message), false, 11);
    }

    // Our answers are small and of one shape: formatted straight into one
    // buffer per connection (Beast's general serializer was a third of the
    // cost of a heartbeat), and a heartbeat's 204 is one fixed text.
    void send(ApiResponse r, bool keep, unsigned version) {
        static constexpr std::string_view kNoContent = "HTTP/1.1 204 No Content\r\nServer: shardnet-broker\r\n\r\n";
        if (r.stream) return start_stream(std::move(r.stream));
        writing_hold_ = std::move(r.hold);   // until sent()
        if (r.status == 204 && keep && version == 11) out_.assign(kNoContent);
        else format(r, keep, version);
        std::size_t written = 0;
        if constexpr (std::is_same_v<Stream, Socket>) {
            // An answer nearly always fits the socket's buffer: written here
            // (the socket does not block), the next read starts without a
            // round through the scheduler. The rest, if any, goes async.
            beast::error_code ec;
            written = stream_.write_some(asio::buffer(out_), ec);
            if (ec && ec != asio::error::would_block && ec != asio::error::try_again) return sent(ec, keep);
            if (written == out_.size()) return sent({}, keep);
        }
        write_rest(written, keep);
    }

    // The rest of an answer the socket did not take at once. A reader is
    // judged by progress, not by the size of what it asked for: every
    // kProgressBytes it takes start the idle limit (read_timeout_ms) again,
    // so a large answer reaches a steady reader whole, one that stops
    // reading is cut when the limit passes, and one that opens its window a
    // byte at a time to hold the connection is cut as well.
    static constexpr std::size_t kProgressBytes = 16u << 10;
    void write_rest(std::size_t written, bool keep, std::size_t since_arm = 0) {
        counts_.writing.push(this);
        stream_.async_write_some(asio::buffer(out_) + written,
                                 [self = this->shared_from_this(), written, keep, since_arm](beast::error_code ec, std::size_t n) {
                                     if (ec) return self->sent(ec, keep);
                                     if (written + n >= self->out_.size()) return self->sent({}, keep);
                                     std::size_t moved = since_arm + n;
                                     if (moved >= kProgressBytes && !self->linger_) {
                                         self->arm_deadline(), moved = 0;
                                         // Progress: the last to be shed for a new connection.
                                         self->counts_.writing.remove(self.get());
                                         self->counts_.writing.push(self.get());
                                     }
                                     self->write_rest(written + n, keep, moved);
                                 });
    }

    void sent(beast::error_code ec, bool keep) {
        counts_.writing.remove(this);
        writing_hold_.reset();
        --counts_.busy;
        if (!ec && linger_) return linger();
        if (ec || !keep) return close();
        // A pipelined request already read waits its turn in the queue
        // rather than deepening this call stack.
        if (buffer_.size() > 0)
            return asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->do_read(); });
        do_read();
    }

    void format(const ApiResponse &r, bool keep, unsigned version) {
        out_.clear();
        out_ += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
        out_ += std::to_string(r.status);
        out_ += ' ';
        out_ += std::string_view(http::obsolete_reason(http::status(r.status)));
        out_ += "\r\nServer: shardnet-broker\r\n";
        if (!keep) out_ += "Connection: close\r\n";
        else if (version == 10) out_ += "Connection: keep-alive\r\n";
        if (r.allow) { out_ += "Allow: "; out_ += r.allow; out_ += "\r\n"; }
        if (r.retry_after) { out_ += "Retry-After: "; out_ += std::to_string(r.retry_after); out_ += "\r\n"; }
        if (r.headers) out_ += r.headers;
        if (r.status != 204 && r.status != 304) {
            if (!r.body.empty()) { out_ += "Content-Type: "; out_ += r.content_type; out_ += "\r\n"; }
            out_ += "Content-Length: ";
            out_ += std::to_string(r.body.size());
            out_ += "\r\n";
        }
        out_ += "\r\n";
        // HEAD: the same header, Content-Length included, and no body.
        if (r.status != 204 && r.status != 304 && !head_) out_ += r.body;
    }

    // An answer of the stream kind: the connection becomes an event stream
    // (http/sse_stream.hpp) until either side ends it.
    void start_stream(std::function<void(std::shared_ptr<EventSink>)> begin) {
        deadline_ = Clock::time_point::max();  // a stream stays open: its keep-alives find a gone client
        --counts_.busy;                        // a stream never holds up a drain
        using Sse = SseStream<Stream>;
        sse_ = std::make_unique<Sse>(stream_, srv_.limits, [this](typename Sse::End end) {
            if (end == Sse::End::close) return close();
            beast::error_code ignored;
            beast::get_lowest_layer(stream_).close(ignored);
            timer_.cancel();
        });
        sse_->start(request_.target, this->shared_from_this(), std::move(begin));
    }

    void close() {
        beast::error_code ec;
        beast::get_lowest_layer(stream_).shutdown(tcp::socket::shutdown_send, ec);
        timer_.cancel();  // the session goes when its last operation ends
    }

    // A lingering close, after an answer to a request not read whole: our
    // side is shut (the client sees the answer, then EOF), and what it still
    // sends is read and dropped, up to kLingerBytes or kLingerTime, so that
    // no RST overtakes the answer. Then the socket closes.
    void linger() {
        beast::error_code ec;
        auto &sock = beast::get_lowest_layer(stream_);
        sock.shutdown(tcp::socket::shutdown_send, ec);
        if (ec) return close();
        arm_deadline_at(Clock::now() + kLingerTime);   // on_deadline closes the socket
        buffer_.clear();
        linger_read();
    }
    void linger_read() {
        auto &sock = beast::get_lowest_layer(stream_);
        sock.async_read_some(buffer_.prepare(64u << 10), [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
            self->lingered_ += n;
            if (ec || self->lingered_ > kLingerBytes) {
                beast::error_code ignored;
                beast::get_lowest_layer(self->stream_).close(ignored);
                self->timer_.cancel();
                return;
            }
            self->linger_read();
        });
    }

    static constexpr std::size_t kReadSize = 4096;

    HttpServer &srv_;
    HttpServer::Counts &counts_;
    Stream stream_;
    beast::flat_buffer buffer_;
    ApiRequest request_;                 // refilled by each request's parser
    std::optional<RequestParser> parser_;
    Timer timer_{stream_.get_executor()};
    Clock::time_point deadline_{};
    bool timer_armed_ = false;
    std::string out_;
    std::unique_ptr<SseStream<Stream>> sse_;   // once the connection is an event stream
    ConnCache conn_cache_;
    bool in_handle_ = false;
    bool continue_sent_ = false;   // this request's 100 Continue
    bool linger_ = false;          // refused: a lingering close after the answer
    std::size_t lingered_ = 0;
    bool head_ = false;   // the request in hand is a HEAD: its answer has no body
    bool keep_ = true;
    unsigned version_ = 11;
    std::optional<ApiResponse> ready_;
    std::shared_ptr<void> writing_hold_;   // the answer being written's (ApiResponse::hold)
    std::shared_ptr<Session> hold_;      // while an answer is on its way from another thread
};

void start_session(HttpServer &srv, HttpServer::Counts &counts, Socket socket) {
    if (srv.tls) std::make_shared<Session<TlsStream>>(srv, counts, std::move(socket), *srv.tls)->run();
    else std::make_shared<Session<Socket>>(srv, counts, std::move(socket))->run();
}

}  // namespace

HttpServer::HttpServer(std::vector<std::unique_ptr<asio::io_context>> &ios, const BrokerConfig &cfg, ApiHandler &svc)
    : service(svc),
      limits{cfg.header_bytes, cfg.body_bytes, cfg.read_timeout_ms, cfg.max_connections, cfg.sse_keepalive_ms,
             cfg.sse_buffer_bytes},
      ios_(ios), counts_(ios.size()), acceptor_(std::in_place, *ios.front()) {
    if (!cfg.plain_http) {
        tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
        tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                         asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
        tls->use_certificate_chain_file(cfg.tls_cert);
        tls->use_private_key_file(cfg.tls_key, asio::ssl::context::pem);
    }
    tcp::endpoint ep(asio::ip::make_address(cfg.listen_host), cfg.listen_port);
    acceptor_->open(ep.protocol());
    acceptor_->set_option(asio::socket_base::reuse_address(true));
    acceptor_->bind(ep);
    acceptor_->listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_->local_endpoint().port();
}

void HttpServer::start() { do_accept(); }

void HttpServer::shutdown() {
    accept_pause_.reset();
    acceptor_.reset();
    for (auto &ctx : ios_) ctx.reset();
}

void HttpServer::stop() {
    asio::post(acceptor_->get_executor(), [this] {
        beast::error_code ec;
        acceptor_->close(ec);
        if (accept_pause_) accept_pause_->cancel();
    });
}

int HttpServer::open_sessions() const {
    int n = 0;
    for (const auto &c : counts_) n += c.open.load(std::memory_order_relaxed);
    return n;
}

int HttpServer::busy_sessions() const {
    int n = 0;
    for (const auto &c : counts_) n += c.busy.load(std::memory_order_relaxed);
    return n;
}

void HttpServer::do_accept() {
    if (!acceptor_ || !acceptor_->is_open()) return;   // stopped
    const std::size_t i = next_++ % ios_.size();
    acceptor_->async_accept(*ios_[i], [this, i](beast::error_code ec, Socket socket) {
        if (ec == asio::error::operation_aborted) return;
        if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space || ec == asio::error::no_memory ||
            ec.value() == ENFILE) {
            fail(ec, "accept (waiting 100 ms)");
            if (!accept_pause_) accept_pause_.emplace(acceptor_->get_executor());
            accept_pause_->expires_after(std::chrono::milliseconds(100));
            return accept_pause_->async_wait([this](beast::error_code e) { if (!e) do_accept(); });
        }
        if (!ec) {
            beast::error_code ignored;
            socket.set_option(tcp::no_delay(true), ignored);
            if (open_sessions() < limits.max_connections) {
                start_session(*this, counts_[i], std::move(socket));
            } else {
                // Over the cap: on the new connection's thread, the
                // connection that has waited longest for its request (a
                // slowloris, an idle keep-alive) makes room for it, else the
                // one that has waited longest for its reader, once stalled
                // a quarter of read_timeout_ms; with neither, the new one
                // is refused rather than queued.
                asio::post(*ios_[i], [this, i, s = std::make_shared<Socket>(std::move(socket))]() mutable {
                    Counts &c = counts_[i];
                    const auto stalled = std::chrono::milliseconds(std::max(limits.read_timeout_ms / 4, 1));
                    if (c.waiting.oldest) {
                        c.waiting.oldest->shed();
                    } else if (c.writing.oldest && std::chrono::steady_clock::now() - c.writing.oldest->since >= stalled) {
                        c.writing.oldest->shed_writer();
                    } else {
                        refused.fetch_add(1, std::memory_order_relaxed);
                        beast::error_code ignored;
                        s->close(ignored);
                        return;
                    }
                    start_session(*this, c, std::move(*s));
                });
            }
        }
        do_accept();
    });
}

}  // namespace shardnet::broker
