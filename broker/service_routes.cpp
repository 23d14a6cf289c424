// API v1: the route table and the dispatch of a request to its handler.
#include "broker/api/routes.hpp"

#include "broker/service.hpp"

#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <openssl/rand.h>

#include "broker/api/heartbeat_body.hpp"
#include "common/parse_util.hpp"
#include "broker/core/api_util.hpp"
#include "broker/web/static_files.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;
using namespace std::literals;

namespace {

// The next non-empty segment of s from i on; i moves past it.
std::string_view next_segment(std::string_view s, std::size_t &i) {
    while (i < s.size() && s[i] == '/') ++i;
    const std::size_t start = i;
    while (i < s.size() && s[i] != '/') ++i;
    return s.substr(start, i - start);
}

}  // namespace

// A handler sees the request, its caller, and the pattern's parameters.
struct Service::Call {
    const ApiRequest &req;
    const TokenEntry &who;
    const Reply &reply;
    double now;
    RouteParams params;
    std::string query;
    std::string p(int i) const { return std::string(params.p[i]); }
};

bool path_matches(std::string_view pattern, std::string_view path, RouteParams &params) {
    params.n = 0;
    // Most requests name a fixed path exactly as the table has it (the
    // heartbeat's): one comparison, no walk.
    if (path == pattern && pattern.find('{') == std::string_view::npos) return true;
    std::size_t i = 0, j = 0;
    for (;;) {
        const std::string_view want = next_segment(pattern, i), got = next_segment(path, j);
        if (want.empty() || got.empty()) return want.empty() && got.empty();
        if (want.front() == '{') {
            if (params.n == RouteParams::kMax) return false;
            params.p[params.n++] = got;
        } else if (want != got) {
            return false;
        }
    }
}

// One row per resource and method. scopes: who may call it (RouteScope).
// The handlers are Service's (they reach its modules); a handler checks
// what is finer than a scope (a run's owner, a bound token) itself.
struct Service::Route {
    RouteSpec spec;
    void (*run)(Service &, const Call &);
};

