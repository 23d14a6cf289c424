// API v1's route table: every resource the broker serves, its method, who
// may call it, and the handler (service_routes.cpp). The HTTP layer knows none
// of it; tests compare the table with doc/broker-openapi.json.
#pragma once
#include <cstddef>
#include <span>
#include <string_view>

namespace shardnet::broker {

// Who may call a route: a set of token scopes; 0 is anyone, no token asked.
enum RouteScope : unsigned { r_public = 0, r_worker = 1, r_user = 2, r_peer = 4, r_admin = 8 };

struct RouteSpec {
    std::string_view method;    // "GET" (HEAD answers too) or "POST"
    std::string_view pattern;   // "/v1/runs/{id}/cancel": a {name} is one path segment (views: their lengths are known)
    unsigned scopes;        // RouteScope bits
    const char *forbidden;  // the 403 message for a token of another scope
};

// The {name} segments of a matched path, in order (views into the path).
struct RouteParams {
    static constexpr int kMax = 2;
    std::string_view p[kMax];
    int n = 0;
};

// Whether path (no query) fits pattern, segment by segment (repeated and
// trailing slashes ignored, as everywhere in the API); fills params. Copies
// and allocates nothing: the heartbeat hot path goes through it.
bool path_matches(std::string_view pattern, std::string_view path, RouteParams &params);

// The table (its order is the order of matching).
std::span<const RouteSpec> api_routes();

// For 405: the methods that path takes ("GET, HEAD", "POST", both), or null
// when no route has that path.
const char *route_methods(std::string_view path);

}  // namespace shardnet::broker
