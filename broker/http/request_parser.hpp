// Beast's HTTP/1 parser engine (limits, framing, keep-alive, chunked
// bodies) filling a request of the broker's own shape: method, target,
// bearer token and body. Beast's request_parser keeps every header field in
// basic_fields, one allocation each; the API reads one of them.
#pragma once
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <string>

#include "broker/http/api_message.hpp"

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
        out_.last_event_id.clear();
        out_.if_none_match.clear();
        out_.accepts_gzip = false;
    }
    unsigned version = 11;
    // "Expect: 100-continue" (RFC 9110 10.1.1): the client waits for a 100
    // before it sends the body, when the broker will read it.
    bool expect_continue = false;
    // Set when the header is one the broker must not act on (RFC 9112): the
    // answer's status and why; the connection then closes.
    unsigned refusal_status = 0;
    const char *refusal = "";

private:
    using string_view = boost::beast::string_view;
    using error_code = boost::beast::error_code;

    void on_request_impl(boost::beast::http::verb, string_view m, string_view t, int v, error_code &) override {
        out_.method.assign(m.data(), m.size());
        out_.target.assign(t.data(), t.size());
        version = unsigned(v);
    }
    void on_response_impl(int, string_view, int, error_code &) override {}
    void on_field_impl(boost::beast::http::field f, string_view name, string_view value, error_code &) override {
        using boost::beast::http::field;
        if (f == field::authorization && value.size() > 7 && boost::beast::iequals(value.substr(0, 7), "Bearer "))
            out_.bearer.assign(value.data() + 7, value.size() - 7);
        else if (f == field::host) ++hosts_;
        else if (f == field::expect) expect_continue = boost::beast::iequals(trim(value), "100-continue");
        // An SSE client's reconnect says where it was (not in Beast's field list).
        else if (f == field::unknown && boost::beast::iequals(name, "Last-Event-ID"))
            out_.last_event_id.assign(value.data(), value.size());
        else if (f == field::if_none_match) out_.if_none_match.assign(value.data(), value.size());
        else if (f == field::accept_encoding) out_.accepts_gzip = gzip_acceptable(value);
        else if (f == field::transfer_encoding) {
            for (std::size_t start = 0; start <= value.size();) {   // "gzip, chunked": one coding each
                auto comma = value.find(',', start);
                if (comma == string_view::npos) comma = value.size();
                const string_view coding = trim(value.substr(start, comma - start));
                ++te_codings_;
                te_last_chunked_ = boost::beast::iequals(coding, "chunked");
                if (te_last_chunked_) ++te_chunked_;
                start = comma + 1;
            }
        }
    }
    // A Transfer-Encoding other than exactly "chunked" (one field) is how a
    // request is smuggled past a proxy that reads it differently: refused
    // before its body, and the connection closed. So is an HTTP/1.1 request
    // without exactly one Host.
    void on_header_impl(error_code &ec) override {
        if (te_codings_ > 0 && (!te_last_chunked_ || te_chunked_ > 1)) {   // RFC 9112 6.3: the length is unknown
            refusal_status = 400;
            refusal = "Transfer-Encoding: chunked must be the last coding, once";
            ec = boost::beast::http::error::bad_transfer_encoding;
        } else if (te_codings_ > 1) {   // gzip, deflate, ... before chunked
            refusal_status = 501;
            refusal = "Transfer-Encoding: only chunked is implemented";
            ec = boost::beast::http::error::bad_transfer_encoding;
        } else if (version == 11 && hosts_ != 1) {
            refusal_status = 400;
            refusal = hosts_ == 0 ? "Host: an HTTP/1.1 request needs one" : "Host: given more than once";
            ec = boost::beast::http::error::bad_field;
        }
    }
public:
    // Accept-Encoding (RFC 9110 12.5.3): gzip is acceptable when named, or
    // matched by "*", with a qvalue above 0; "gzip;q=0" refuses it even
    // where "*" would take it.
    static bool gzip_acceptable(string_view value) {
        int gzip = -1, star = -1;   // -1: not named; 0: refused; 1: acceptable
        for (std::size_t start = 0; start <= value.size();) {
            auto comma = value.find(',', start);
            if (comma == string_view::npos) comma = value.size();
            string_view item = trim(value.substr(start, comma - start));
            start = comma + 1;
            string_view coding = item, params;
            if (auto semi = item.find(';'); semi != string_view::npos) coding = trim(item.substr(0, semi)), params = item.substr(semi + 1);
            bool zero = false;
            for (std::size_t p = 0; p <= params.size();) {   // ";q=0", ";q=0.000"; other parameters are ignored
                auto next = params.find(';', p);
                if (next == string_view::npos) next = params.size();
                const string_view param = trim(params.substr(p, next - p));
                p = next + 1;
                if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
                    const string_view q = trim(param.substr(2));
                    zero = !q.empty() && q[0] == '0' && q.find_first_not_of("0.", 0) == string_view::npos;
                }
            }
            if (boost::beast::iequals(coding, "gzip") || boost::beast::iequals(coding, "x-gzip")) gzip = zero ? 0 : std::max(gzip, 1);
            else if (coding == "*") star = zero ? 0 : 1;
        }
        return gzip == 1 || (gzip == -1 && star == 1);
    }

private:
    static string_view trim(string_view v) {
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
        return v;
    }
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
    int hosts_ = 0, te_codings_ = 0, te_chunked_ = 0;
    bool te_last_chunked_ = false;
};

}  // namespace shardnet::broker
