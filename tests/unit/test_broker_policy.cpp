// The checkpoint policy (broker/policy): the estimators, and the service's
// measuring, computing and handing the interval to an auto job's agents.
#include <boost/json.hpp>
#include <cmath>
#include <cstdlib>
#include <doctest/doctest.h>
#include <future>
#include <unistd.h>

#include "broker/config/config.hpp"
#include "broker/policy/estimate.hpp"
#include "broker/service.hpp"
#include "broker/trust/auth.hpp"

using namespace shardnet::broker;
namespace json = boost::json;

TEST_CASE("policy estimators: write time, step time, M with its prior, R per tier") {
    CHECK(policy::median({3, 1, 2}) == 2);
    CHECK(policy::median({4, 1, 2, 3}) == 2.5);
    CHECK_FALSE(policy::write_cost({}));
    CHECK_FALSE(policy::write_cost({-1, NAN}));
    auto w = policy::write_cost({5, 1, 100, 2, 3});
    REQUIRE(w);
    CHECK(w->value == 3);   // the median: one slow write does not move it
    CHECK(w->samples == 5);
    CHECK(policy::write_cost({0})->value == doctest::Approx(1e-3));

    CHECK_FALSE(policy::step_time({}));
    CHECK_FALSE(policy::step_time({{10, 11, 100, 101}}));   // one step is no rate
    auto st = policy::step_time({{10, 12, 100, 101}, {0, 100, 50, 100}, {-1, -1, 0, 0}});
    REQUIRE(st);
    CHECK(st->value == doctest::Approx(0.5));   // the worker with the most progress
    CHECK(st->samples == 100);

    // One interruption's worth of prior: (prior + observed) / (1 + interruptions).
    auto m = policy::node_mtbf(0, 0, 3600);
    CHECK(m.value == 3600);
    CHECK(m.source == "prior");
    m = policy::node_mtbf(9 * 3600, 2, 3600);
    CHECK(m.value == doctest::Approx(10 * 3600 / 3.0));
    CHECK(m.source == "measured+prior");
    CHECK(m.samples == 2);
    CHECK(policy::node_mtbf(-5, -1, 100).value == 100);   // nonsense counts as nothing

    std::vector<policy::Phases> rec{{"peer", 4, 8, 20, 8}, {"same_cluster", 3, 1, 4, 2}, {"same_cluster", 5, 1, 6, 2}};
    auto tiers = policy::by_tier(rec);
    REQUIRE(tiers.size() == 2);
    CHECK(tiers[0].tier == "same_cluster");
    CHECK(tiers[0].n == 2);
    CHECK(tiers[0].mean.detect == 4);
    CHECK(tiers[0].mean.total() == doctest::Approx(12));
    CHECK(tiers[1].tier == "peer");
    CHECK(tiers[1].mean.total() == doctest::Approx(40));
    auto r = policy::restart_cost(rec, 300);
    CHECK(r.value == doctest::Approx(14));   // the median of 40, 10 and 14
    CHECK(r.source == "measured");
    CHECK(policy::restart_cost({}, 300).value == 300);
    CHECK(policy::restart_cost({}, 300).source == "prior");
}

TEST_CASE("the interval: Daly's worked example in steps, the bounds, the run's node count") {
    policy::Inputs in;
    in.node_mtbf = {24 * 3600.0, 0, "prior"};
    in.restart = {600, 0, "prior"};
    in.nodes = 1;
    shardnet::ckpt::Bounds b;
    CHECK_FALSE(policy::compute(in, b));   // nothing measured yet
    in.write = policy::Measured{300, 3, "measured"};
    CHECK_FALSE(policy::compute(in, b));   // no step time yet
    in.step = policy::Measured{2, 50, "measured"};
    auto r = policy::compute(in, b);
    REQUIRE(r);
    CHECK(r->daly / 60 == doctest::Approx(116.7).epsilon(0.001));
    CHECK(r->young / 60 == doctest::Approx(120.0).epsilon(0.001));
    CHECK(r->steps == std::llround(r->daly / 2));
    CHECK(r->seconds == doctest::Approx(r->steps * 2.0));
    CHECK(r->waste == doctest::Approx(0.087).epsilon(0.02));
    CHECK(policy::summary_line(*r, in) == "ckpt every " + std::to_string(r->steps) + " steps · Daly · M 24.0 h · δ 5.00 min");
    // Four nodes: the run is interrupted four times as often.
    in.nodes = 4;
    auto r4 = policy::compute(in, b);
    CHECK(r4->mtbf == doctest::Approx(6 * 3600.0));
    CHECK(r4->daly / 60 == doctest::Approx(56.7).epsilon(0.002));
    // The site's bounds win over the model.
    b.max_seconds = 600;
    CHECK(policy::compute(in, b)->steps == 300);
    b.max_seconds = 86400;
    b.min_seconds = 7200;
    CHECK(policy::compute(in, b)->steps == 3600);
}

