// A run that is not the caller's looks exactly like one that does not exist,
// on every route that names a run (/v1/runs/{id}/..., the dashboard's
// /v1/views/runs/{id}, an event stream): the same status and the same body,
// so that no token learns which run ids another user has.
#include <doctest/doctest.h>

#include "broker/api/routes.hpp"
#include "common/digest.hpp"
#include "common/worker_token.hpp"
#include "tests/unit/fakes/follow.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet;
using namespace shardnet::broker;
using namespace shardnet::broker::testing;

namespace {

const std::string kWorkerKey(32, 'w');

std::string job_token(const std::string &run, unsigned long long uid) {
    return derive_worker_token(kWorkerKey, WorkerClaim{run, 1, 1, uid, uid == 1001 ? 42ULL : 77ULL, "alpha"});
}

std::string with(std::string pattern, const std::string &run) {
    for (auto at = pattern.find('{'); at != std::string::npos; at = pattern.find('{')) {
        const auto end = pattern.find('}', at);
        pattern.replace(at, end - at + 1, pattern.compare(at, end - at + 1, "{id}") == 0 ? run : "c1");
    }
    return pattern;
}

// The body with the run's id as the missing run's: what is left must be the same.
std::string as_missing(std::string body, const std::string &run, const std::string &missing) {
    for (auto at = body.find(run); at != std::string::npos; at = body.find(run, at + missing.size())) body.replace(at, run.size(), missing);
    return body;
}

struct PrivacyFixture : ServiceFixture {
    PrivacyFixture() : ServiceFixture({}) {
        SigningKey k;
        REQUIRE(SigningKey::from_seed(std::string(32, 'k'), k) == "");
        cfg.receipts.key = k;   // the receipts' route answers as it does for real
        cfg.worker_keys = {WorkerKey{"site", "/k", kWorkerKey}};
        cfg.tokens.push_back(TokenEntry{"alice", sha256_hex("alice-t"), Scope::user, "", 0, "daemon"});
        cfg.tokens.push_back(TokenEntry{"bob", sha256_hex("bob-t"), Scope::user, "", 0, "bin"});
        start();
    }
};

}  // namespace

TEST_CASE("every run route answers another user's run as it answers a missing one: the same status, the same body") {
    PrivacyFixture f;
    // alice's run (her user token made it) and a job's run (uid 1001's job reported first).
    REQUIRE(f.call("POST", "/v1/runs", R"({"id":"run-of-alice"})", "alice-t").status == 201);
    REQUIRE(f.call("POST", "/v1/heartbeats", R"({"run":"run-of-a-job","attempt":1,"node":"a1","interval":1,"state":"running","ranks":[{"rank":0,"step":1}]})",
                   job_token("run-of-a-job", 1001)).status == 204);
    // A body each POST route takes, so that the run is what is judged, not the body.
    const std::map<std::string, std::string> bodies{
        {"/v1/runs/{id}/cancel", ""},
        {"/v1/runs/{id}/checkpoints/{name}/commit",
         R"({"attempt":1,"rank":0,"world_size":1,"files":[{"path":"rank-0/m.pt","sha256":")" + std::string(64, 'a') + R"(","bytes":1}]})"},
        {"/v1/runs/{id}/ranks", R"({"attempt":1,"world_size":1,"node":"a1","ranks":[{"rank":0}]})"},
        {"/v1/runs/{id}/environment", R"({"attempt":1,"environment":["A=1"]})"},
        {"/v1/runs/{id}/restarts", R"({"kind":"supervising","attempt":1,"spares":1,"nodes":["a1"]})"},
    };
    struct Caller { const char *who; std::string run, token, missing_token; };
    const std::vector<Caller> callers{
        {"bob's user token, alice's run", "run-of-alice", "bob-t", "bob-t"},
        {"bob's user token, a job's run", "run-of-a-job", "bob-t", "bob-t"},
        // A job names its run itself (--shardnet=RUN): its token is for that id.
        {"uid 1002's job token", "run-of-a-job", job_token("run-of-a-job", 1002), job_token("run-nobody", 1002)},
        {"a peer broker's token", "run-of-alice", "peer-t", "peer-t"},
    };
    int routes = 0;
    for (const auto &r : api_routes()) {
        const std::string pattern(r.pattern), method(r.method);
        if (pattern.find("{id}") == std::string::npos || (pattern.rfind("/v1/runs/", 0) != 0 && pattern.rfind("/v1/views/runs/", 0) != 0))
            continue;
        ++routes;
        CAPTURE(pattern);
        // A new POST route on a run needs its body here, or it is not tested.
        REQUIRE_MESSAGE((method == "GET" || bodies.count(pattern)), "no test body for POST " << pattern);
        const std::string body = method == "GET" ? "" : bodies.at(pattern);
        for (const auto &c : callers) {
            CAPTURE(c.who);
            const ApiResponse theirs = f.call(method, with(pattern, c.run), body, c.token);
            const ApiResponse missing = f.call(method, with(pattern, "run-nobody"), body, c.missing_token);
            CHECK(theirs.status >= 400);
            CHECK(theirs.status == missing.status);
            CHECK(as_missing(theirs.body, c.run, "run-nobody") == missing.body);
        }
    }
    CHECK(routes >= 10);
    // The event stream the HTTP layer opens (?follow=1) asks the same question.
    for (const auto &c : callers) {
        CAPTURE(c.who);
        auto theirs = testing::follow_events(*f.svc, ApiRequest{"GET", "/v1/runs/" + c.run + "/events?follow=1", c.token, "", nullptr},
                                           std::make_shared<EventSink>());
        auto missing = testing::follow_events(*f.svc, ApiRequest{"GET", "/v1/runs/run-nobody/events?follow=1", c.missing_token, "", nullptr},
                                            std::make_shared<EventSink>());
        REQUIRE(theirs);
        REQUIRE(missing);
        CHECK(theirs->status == missing->status);
        CHECK(as_missing(theirs->body, c.run, "run-nobody") == missing->body);
    }
    // Their own runs they see.
    CHECK(f.call("GET", "/v1/runs/run-of-alice", "", "alice-t").status == 200);
    CHECK(f.call("GET", "/v1/runs/run-of-a-job", "", job_token("run-of-a-job", 1001)).status == 200);
}
