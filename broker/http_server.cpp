#include "http_server.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

namespace shardnet::broker {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
public:
    template <class... Args>
    Session(HttpServer &srv, Args &&...args) : srv_(srv), stream_(std::forward<Args>(args)...) { ++srv_.open_sessions; }
    ~Session() { --srv_.open_sessions; }

    void run() {
        if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
            beast::get_lowest_layer(stream_).expires_after(std::chrono::milliseconds(srv_.limits.read_timeout_ms));
            stream_.async_handshake(asio::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
                if (!ec) self->do_read();
            });
        } else {
            asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->do_read(); });
        }
    }

private:
    void do_read() {
        parser_.emplace();
        parser_->header_limit(std::uint32_t(srv_.limits.header_bytes));
        parser_->body_limit(srv_.limits.body_bytes);
        // One deadline for the whole request: a client that trickles its
        // headers or body (slowloris) is cut off when it passes.
        beast::get_lowest_layer(stream_).expires_after(std::chrono::milliseconds(srv_.limits.read_timeout_ms));
        http::async_read(stream_, buffer_, *parser_,
                         [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
    }

    void on_read(beast::error_code ec) {
        if (ec == http::error::end_of_stream) return close();
        if (ec == http::error::body_limit)
            return send(error_response(413, "body_too_large", "request body exceeds " + std::to_string(srv_.limits.body_bytes) + " bytes"), false, 11);
        if (ec == http::error::header_limit)
            return send(error_response(431, "headers_too_large", "request headers exceed " + std::to_string(srv_.limits.header_bytes) + " bytes"), false, 11);
        if (ec == beast::error::timeout) return;  // the socket is closed by the deadline
        if (ec) {
            if (buffer_.size() > 0 || parser_->got_some())
                return send(error_response(400, "bad_request", "malformed HTTP: " + ec.message()), false, 11);
            return close();
        }
        auto req = parser_->release();
        ApiRequest ar;
        ar.method = std::string(req.method_string());
        ar.target = std::string(req.target());
        auto auth = req[http::field::authorization];
        if (auth.size() > 7 && beast::iequals(auth.substr(0, 7), "Bearer ")) ar.bearer = std::string(auth.substr(7));
        ar.body = std::move(req.body());
        const bool keep = req.keep_alive();
        const unsigned version = req.version();
        beast::get_lowest_layer(stream_).expires_never();
        srv_.service.handle(std::move(ar), [self = this->shared_from_this(), keep, version](ApiResponse r) {
            // The answer may come from the store's thread: back to our strand.
            asio::post(self->stream_.get_executor(), [self, r = std::move(r), keep, version]() mutable {
                self->send(std::move(r), keep, version);
            });
        });
    }

    void send(ApiResponse r, bool keep, unsigned version) {
        auto res = std::make_shared<http::response<http::string_body>>(http::status(r.status), version);
        res->set(http::field::server, "shardnet-broker");
        if (!r.body.empty()) res->set(http::field::content_type, r.content_type);
        res->keep_alive(keep);
        res->body() = std::move(r.body);
        res->prepare_payload();
        res_ = res;
        beast::get_lowest_layer(stream_).expires_after(std::chrono::milliseconds(srv_.limits.read_timeout_ms));
        http::async_write(stream_, *res_, [self = this->shared_from_this(), keep](beast::error_code ec, std::size_t) {
            self->res_.reset();
            if (ec || !keep) return self->close();
            self->do_read();
        });
    }

    void close() {
        beast::error_code ec;
        beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_send, ec);
    }

    HttpServer &srv_;
    Stream stream_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::shared_ptr<http::response<http::string_body>> res_;
};

}  // namespace

HttpServer::HttpServer(asio::io_context &io, const BrokerConfig &cfg, Service &svc)
    : service(svc),
      limits{cfg.header_bytes, cfg.body_bytes, cfg.read_timeout_ms, cfg.max_connections},
      io_(io), acceptor_(asio::make_strand(io)) {
    if (!cfg.plain_http) {
        tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
        tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                         asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
        tls->use_certificate_chain_file(cfg.tls_cert);
        tls->use_private_key_file(cfg.tls_key, asio::ssl::context::pem);
    }
    tcp::endpoint ep(asio::ip::make_address(cfg.listen_host), cfg.listen_port);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_.local_endpoint().port();
}

void HttpServer::start() { do_accept(); }

void HttpServer::stop() {
    asio::post(acceptor_.get_executor(), [this] {
        beast::error_code ec;
        acceptor_.close(ec);
    });
}

void HttpServer::do_accept() {
    acceptor_.async_accept(asio::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted) return;
        if (!ec) {
            if (open_sessions.load() >= limits.max_connections) {
                beast::error_code ignored;
                socket.close(ignored);  // over the cap: refuse rather than queue
            } else if (tls) {
                socket.set_option(tcp::no_delay(true));
                std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, std::move(socket), *tls)->run();
            } else {
                socket.set_option(tcp::no_delay(true));
                std::make_shared<Session<beast::tcp_stream>>(*this, std::move(socket))->run();
            }
        }
        do_accept();
    });
}

}  // namespace shardnet::broker