TEST_CASE("a new interval replaces the one in force only when it saves waste: no flapping between neighbours") {
    // t0118's inputs: delta 4-8 ms, M ~97 s, R ~5 s, steps of 0.2 s. The
    // computed interval moved between 5 and 7 steps with the write time's noise.
    policy::Inputs in;
    in.write = policy::Measured{0.008, 9, "measured"};
    in.step = policy::Measured{0.2, 100, "measured"};
    in.node_mtbf = {97, 2, "measured+prior"};
    in.restart = {5, 2, "measured"};
    shardnet::ckpt::Bounds b;
    b.min_seconds = 0;
    auto r = policy::compute(in, b);
    REQUIRE(r);
    CHECK(r->steps == 6);
    CHECK(policy::worth_changing(std::nullopt, *r, in, b));   // the first always
    CHECK_FALSE(policy::worth_changing(5, *r, in, b));        // 20% off: a fraction of a percent of waste
    CHECK_FALSE(policy::worth_changing(7, *r, in, b));
    CHECK_FALSE(policy::worth_changing(6, *r, in, b));
    CHECK(policy::worth_changing(60, *r, in, b));             // ten times too rare: real waste
    CHECK(policy::worth_changing(1, *r, in, b));              // six times too often
}

TEST_CASE("checkpoint_policy in the broker's config: values, unknown keys, inconsistent bounds") {
    BrokerConfig cfg;
    const std::string base = R"({"plain_http": true, "checkpoint_policy": )";
    CHECK(parse_broker_config(base + R"({"mtbf_node_hours": 0.5, "restart_seconds": 20, "min_seconds": 1, "min_steps": 3, "hysteresis": 0.1}})", cfg) == "");
    CHECK(cfg.ckpt_policy.mtbf_node_hours == 0.5);
    CHECK(cfg.ckpt_policy.min_steps == 3);
    CHECK(cfg.ckpt_policy.max_seconds == 86400);
    CHECK(parse_broker_config(base + R"({"mtbf": 3}})", cfg) == "checkpoint_policy.mtbf: unknown key");
    CHECK(parse_broker_config(base + R"({"mtbf_node_hours": "long"}})", cfg) == "checkpoint_policy.mtbf_node_hours: expected a number");
    CHECK(parse_broker_config(base + R"({"mtbf_node_hours": 0}})", cfg).find("checkpoint_policy.mtbf_node_hours: expected") == 0);
    CHECK(parse_broker_config(base + R"({"min_seconds": 100, "max_seconds": 10}})", cfg) == "checkpoint_policy: min_seconds is above max_seconds");
}

namespace {

struct PolicyFixture {
    std::string dir;
    std::unique_ptr<Service> svc;
    PolicyFixture() {
        char tmpl[] = "/tmp/shardnet-policy-test-XXXXXX";
        dir = mkdtemp(tmpl);
        BrokerConfig cfg;
        cfg.plain_http = true;
        cfg.database = dir + "/b.db";
        cfg.tokens = {TokenEntry{"ops", sha256_hex("admin-t"), Scope::admin, ""}};
        cfg.ckpt_policy.min_seconds = 0;
        cfg.ckpt_policy.mtbf_node_hours = 1;
        svc = std::make_unique<Service>(cfg, std::make_unique<Store>(cfg.database));
    }
    ~PolicyFixture() {
        svc.reset();
        if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) {}
    }
    ApiResponse call(const std::string &method, const std::string &target, const std::string &body = "") {
        std::promise<ApiResponse> p;
        svc->handle(ApiRequest{method, target, "admin-t", body, nullptr}, [&p](ApiResponse r) { p.set_value(std::move(r)); });
        return p.get_future().get();
    }
    ApiResponse beat(int step, const std::string &policy) {
        return call("POST", "/v1/heartbeats", R"({"run":"ra","attempt":1,"node":"a1","interval":1,)" + policy +
                                                   R"("ranks":[{"rank":0,"step":)" + std::to_string(step) + "}]}");
    }
    json::object policy() { return json::parse(call("GET", "/v1/runs/ra/policy").body).as_object(); }
    void summarise() {
        svc->summarise();
        svc->drain();
    }
};

}  // namespace

