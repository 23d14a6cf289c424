// The dashboard's files as the broker serves them (broker/web): built in,
// typed, compressed on request, cached by ETag, under a CSP; and its routes
// come after every API route (the heartbeat stays the first row).
#include <doctest/doctest.h>

#include <string>

#include "broker/api/routes.hpp"
#include "broker/http/request_parser.hpp"
#include "broker/web/assets.hpp"
#include "broker/web/static_files.hpp"

using namespace shardnet::broker;

namespace {
std::string headers(const ApiResponse &r) { return r.headers ? r.headers : ""; }
}  // namespace

TEST_CASE("web: every file of web/ is built in, with its gzip twin and an ETag") {
    REQUIRE(web::kAssetCount >= 5);
    bool index = false;
    for (std::size_t i = 0; i < web::kAssetCount; ++i) {
        const auto &a = web::kAssets[i];
        CHECK_MESSAGE(!a.body.empty(), a.name);
        CHECK_MESSAGE(a.gzip.size() > 2, a.name);
        CHECK_MESSAGE((unsigned char)a.gzip[0] == 0x1f, a.name);   // gzip's magic
        CHECK_MESSAGE(std::string(a.etag).front() == '"', a.name);
        index |= a.name == "index.html";
    }
    CHECK(index);
}

TEST_CASE("web: / is the page, under default-src 'self', revalidated by ETag") {
    ApiRequest req;
    ApiResponse r = web::serve(req, "index.html");
    CHECK(r.status == 200);
    CHECK(std::string(r.content_type) == "text/html; charset=utf-8");
    CHECK(r.body.find("<script type=\"module\"") != std::string::npos);
    CHECK(r.body.find("<script>") == std::string::npos);   // nothing inline: the CSP would refuse it
    const std::string h = headers(r);
    CHECK(h.find("Content-Security-Policy: default-src 'self'") != std::string::npos);
    CHECK(h.find("Cache-Control: no-cache\r\n") != std::string::npos);
    CHECK(h.find("Content-Encoding") == std::string::npos);
    const auto at = h.find("ETag: ");
    REQUIRE(at != std::string::npos);
    req.if_none_match = h.substr(at + 6, h.find("\r\n", at) - at - 6);
    ApiResponse again = web::serve(req, "index.html");
    CHECK(again.status == 304);
    CHECK(again.body.empty());
}

TEST_CASE("web: gzip when the client takes it, with an ETag of its own; unknown files 404 no_file") {
    ApiRequest req;
    req.accepts_gzip = true;
    ApiResponse r = web::serve(req, "main.js");
    CHECK(r.status == 200);
    CHECK(std::string(r.content_type) == "text/javascript; charset=utf-8");
    CHECK(headers(r).find("Content-Encoding: gzip\r\n") != std::string::npos);
    CHECK(headers(r).find("-gz\"") != std::string::npos);
    CHECK((unsigned char)r.body[0] == 0x1f);
    ApiResponse missing = web::serve(req, "../broker.json");
    CHECK(missing.status == 404);
    CHECK(missing.body.find("no_file") != std::string::npos);
}

TEST_CASE("web: the heartbeat is still the first route, the dashboard's files the last") {
    const auto routes = api_routes();
    REQUIRE(routes.size() >= 4);
    CHECK(routes.front().pattern == "/v1/heartbeats");
    CHECK(routes[routes.size() - 1].pattern == "/ui/{file}");
    CHECK(routes[routes.size() - 2].pattern == "/");
    CHECK(routes[routes.size() - 1].scopes == r_public);
}

TEST_CASE("web: Accept-Encoding as RFC 9110 reads it: a qvalue of 0 refuses gzip, * takes it unless gzip is refused") {
    const std::pair<const char *, bool> cases[] = {
        {"gzip", true}, {"gzip, deflate, br", true}, {"deflate, GZIP", true}, {"br;q=1.0, gzip;q=0.8", true}, {"x-gzip", true},
        {"gzip;q=0", false}, {"gzip; q=0.000", false}, {"gzip;Q=0", false}, {"*", true}, {"*;q=0", false},
        {"gzip;q=0, *", false}, {"*, gzip;q=0", false}, {"identity", false}, {"", false}, {"deflate", false},
        {"gzip;q=0.001", true}, {"notgzip", false}, {"gzipped", false}, {"gzip;level=9", true},
    };
    for (const auto &[value, want] : cases) {
        CAPTURE(value);
        CHECK(RequestParser::gzip_acceptable(value) == want);
    }
}
