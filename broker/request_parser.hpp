// Beast's HTTP/1 parser engine (limits, framing, keep-alive, chunked
// bodies) filling a request of the broker's own shape: method, target,
// bearer token and body. Beast's request_parser keeps every header field in
// basic_fields, one allocation each; the API reads one of them.
#pragma once
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <string>

#include "service.hpp"

namespace shardnet::broker {

// It fills the connection's ApiRequest, cleared for each request: the
// strings keep their capacity, so a heartbeat on a kept-alive connection
// allocates none.
class RequestParser : public boost::beast::http::basic_parser<true> {
public:
    explicit RequestParser(ApiRequest &out) : out_(out) {
        out_.method.clear();
        out_.target.clear();
        out_.bearer.clear();
        out_.body.clear();
    }
    unsigned version = 11;

private:
    using string_view = boost::beast::string_view;
    using error_code = boost::beast::error_code;

    void on_request_impl(boost::beast::http::verb, string_view m, string_view t, int v, error_code &) override {
        out_.method.assign(m.data(), m.size());
        out_.target.assign(t.data(), t.size());
        version = unsigned(v);
    }
    void on_response_impl(int, string_view, int, error_code &) override {}
    void on_field_impl(boost::beast::http::field f, string_view, string_view value, error_code &) override {
        if (f == boost::beast::http::field::authorization && value.size() > 7 &&
            boost::beast::iequals(value.substr(0, 7), "Bearer "))
            out_.bearer.assign(value.data() + 7, value.size() - 7);
    }
    void on_header_impl(error_code &) override {}
    // The base has checked the length against body_limit before this.
    void on_body_init_impl(const boost::optional<std::uint64_t> &length, error_code &) override {
        if (length) out_.body.reserve(std::size_t(*length));
    }
    std::size_t on_body_impl(string_view s, error_code &) override {
        out_.body.append(s.data(), s.size());
        return s.size();
    }
    void on_chunk_header_impl(std::uint64_t, string_view, error_code &) override {}
    std::size_t on_chunk_body_impl(std::uint64_t, string_view s, error_code &) override {
        out_.body.append(s.data(), s.size());
        return s.size();
    }
    void on_finish_impl(error_code &) override {}

    ApiRequest &out_;
};

}  // namespace shardnet::broker
