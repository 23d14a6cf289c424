// The route table (broker/service_routes.cpp): its matcher, the methods a path
// takes (405's Allow), and doc/broker-openapi.json against it: every served
// (method, pattern) is documented, and nothing else is.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "broker/api/routes.hpp"

#ifndef OPENAPI_DOC
#error "OPENAPI_DOC: the path of doc/broker-openapi.json (tests/Makefile.am defines it)"
#endif

using namespace shardnet::broker;
namespace json = boost::json;

namespace {

bool matches(std::string_view pattern, std::string_view path, RouteParams &p) { return path_matches(pattern, path, p); }
bool matches(std::string_view pattern, std::string_view path) {
    RouteParams p;
    return path_matches(pattern, path, p);
}

json::object openapi_doc() {
    std::ifstream in(OPENAPI_DOC);
    REQUIRE_MESSAGE(in.good(), "cannot read " OPENAPI_DOC);
    std::stringstream ss;
    ss << in.rdbuf();
    json::error_code ec;
    json::value v = json::parse(ss.str(), ec);
    REQUIRE_MESSAGE(!ec, OPENAPI_DOC " is not JSON: " << ec.message());
    REQUIRE(v.is_object());
    REQUIRE(v.as_object().contains("paths"));
    REQUIRE(v.at("paths").is_object());
    return v.as_object();
}

std::string upper(std::string s) {
    for (char &c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

const char *const kMethods[] = {"get", "put", "post", "delete", "options", "head", "patch", "trace"};

}  // namespace

TEST_CASE("path_matches: literal segments, and a {name} takes exactly one non-empty segment") {
    RouteParams p;
    CHECK(matches("/v1/health", "/v1/health", p));
    CHECK(p.n == 0);
    CHECK(matches("/v1/runs/{id}/cancel", "/v1/runs/r1/cancel", p));
    REQUIRE(p.n == 1);
    CHECK(p.p[0] == "r1");
    CHECK(matches("/v1/runs/{id}/checkpoints/{name}/commit", "/v1/runs/train.7/checkpoints/step-100/commit", p));
    REQUIRE(p.n == 2);
    CHECK(p.p[0] == "train.7");
    CHECK(p.p[1] == "step-100");
    CHECK_FALSE(matches("/v1/health", "/v1/healthz"));
    CHECK_FALSE(matches("/v1/health", "/v1/Health"));
    CHECK_FALSE(matches("/v1/runs/{id}/cancel", "/v1/runs/r1/kill"));
    CHECK_FALSE(matches("/v1/runs/{id}", "/v2/runs/r1"));
}

TEST_CASE("path_matches: a parameter is a view into the path, and each match starts its parameters afresh") {
    const std::string path = "/v1/runs/abc/events";
    RouteParams p;
    REQUIRE(matches("/v1/runs/{id}/events", path, p));
    REQUIRE(p.n == 1);
    CHECK(p.p[0].data() == path.data() + 9);
    CHECK(p.p[0].size() == 3);
    REQUIRE(matches("/v1/health", "/v1/health", p));
    CHECK(p.n == 0);
    CHECK_FALSE(matches("/v1/runs/{id}/checkpoints/{name}/commit", "/v1/runs/a/checkpoints/b/seal", p));
}

TEST_CASE("path_matches: repeated and trailing slashes are ignored") {
    RouteParams p;
    CHECK(matches("/v1/health", "/v1/health/"));
    CHECK(matches("/v1/health", "//v1//health//"));
    CHECK(matches("/v1/health", "v1/health"));
    CHECK(matches("/v1/runs/{id}/cancel", "/v1/runs//r1///cancel/", p));
    REQUIRE(p.n == 1);
    CHECK(p.p[0] == "r1");   // the slashes are not part of the parameter
}

TEST_CASE("path_matches: too many segments, too few (a prefix of the pattern) and an empty parameter do not match") {
    CHECK_FALSE(matches("/v1/runs/{id}/cancel", "/v1/runs/r1/cancel/now"));
    CHECK_FALSE(matches("/v1/runs/{id}", "/v1/runs/r1/x"));
    CHECK_FALSE(matches("/v1/runs", "/v1/runs/r1"));            // the pattern is a prefix of the path
    CHECK_FALSE(matches("/v1/runs/{id}/cancel", "/v1/runs/r1"));  // the path is a prefix of the pattern
    CHECK_FALSE(matches("/v1/runs/{id}", "/v1/runs"));
    CHECK_FALSE(matches("/v1/runs/{id}", "/v1/runs/"));
    CHECK_FALSE(matches("/v1/runs/{id}", "/v1/runs//"));
    CHECK_FALSE(matches("/v1/runs", "/v1/run"));                // a prefix of a segment
    CHECK_FALSE(matches("/v1/run", "/v1/runs"));
    CHECK_FALSE(matches("/v1/health", ""));
    CHECK_FALSE(matches("/v1/health", "/"));
}

TEST_CASE("path_matches: more {name} segments than RouteParams holds do not match") {
    RouteParams p;
    CHECK(matches("/{a}/{b}", "/x/y", p));
    CHECK(p.n == RouteParams::kMax);
    CHECK_FALSE(matches("/{a}/{b}/{c}", "/x/y/z", p));
}

TEST_CASE("route_methods: the methods a path takes, for 405's Allow") {
    CHECK(std::string(route_methods("/v1/runs")) == "GET, HEAD, POST");
    CHECK(std::string(route_methods("/v1/nodes/")) == "GET, HEAD, POST");
    CHECK(std::string(route_methods("/v1/health")) == "GET, HEAD");
    CHECK(std::string(route_methods("/v1/nodes/h1")) == "GET, HEAD");
    CHECK(std::string(route_methods("/v1/heartbeats")) == "POST");
    CHECK(std::string(route_methods("/v1/runs/r1/checkpoints/c/commit")) == "POST");
    CHECK(route_methods("/v1/nope") == nullptr);
    CHECK(route_methods("/v1/runs/r1/cancel/x") == nullptr);
}

TEST_CASE("the route table: one row per method and pattern, GET or POST, each {name} a whole segment") {
    std::set<std::string> seen;
    for (const auto &r : api_routes()) {
        const std::string m(r.method), pat(r.pattern);
        CHECK_MESSAGE((m == "GET" || m == "POST"), m << " " << pat);
        CHECK_MESSAGE(seen.insert(m + " " + pat).second, "twice: " << m << " " << pat);
        CHECK_MESSAGE(pat.front() == '/', pat);
        // A pattern matches itself, its parameters standing for themselves.
        RouteParams p;
        CHECK_MESSAGE(path_matches(pat, pat, p), pat);
        if (r.scopes != r_public) CHECK_MESSAGE(r.forbidden != nullptr, pat);
    }
    CHECK(seen.size() >= 16);
}

TEST_CASE("doc/broker-openapi.json documents every served route and no other (HEAD implied by GET)") {
    const json::object doc = openapi_doc();
    std::set<std::string> documented, served;
    for (const auto &[path, item] : doc.at("paths").as_object()) {
        REQUIRE_MESSAGE(item.is_object(), std::string(path));
        for (const char *m : kMethods) {
            if (!item.as_object().contains(m)) continue;
            if (std::string_view(m) == "head") {
                // Every GET answers HEAD: a head operation may be documented
                // only beside its GET.
                CHECK_MESSAGE(item.as_object().contains("get"), "HEAD " << std::string(path) << " without GET");
                continue;
            }
            documented.insert(upper(m) + " " + std::string(path));
        }
    }
    for (const auto &r : api_routes()) served.insert(std::string(r.method) + " " + std::string(r.pattern));
    for (const auto &s : served) CHECK_MESSAGE(documented.count(s), "served but not in " OPENAPI_DOC ": " << s);
    for (const auto &d : documented) CHECK_MESSAGE(served.count(d), "in " OPENAPI_DOC " but not served: " << d);
    CHECK(documented == served);
}

TEST_CASE("doc/broker-openapi.json: who may call a route, as the table says") {
    const json::object doc = openapi_doc();
    const auto &paths = doc.at("paths").as_object();
    const bool global_security = doc.contains("security") && doc.at("security").is_array() && !doc.at("security").as_array().empty();
    for (const auto &r : api_routes()) {
        std::string m(r.method);
        for (char &c : m) c = char(std::tolower(static_cast<unsigned char>(c)));
        const auto *item = paths.if_contains(r.pattern);
        if (!item || !item->is_object() || !item->as_object().contains(m)) continue;  // reported above
        const auto &op = item->as_object().at(m).as_object();
        const std::string where = std::string(r.method) + " " + std::string(r.pattern);
        const json::value *sec = op.if_contains("security");
        const bool token = sec ? sec->is_array() && !sec->as_array().empty() : global_security;
        REQUIRE_MESSAGE(op.contains("responses"), where);
        const auto &responses = op.at("responses").as_object();
        if (r.scopes == r_public) {
            CHECK_MESSAGE(!token, where << ": takes no token, yet the document asks one");
            CHECK_MESSAGE(!responses.contains("401"), where << ": takes no token, yet lists 401");
        } else {
            CHECK_MESSAGE(token, where << ": takes a token, the document says none");
            CHECK_MESSAGE(responses.contains("401"), where << ": 401 not listed");
            CHECK_MESSAGE(responses.contains("429"), where << ": 429 not listed");
        }
        // A route some scope may not call answers that scope 403.
        if (r.scopes != r_public && r.scopes != (r_worker | r_user | r_peer | r_admin))
            CHECK_MESSAGE(responses.contains("403"), where << ": some scopes are refused, 403 not listed");
    }
}