std::span<const Service::Route> Service::routes() {
    static const Route table[] = {
        // The hot path first: one comparison of two segments.
        {{"POST", "/v1/heartbeats", r_worker | r_admin, "heartbeats need a worker or admin token"},
         [](Service &s, const Call &c) { s.heartbeats(c.req, c.who, c.reply, c.now); }},
        {{"GET", "/v1/health", r_public, ""}, [](Service &s, const Call &c) { c.reply(ok_json(200, s.inventory_.health())); }},
        {{"GET", "/metrics", r_public, ""},
         [](Service &s, const Call &c) { c.reply(ApiResponse{200, s.metrics(), "text/plain; version=0.0.4"}); }},
        // The inventory placement trusts: the site's probe token, not a job's
        // (a user's agent could otherwise describe any node as it likes).
        {{"POST", "/v1/nodes", r_worker | r_admin, "node descriptors need the site's worker token (shardnet-probe) or an admin token"},
         [](Service &s, const Call &c) {
             if (c.who.bound)
                 return c.reply(error_response(403, "forbidden", "node descriptors need the site's worker token (shardnet-probe) or an admin token"));
             s.inventory_.put_node(c.req, c.reply, c.now);
         }},
        {{"GET", "/v1/nodes", r_worker | r_user | r_peer | r_admin, ""}, [](Service &s, const Call &c) { s.inventory_.get_nodes("", c.reply); }},
        {{"GET", "/v1/nodes/{host}", r_worker | r_user | r_peer | r_admin, ""},
         [](Service &s, const Call &c) { s.inventory_.get_nodes(c.p(0), c.reply); }},
        // Bad-node memory (inventory/bad_nodes.cpp): the site's to read and clear.
        {{"GET", "/v1/bad-nodes", r_admin, "bad-node memory needs an admin token"}, [](Service &s, const Call &c) { s.inventory_.list_bad_nodes(c.reply); }},
        {{"POST", "/v1/bad-nodes/{cluster}/{node}/clear", r_admin, "bad-node memory needs an admin token"},
         [](Service &s, const Call &c) { s.inventory_.clear_bad_node(c.p(0), c.p(1), c.reply); }},
        {{"GET", "/v1/clusters", r_worker | r_user | r_peer | r_admin, ""}, [](Service &s, const Call &c) { s.inventory_.list_clusters(c.reply); }},
        // A peer asks for this broker's own clusters only (no fan-out).
        {{"GET", "/v1/capacity", r_user | r_peer | r_admin, "capacity needs a user, peer or admin token"},
         [](Service &s, const Call &c) { s.inventory_.capacity(c.query, c.who.scope != Scope::peer, c.reply); }},
        {{"POST", "/v1/decisions", r_peer | r_admin, "decisions come from peer brokers (peer or admin token)"},
         [](Service &s, const Call &c) { s.inbox_.receive_decision(c.req, c.who, c.reply); }},
        {{"POST", "/v1/runs", r_user | r_admin, "creating runs needs a user or admin token"},
         [](Service &s, const Call &c) { s.runs_api_.create(c.req, c.who, c.reply, c.now); }},
        {{"GET", "/v1/runs", r_worker | r_user | r_peer | r_admin, ""}, [](Service &s, const Call &c) { s.runs_api_.list(c.who, c.reply); }},
        {{"GET", "/v1/runs/{id}", r_worker | r_user | r_peer | r_admin, ""},
         [](Service &s, const Call &c) { s.runs_api_.get(c.p(0), c.who, c.reply); }},
        {{"POST", "/v1/runs/{id}/cancel", r_worker | r_user | r_peer | r_admin, ""},
         [](Service &s, const Call &c) { s.runs_api_.cancel(c.p(0), c.who, c.reply, c.now); }},
        {{"GET", "/v1/runs/{id}/events", r_worker | r_user | r_peer | r_admin, ""},
         [](Service &s, const Call &c) {
             // ?follow=1: a stream of them (a handler kind: ApiResponse::stream).
             // (A HEAD asks for no body: it gets one page's header, as before.)
             if (const std::string f = query_param(c.query, "follow"); (f == "1" || f == "true") && c.req.method == "GET")
                 return s.runs_api_.follow(c.p(0), c.query, c.req.last_event_id, c.who, c.reply);
             s.runs_api_.events(c.p(0), c.query, c.who, c.reply);
         }},
        // Where a moved run went (federation/onward_api.cpp): asked by the
        // broker it came from, for its own run page.
        {{"GET", "/v1/runs/{id}/story", r_peer | r_admin, "a run's story is for the peer brokers it crossed (peer or admin token)"},
         [](Service &s, const Call &c) { s.onward_.story(c.p(0), c.who, c.reply); }},
        {{"GET", "/v1/runs/{id}/checkpoints", r_worker | r_user | r_peer | r_admin, ""},
         [](Service &s, const Call &c) { s.checkpoints_.list_checkpoints(c.p(0), c.query, c.who, c.reply); }},
        // What a resume checks each shard against (the trainer's reader token).
        {{"GET", "/v1/runs/{id}/checkpoints/{name}/files", r_worker | r_user | r_peer | r_admin, ""},
         [](Service &s, const Call &c) { s.checkpoints_.sealed_files(c.p(0), c.p(1), c.query, c.who, c.reply); }},
        {{"GET", "/v1/runs/{id}/policy", r_worker | r_user | r_peer | r_admin, ""},
         [](Service &s, const Call &c) { s.policy_.get_policy(c.p(0), c.who, c.reply); }},
        {{"POST", "/v1/runs/{id}/checkpoints/{name}/commit", r_worker | r_admin, "commits need a worker or admin token"},
         [](Service &s, const Call &c) { s.checkpoints_.commit(c.p(0), c.p(1), c.req, c.who, c.reply, c.now); }},
        {{"POST", "/v1/runs/{id}/ranks", r_worker | r_admin, "rank reports need a worker or admin token"},
         [](Service &s, const Call &c) { s.receipts_.report_ranks(c.p(0), c.req, c.who, c.reply, c.now); }},
        // `shard launch` in the batch step (its reader token; the dispatch lets it POST here only).
        {{"POST", "/v1/runs/{id}/restarts", r_worker | r_admin, "restart reports need the job's token or an admin token"},
         [](Service &s, const Call &c) { s.restarts_.restart_report(c.p(0), c.req, c.who, c.reply, c.now); }},
        {{"POST", "/v1/runs/{id}/environment", r_worker | r_admin, "environments need a worker or admin token"},
         [](Service &s, const Call &c) { s.runs_api_.keep_environment(c.p(0), c.req, c.who, c.reply); }},
        // Receipts (receipts/receipts_api.cpp): the keys are public (they
        // prove nothing by themselves); a run's receipts are its owner's,
        // admins' and the peers' it moved to or from; the log's hashes any
        // token's (they name no run).
        {{"GET", "/v1/keys", r_public, ""}, [](Service &s, const Call &c) { s.receipts_.get_keys(c.reply); }},
        {{"GET", "/v1/runs/{id}/receipts", r_user | r_peer | r_admin, "a run's receipts need a user, peer or admin token"},
         [](Service &s, const Call &c) { s.receipts_.get_receipts(c.p(0), c.query, c.who, c.reply); }},
        {{"GET", "/v1/log/head", r_worker | r_user | r_peer | r_admin, ""}, [](Service &s, const Call &c) { s.receipts_.get_log_head(c.reply); }},
        // The peers' log heads this broker witnessed (federation/witness.hpp).
        {{"GET", "/v1/witness", r_worker | r_user | r_peer | r_admin, ""}, [](Service &s, const Call &c) { s.witnesses_.get(c.reply); }},
        {{"GET", "/v1/log/proof/inclusion", r_worker | r_user | r_peer | r_admin, ""},
         [](Service &s, const Call &c) { s.receipts_.get_log_proof(true, c.query, c.reply); }},
        {{"GET", "/v1/log/proof/consistency", r_worker | r_user | r_peer | r_admin, ""},
         [](Service &s, const Call &c) { s.receipts_.get_log_proof(false, c.query, c.reply); }},
        // The dashboard: its views of runs, then its files (web/, built into
        // the broker), last: no API request walks past them.
        // Signed in as a user or an admin only: a job's or a peer's token has
        // the API (GET /v1/runs) and no use for the dashboard's.
        {{"GET", "/v1/views/runs", r_user | r_admin, "the dashboard's views need a user or admin token"},
         [](Service &s, const Call &c) { s.runs_api_.view("", c.who, c.reply); }},
        {{"GET", "/v1/views/runs/{id}", r_user | r_admin, "the dashboard's views need a user or admin token"},
         [](Service &s, const Call &c) { s.runs_api_.view(c.p(0), c.who, c.reply); }},
        {{"GET", "/", r_public, ""}, [](Service &, const Call &c) { c.reply(web::serve(c.req, "index.html")); }},
        {{"GET", "/ui/{file}", r_public, ""}, [](Service &, const Call &c) { c.reply(web::serve(c.req, c.params.p[0])); }},
    };
    return table;
}