TEST_CASE("an auto run: measured, computed, and answered to the agent that lacks the version") {
    PolicyFixture f;
    CHECK(f.beat(1, R"("policy":0,)").status == 204);
    CHECK(f.policy().at("state").as_string() == "measuring");
    usleep(20000);
    CHECK(f.beat(5, R"("policy":0,)").status == 204);
    f.summarise();
    auto p = f.policy();
    CHECK(p.at("state").as_string() == "measuring");
    CHECK(std::string(p.at("waiting_for").as_string()).find("write time") != std::string::npos);
    // A checkpoint written in 2.5 s by its only rank, sealed.
    const std::string commit = R"({"attempt":1,"rank":0,"world_size":1,"write_seconds":2.5,"files":[{"path":"s","sha256":"00","bytes":1}]})";
    CHECK(json::parse(f.call("POST", "/v1/runs/ra/checkpoints/checkpoint-1/commit", commit).body).at("sealed").as_bool());
    f.summarise();
    p = f.policy();
    REQUIRE(p.at("state").as_string() == "in_force");
    CHECK(p.at("version").as_int64() == 1);
    const auto &in = p.at("inputs").as_object();
    CHECK(in.at("write_seconds").at("value").as_double() == 2.5);
    CHECK(in.at("write_seconds").at("source").as_string() == "measured");
    CHECK(in.at("step_seconds").at("value").as_double() > 0);
    CHECK(in.at("mtbf_seconds").at("source").as_string() == "prior");
    CHECK(in.at("mtbf_seconds").at("interruptions").as_int64() == 0);
    CHECK(in.at("restart_seconds").at("source").as_string() == "prior");
    const long long steps = p.at("every_steps").as_int64();
    CHECK(steps >= 1);
    // Computed again from the same measurements: the same version.
    f.summarise();
    CHECK(f.policy().at("version").as_int64() == 1);
    // The agent with no policy gets it in the heartbeat's answer; one that has it, 204.
    auto a = f.beat(6, R"("policy":0,)");
    REQUIRE(a.status == 200);
    auto ans = json::parse(a.body).at("policy").as_object();
    CHECK(ans.at("version").as_int64() == 1);
    CHECK(ans.at("every_steps").as_int64() == steps);
    CHECK(f.beat(7, R"("policy":1,)").status == 204);
    CHECK(f.beat(8, "").status == 204);   // a fixed interval: no policy field, nothing sent
    auto ev = json::parse(f.call("GET", "/v1/runs/ra/events").body).at("events").as_array();
    int policies = 0;
    for (const auto &e : ev) policies += e.at("kind").as_string() == "POLICY";
    CHECK(policies == 1);
}

TEST_CASE("policy input from agents is checked: the version, the write time") {
    PolicyFixture f;
    CHECK(f.beat(1, R"("policy":"new",)").status == 400);
    CHECK(f.beat(1, R"("policy":-1,)").status == 400);
    CHECK(f.beat(1, R"("policy":0,)").status == 204);
    for (const char *bad : {R"("ckpt_every":"often",)", R"("ckpt_every":"0",)", R"("ckpt_every":5,)"}) {
        auto r = f.beat(1, bad);
        CHECK(r.status == 400);
        CHECK(r.body.find("ckpt_every") != std::string::npos);
    }
    CHECK(f.beat(1, R"("ckpt_every":"25",)").status == 204);
    for (const char *bad : {R"("write_seconds":"2")", R"("write_seconds":-1)", R"("write_seconds":1e12)"}) {
        auto r = f.call("POST", "/v1/runs/ra/checkpoints/checkpoint-1/commit",
                        std::string(R"({"attempt":1,"rank":0,"world_size":1,)") + bad + R"(,"files":[{"path":"s","sha256":"00","bytes":1}]})");
        CHECK(r.status == 400);
        CHECK(r.body.find("write_seconds") != std::string::npos);
    }
    // A run that never asked: its interval is the job's own.
    PolicyFixture g;
    CHECK(g.beat(1, "").status == 204);
    CHECK(g.policy().at("state").as_string() == "fixed");
    CHECK(g.call("GET", "/v1/runs/nope/policy").status == 404);
}
