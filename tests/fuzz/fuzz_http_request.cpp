// Fuzz target: the broker's HTTP request reader (broker/http/request_parser.hpp
// on Beast's basic_parser), driven as http_server.cpp drives it: eager, the
// default header and body limits, the bytes arriving in pieces, requests
// pipelined on one kept-alive connection. The first byte picks the piece size.
#include <boost/beast/http/error.hpp>
#include <cstdint>
#include <string>

#include "broker/http/request_parser.hpp"
#include "tests/fuzz/fuzz_assert.hpp"

using namespace shardnet::broker;
namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    if (size == 0) return 0;
    const std::size_t piece = 1 + (data[0] % 64 == 0 ? size : data[0] % 64);
    const char *bytes = reinterpret_cast<const char *>(data + 1);
    const std::size_t n = size - 1;
    std::size_t fed = 0;   // bytes handed to the parsers so far (the read buffer's end)
    std::size_t used = 0;  // bytes the parsers consumed
    ApiRequest req;
    for (int requests = 0; requests < 64 && used < n; ++requests) {
        RequestParser parser(req);
        parser.eager(true);
        parser.header_limit(8192);
        parser.body_limit(1 << 20);
        boost::beast::error_code ec;
        bool stalled = true;   // the last put took nothing, or asked for more: read another piece
        for (;;) {
            if (fed < used) fed = used;
            if (fed == used || stalled) fed = std::min(n, fed + piece);
            ec = {};
            const std::size_t got = parser.put(boost::asio::const_buffer(bytes + used, fed - used), ec);
            FUZZ_CHECK(got <= fed - used, "the parser consumes only what it was given");
            used += got;
            stalled = got == 0 || ec == http::error::need_more;
            if (ec && ec != http::error::need_more) break;
            if (parser.is_done()) break;
            if (fed == n && (ec || got == 0)) {   // end of stream mid-request
                ec = http::error::partial_message;
                break;
            }
        }
        if (ec) {
            FUZZ_CHECK(parser.refusal_status == 0 || parser.refusal_status == 400 || parser.refusal_status == 501,
                       "a refusal is 400 or 501");
            FUZZ_CHECK(parser.refusal_status == 0 || *parser.refusal != '\0', "a refusal says why");
            break;
        }
        FUZZ_CHECK(parser.refusal_status == 0, "a request read whole was not refused");
        FUZZ_CHECK(!req.method.empty(), "a request read whole has a method");
        FUZZ_CHECK(req.body.size() <= (1u << 20), "the body stays within body_limit");
        if (!parser.keep_alive()) break;
    }
    return 0;
}