std::span<const RouteSpec> api_routes() {
    static const std::vector<RouteSpec> specs = [] {
        std::vector<RouteSpec> v;
        for (const auto &r : Service::routes()) v.push_back(r.spec);
        return v;
    }();
    return specs;
}

const char *route_methods(std::string_view path) {
    bool get = false, post = false;
    RouteParams ignored;
    for (const auto &r : api_routes())
        if (path_matches(r.pattern, path, ignored)) (r.method == "GET"sv ? get : post) = true;
    return get && post ? "GET, HEAD, POST" : get ? "GET, HEAD" : post ? "POST" : nullptr;
}

namespace {

unsigned scope_bit(Scope s) {
    switch (s) {
    case Scope::worker: return r_worker;
    case Scope::user: return r_user;
    case Scope::peer: return r_peer;
    case Scope::admin: return r_admin;
    }
    return 0;
}

}  // namespace

void Service::handle(const ApiRequest &req, const Reply &reply) {
    count(c_requests);
    const double now = wall_now();
    // Compared as views with their lengths known: the hot path copies and
    // measures nothing.
    const std::string_view target = req.target, method = req.method;
    const std::size_t q = target.find('?');
    const std::string_view path = target.substr(0, q);
    // HEAD is GET without the body (the HTTP layer drops it).
    const std::string_view as = method == "HEAD"sv ? "GET"sv : method;
    const Route *route = nullptr;
    RouteParams params;
    for (const auto &r : routes())
        if (as == r.spec.method && path_matches(r.spec.pattern, path, params)) { route = &r; break; }

    const TokenEntry *who = nullptr;
    static const TokenEntry nobody{};
    if (route && route->spec.scopes == r_public) {
        who = &nobody;
    } else {
        switch (auth_.load(std::memory_order_acquire)->check(req.bearer, who, now, req.conn_cache)) {
        case Auth::Verdict::ok: break;
        case Auth::Verdict::missing:
            count(c_auth_failures);
            return reply(error_response(401, "no_token", "an Authorization: Bearer token is required"));
        case Auth::Verdict::rate_limited:
            count(c_rate_limited);
            return reply(error_response(429, "rate_limited", "too many requests for this token"));
        default:
            count(c_auth_failures);
            return reply(error_response(401, "bad_token", "the bearer token is not known to this broker"));
        }
    }
    if (route) {
        if (route->spec.scopes != r_public && !(route->spec.scopes & scope_bit(who->scope)))
            return reply(error_response(403, "forbidden", route->spec.forbidden));
        // A job's tasks hold a reader token (the trainer's): it reads its run, and changes nothing.
        if (who->read_only && as != "GET"sv && route->spec.pattern != "/v1/runs/{id}/restarts"sv)
            return reply(error_response(403, "forbidden", "a reader token (a job's tasks') only reads; " + req.method + " needs the agent's token"));
        std::string query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
        // A heartbeat is answered on its I/O thread at once; anything else
        // may wait on the store or on Slurm: limits.requests_per_token in
        // flight per token, so that one token's flood on many connections
        // neither fills the store's queue nor holds every connection (the
        // ticket goes back when the answer is written or dropped). Public
        // routes are not counted: every caller without a token would share
        // one budget, and one of them could have /v1/health answered 429
        // for all (max_connections bounds them).
        if (route->spec.pattern == "/v1/heartbeats"sv || route->spec.scopes == r_public)
            return route->run(*this, Call{req, *who, reply, now, params, std::move(query)});
        // A job's tokens (its agents on every node, its ranks' reader token)
        // share one budget, as large again as its tasks.
        const int budget = requests_gate_->max() + (who->bound ? int(std::min<unsigned long long>(who->world, 1u << 20)) * 2 : 0);
        std::string_view key = who->name;
        if (who->read_only && key.ends_with("/reader")) key.remove_suffix(7);
        auto ticket = requests_gate_->take(std::string(key), budget);
        if (!ticket) {
            count(c_rate_limited);
            ApiResponse r = error_response(429, "too_many_requests", "this token has " + std::to_string(budget) +
                                           " requests in flight (limits.requests_per_token" + (who->bound ? " and twice its job's tasks" : "") +
                                           "); wait for their answers");
            r.retry_after = 1;
            return reply(std::move(r));
        }
        // The place goes back once the answer is written, not when it is given.
        const Reply counted = [reply, ticket = std::move(ticket)](ApiResponse r) {
            r.hold = ticket;
            reply(std::move(r));
        };
        return route->run(*this, Call{req, *who, counted, now, params, std::move(query)});
    }
    count(c_errors);
    const std::string p(path);
    if (const char *allow = route_methods(path)) {
        ApiResponse r = error_response(405, "method_not_allowed", req.method + " " + p + ": this resource takes " + allow);
        r.allow = allow;
        return reply(std::move(r));
    }
    return reply(error_response(404, "no_route", req.method + " " + p + " is not part of API v1"));
}

}  // namespace shardnet::broker
