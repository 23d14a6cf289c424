// Federation logic against fake peers and a fake Slurm (tests/unit/fakes):
// a run with no local room becomes a decision for a peer broker, the
// forwarder delivers it until a peer answers (MOVED, the next peer, or the
// end after unreadable answers), and the inbox applies a peer's decision
// at most once, as a local account. Real brokers: tests/integration.
#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <iterator>
#include <doctest/doctest.h>
#include <unistd.h>

#include "common/digest.hpp"
#include "common/file_list.hpp"
#include "broker/recovery/job_environment.hpp"
#include "broker/trust/refusals.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet::broker;
using namespace shardnet::broker::testing;
namespace json = boost::json;
using shardnet::HttpRequest;
using shardnet::HttpResponse;

namespace {

const std::string kConf = "/fake/c1.conf";
const std::string kBeta = "https://beta.test/v1/decisions", kGamma = "https://gamma.test/v1/decisions";

std::vector<BrokerConfig::Peer> two_peers() {
    return {BrokerConfig::Peer{"beta", "https://beta.test", "", "to-beta", ""},
            BrokerConfig::Peer{"gamma", "https://gamma.test", "", "to-gamma", ""}};
}

HttpResponse answer(long status, const json::object &body) {
    HttpResponse r;
    r.status = status;
    r.body = json::serialize(body);
    return r;
}

// Job 7 on n1,n2, no other idle node, then n2 dies: attempt 2 has no local place.
void fault_without_room(ServiceFixture &f, const std::function<void()> &before_fault = {}) {
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        FakeSlurm::Job j;
        j.id = 7, j.nodes = "n1,n2", j.batch_host = "n1", j.node_count = 2, j.tasks = 2;
        f.slurm->jobs[kConf][7] = j;
        f.slurm->nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "ALLOCATED"}};
    }
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    if (before_fault) before_fault();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n2"] = "DOWN*";
        f.slurm->dead_slurmd.insert("n2");
    }
    f.tick_ahead(10);
}

// Both peers answer "full", and no node of c1 could take the run even in
// use (n3 down): the run's FAULT finds no place anywhere.
void every_peer_refuses_nowhere_here(ServiceFixture &f) {
    for (const auto &url : {kBeta, kGamma})
        f.peers->on(url, [](const HttpRequest &) {
            return answer(409, json::object{{"error", json::object{{"code", "no_capacity"}, {"message", "full"}}}});
        });
    fault_without_room(f, [&] {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n3"] = "DOWN";
    });
}

bool contains(const std::string &hay, const std::string &needle) { return hay.find(needle) != std::string::npos; }

std::string decision_body(const std::string &id, const std::string &run, long long to, const std::string &user) {
    return json::serialize(json::object{
        {"id", id}, {"from_broker", "beta"}, {"run", run}, {"from_attempt", to - 1}, {"to_attempt", to},
        {"spec", json::object{{"user", user}, {"uid", 0}, {"gid", 0}, {"nodes", 1}, {"tasks", 1}, {"workdir", "/tmp"}}},
        {"script", "#!/bin/sh\nsrun train.py\n"}, {"owner", user}, {"resume", "ckpt-9"}, {"manifest", "{}"}});
}

}  // namespace

TEST_CASE("no local room: a decision for the first peer; its acceptance moves the run and ends the old job") {
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start();
    f.peers->on(kBeta, [](const HttpRequest &) {
        return answer(200, json::object{{"accepted", true}, {"broker", "beta"}, {"cluster", "b1"}, {"job", 55},
                                        {"nodes", json::array{"b1n1", "b1n2"}}});
    });
    fault_without_room(f);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "MOVED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const auto sent = f.peers->requests(kBeta);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].method == "POST");
    CHECK(sent[0].bearer == "to-beta");
    const json::object p = json::parse(sent[0].body).as_object();
    CHECK(p.at("run").as_string() == "r1");
    CHECK(p.at("from_broker").as_string() == "alpha");
    CHECK(p.at("from_attempt").as_int64() == 1);
    CHECK(p.at("to_attempt").as_int64() == 2);
    CHECK(p.at("script").as_string() == "#!/bin/sh\nsrun train.py\n");
    CHECK(p.at("resume").as_string() == "latest");
    CHECK(p.at("spec").at("user").as_string() == "alice");
    CHECK(f.peers->requests(kGamma).empty());

    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(contains(ev, "PLACEMENT: no local capacity for attempt 2; c1 rejected:"));
    CHECK(contains(ev, "goes to broker beta"));
    CHECK(contains(ev, "MOVED: run handed to broker beta: attempt 2 runs as job 55 on b1"));
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scancel") == 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.slurm->count("sbatch") == 0);
    // The moved attempt's old job is fenced here.
    CHECK(f.beat("r1", 1, "n1", "0", "c1", 7) == 409);
}

TEST_CASE("a peer that refuses: the next peer; a silent one is asked again until it answers") {
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start();
    f.peers->on(kBeta, [](const HttpRequest &) {
        return answer(409, json::object{{"error", json::object{{"code", "no_capacity"}, {"message", "no compatible capacity at broker beta"}}},
                                        {"rejected", json::array{json::object{{"cluster", "b1"}, {"reason", "2 idle nodes needed, 0 idle"}}}}});
    });
    fault_without_room(f);
    // gamma is silent (no handler): resent with backoff.
    REQUIRE(ServiceFixture::until([&] { return f.peers->requests(kGamma).size() >= 3; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.state("r1") == "RECOVERING");
    CHECK(contains(f.events("r1"), "PLACEMENT: broker beta refused (no compatible capacity at broker beta; b1 rejected: 2 idle nodes "
                                   "needed, 0 idle); trying broker gamma"));
    CHECK(f.slurm->count("scancel") == 0);   // nothing has a place yet: the old job is left alone
    f.peers->on(kGamma, [](const HttpRequest &) {
        return answer(200, json::object{{"accepted", true}, {"cluster", "g1"}, {"job", 9}});
    });
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "MOVED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.peers->requests(kBeta).size() == 1);   // a refusal is final for that peer
}

TEST_CASE("every peer refuses: PLACEMENT names why; the run waits in its own cluster's queue, else DEGRADED") {
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start();
    for (const auto &url : {kBeta, kGamma})
        f.peers->on(url, [](const HttpRequest &) {
            return answer(409, json::object{{"error", json::object{{"code", "no_capacity"}, {"message", "full"}}}});
        });
    fault_without_room(f);
    // n1 (the job's survivor) and n3 (another job's) are in use: attempt 2
    // waits for them in c1's queue, never on the dead n2.
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING" && f.slurm->count("sbatch") == 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(contains(ev, "PLACEMENT: no local capacity for attempt 2; c1 rejected: 0 of 0 idle node(s) fit, 2 needed; decision alpha:r1/attempt-2 goes to broker beta"));
    CHECK(contains(ev, "PLACEMENT: no placement for attempt 2; c1 rejected:"));
    CHECK(contains(ev, "broker gamma refused (full); this broker's own clusters again, their queues too"));
    CHECK(contains(ev, "PLACEMENT: c1, queued for 2 node(s): no idle room, the nodes that fit are in use (never n2): job 100, attempt 2"));
    for (const auto &c : f.slurm->changes())
        if (c.argv[0] == "sbatch") CHECK(std::find(c.argv.begin(), c.argv.end(), "--exclude=n2") != c.argv.end());
}

TEST_CASE("every peer refuses and no node of this broker's could take it, even in use: the run waits DEGRADED, tried again") {
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start();
    every_peer_refuses_nowhere_here(f);
    const bool waits = ServiceFixture::until([&] { return contains(f.events("r1"), "(every peer broker refused); tried again every 30 s"); });
    INFO(f.events("r1"));
    REQUIRE(waits);
    CHECK(f.state("r1") == "DEGRADED");
    CHECK(f.slurm->count("sbatch") == 0);
    CHECK(f.peers->requests(kBeta).size() == 1);   // never a peer again
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n3"] = "IDLE";
    }
    f.tick_ahead(31);   // after the retry is registered (tick_ahead settles first: a busy host's failure of this test)
    INFO(f.events("r1"));
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING" && f.slurm->count("sbatch") == 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.peers->requests(kBeta).size() == 1);
}

TEST_CASE("every peer refused, then the broker restarts: the unplaced decision is tried on this broker's clusters only, never a peer again") {
    // Issue 43: after a restart an unplaced decision was taken up as if no
    // peer had been asked, and went to the peers that had refused it.
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start();
    every_peer_refuses_nowhere_here(f);
    REQUIRE(ServiceFixture::until([&] { return contains(f.events("r1"), "(every peer broker refused); tried again every 30 s"); }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::size_t asked = f.peers->requests(kBeta).size() + f.peers->requests(kGamma).size();
    CHECK(asked == 2);
    f.svc->drain();
    f.svc.reset();
    f.start([](FakeSlurm &s) {
        FakeSlurm::Job j;
        j.id = 7, j.nodes = "n1,n2", j.batch_host = "n1", j.node_count = 2, j.tasks = 2;
        s.jobs[kConf][7] = j;
        s.nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "DOWN*"}, {"n3", "DOWN"}};
        s.dead_slurmd.insert("n2");
    });
    ServiceFixture::settle();
    f.tick_ahead(31);
    f.tick_ahead(62);
    CHECK(f.peers->requests(kBeta).size() + f.peers->requests(kGamma).size() == asked);
    CHECK(f.state("r1") == "DEGRADED");
}

TEST_CASE("unreadable answers: an event each, then the decision ends and the run is DEGRADED") {
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start();
    f.peers->on(kBeta, [](const HttpRequest &) { return answer(200, json::object{{"accepted", "yes"}}); });
    fault_without_room(f);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED" && contains(f.events("r1"), "the decision ends"); }, 20));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(contains(ev, "DELIVERY: broker beta answered decision alpha:r1/attempt-2 with accepted: expected true or false; retry 1 of 4"));
    CHECK(contains(ev, "retry 4 of 4"));
    CHECK(f.peers->requests(kBeta).size() == 5);
    CHECK(f.peers->requests(kGamma).empty());
}

TEST_CASE("a peer that answers 4xx will never take the decision as it is: bad answers, then the decision ends") {
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start();
    f.peers->on(kBeta, [](const HttpRequest &) {
        return answer(400, json::object{{"error", json::object{{"code", "bad_field"}, {"message", "spec.requeue: expected federated, local or off"}}}});
    });
    fault_without_room(f);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED" && contains(f.events("r1"), "the decision ends"); }, 20));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(contains(ev, "status: HTTP 400"));
    CHECK(contains(ev, "spec.requeue"));
    CHECK(f.peers->requests(kBeta).size() == 5);   // not resent without end
}

TEST_CASE("the inbox: a peer's decision runs as the local account it names, at most once") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}};
    }
    auto r = f.call("POST", "/v1/decisions", decision_body("beta:r9/attempt-2", "r9", 2, "daemon"), "peer-t");
    INFO(r.body);
    REQUIRE(r.status == 200);
    const json::object a = json::parse(r.body).as_object();
    CHECK(a.at("accepted").as_bool());
    CHECK(a.at("cluster").as_string() == "c1");
    const long long job = a.at("job").as_int64();
    auto changes = f.slurm->changes();
    REQUIRE(changes.size() == 1);
    CHECK(changes[0].argv[0] == "sbatch");
    CHECK(changes[0].as.uid == 1);   // daemon on this host; the peer's uid 0 is never used
    CHECK(changes[0].as.gid == 1);
    CHECK(std::find(changes[0].argv.begin(), changes[0].argv.end(), "--shardnet-resume=ckpt-9") != changes[0].argv.end());
    CHECK(f.state("r9") == "RECOVERING");
    CHECK(contains(f.events("r9"), "RECEIVED: decision beta:r9/attempt-2 from broker beta"));

    // The same decision again (a resend): the same answer, nothing redone.
    auto again = f.call("POST", "/v1/decisions", decision_body("beta:r9/attempt-2", "r9", 2, "daemon"), "peer-t");
    CHECK(again.status == 200);
    CHECK(json::parse(again.body).at("job").as_int64() == job);
    CHECK(f.slurm->count("sbatch") == 1);

    // The new attempt's heartbeats recover it here.
    REQUIRE(f.beat("r9", 2, "n1", "0", "c1", job) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r9") == "RUNNING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
}

TEST_CASE("the inbox: a decision taken up again while Slurm cannot be read is answered 503, never placed twice") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}};
    }
    // The stop, as the store sees it: the job is submitted, the answer never written.
    exec_sql(f.cfg.database, "CREATE TRIGGER stop_here BEFORE UPDATE ON received_decisions WHEN NEW.state = 'applied' "
                             "BEGIN SELECT RAISE(ABORT, 'the broker stopped'); END;");
    auto first = f.call("POST", "/v1/decisions", decision_body("beta:r9/attempt-2", "r9", 2, "daemon"), "peer-t");
    REQUIRE(f.slurm->count("sbatch") == 1);
    CHECK(first.status != 200);
    std::map<std::string, std::map<long long, FakeSlurm::Job>> jobs;
    std::map<std::string, std::map<std::string, std::string>> nodes;
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        jobs = f.slurm->jobs, nodes = f.slurm->nodes;
    }
    f.svc->drain();
    f.svc.reset();
    exec_sql(f.cfg.database, "DROP TRIGGER stop_here;");
    f.start([&](FakeSlurm &fs) {   // the same Slurm, its job running, its answers unreadable
        fs.jobs = jobs, fs.nodes = nodes, fs.next_job = 500;
        fs.squeue_parser = "openapi/v9.99";
    });

    auto again = f.call("POST", "/v1/decisions", decision_body("beta:r9/attempt-2", "r9", 2, "daemon"), "peer-t");
    INFO(again.body);
    CHECK(again.status == 503);
    CHECK(again.retry_after > 0);
    CHECK(contains(again.body, "slurm_unavailable"));
    CHECK(contains(again.body, "cluster c1: "));
    CHECK(f.slurm->count("sbatch") == 0);   // this fake counts from the restart: nothing placed again
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->squeue_parser = "openapi/v0.0.38";
    }
    auto third = f.call("POST", "/v1/decisions", decision_body("beta:r9/attempt-2", "r9", 2, "daemon"), "peer-t");
    INFO(third.body);
    CHECK(third.status == 200);
    CHECK(contains(third.body, "\"redelivered\":true"));
    CHECK(f.slurm->count("sbatch") == 0);
}

TEST_CASE("the inbox keeps the run's requeue policy: in the job it submits, in memory and in the store") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}};
    }
    json::object d = json::parse(decision_body("beta:r7/attempt-2", "r7", 2, "daemon")).as_object();
    d["spec"].as_object()["requeue"] = "local";
    auto r = f.call("POST", "/v1/decisions", json::serialize(d), "peer-t");
    INFO(r.body);
    REQUIRE(r.status == 200);
    auto changes = f.slurm->changes();
    REQUIRE(changes.size() == 1);
    CHECK(std::find(changes[0].argv.begin(), changes[0].argv.end(), "--shardnet-requeue=local") != changes[0].argv.end());
    bool stored = false;
    for (const auto &row : Store(f.cfg.database).load_runs())
        if (row.id == "r7") stored = row.requeue == "local";
    CHECK(stored);
    // A policy that is none of the three is refused, naming the field.
    d["id"] = "beta:r6/attempt-2";
    d["run"] = "r6";
    d["spec"].as_object()["requeue"] = "anywhere";
    r = f.call("POST", "/v1/decisions", json::serialize(d), "peer-t");
    CHECK(r.status == 400);
    CHECK(contains(r.body, "spec.requeue"));
    CHECK(f.slurm->count("sbatch") == 1);
}

TEST_CASE("the inbox refuses what it cannot or may not do, with 409 naming why") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "ALLOCATED"}};
    }
    auto r = f.call("POST", "/v1/decisions", decision_body("beta:r9/attempt-2", "r9", 2, "daemon"), "peer-t");
    CHECK(r.status == 409);
    CHECK(contains(r.body, "no compatible capacity at broker alpha"));
    r = f.call("POST", "/v1/decisions", decision_body("beta:r8/attempt-2", "r8", 2, "no-such-user-here"), "peer-t");
    CHECK(r.status == 409);
    CHECK(contains(r.body, "not known on this broker's host"));
    // A run that lives here cannot be taken.
    REQUIRE(f.beat("local", 1, "n1", "0", "c1", 3) == 204);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "IDLE"}};
    }
    r = f.call("POST", "/v1/decisions", decision_body("beta:local/attempt-2", "local", 2, "daemon"), "peer-t");
    CHECK(r.status == 409);
    CHECK(contains(r.body, "a peer may only hand back a run that this broker moved to it"));
    CHECK(f.slurm->count("sbatch") == 0);
    // Only peers (and admins) send decisions.
    f.cfg.tokens.push_back(TokenEntry{"agents", sha256_hex("w"), Scope::worker, ""});
    CHECK(f.call("POST", "/v1/decisions", "{}", "nope").status == 401);
}

TEST_CASE("capacity?nodes=1: this broker's rows list their nodes by Slurm's name; the query to peers never asks for them") {
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start([](FakeSlurm &s) { s.nodes[kConf] = {{"n1", "idle"}, {"n2", "allocated"}, {"n3", "down"}}; });
    f.peers->on("https://beta.test/v1/capacity?local=1", [](const HttpRequest &) {
        return answer(200, json::object{{"broker", "beta"}, {"clusters", json::array{}}});
    });
    auto r = f.call("GET", "/v1/capacity?nodes=1");
    REQUIRE(r.status == 200);
    const json::value v = json::parse(r.body);
    const auto &rows = v.at("clusters").as_array();
    REQUIRE(rows.size() == 1);   // three undescribed nodes: one group
    CHECK(rows[0].at("total_nodes").as_int64() == 3);
    CHECK(rows[0].at("nodes") == json::parse(R"([{"name":"n1","state":"idle","described":false},{"name":"n2","state":"allocated","described":false},)"
                                             R"({"name":"n3","state":"down","described":false}])"));
    // Without nodes=1 a row is as before; a peer is asked with local=1 and the filters only.
    auto plain = json::parse(f.call("GET", "/v1/capacity").body);
    CHECK_FALSE(plain.at("clusters").at(0).as_object().contains("nodes"));
    const auto asked = f.peers->requests("https://beta.test/v1/capacity?local=1");
    CHECK(asked.size() == 2);
    for (const auto &q : f.peers->requests()) CHECK(q.url.find("nodes=") == std::string::npos);
    // A peer asking for them gets the rows without nodes.
    auto as_peer = json::parse(f.call("GET", "/v1/capacity?local=1&nodes=1", "", "peer-t").body);
    CHECK_FALSE(as_peer.at("clusters").at(0).as_object().contains("nodes"));
}

TEST_CASE("a decision's environment: sent from the root-only copy, checked and filtered by the receiving site, replayed into its job") {
    // The sender: the run's kept environment goes with the decision, never into its stored payload.
    {
        ServiceFixture f({{"c1", kConf}}, two_peers());
        f.start();
        f.peers->on(kBeta, [](const HttpRequest &) {
            return answer(200, json::object{{"accepted", true}, {"broker", "beta"}, {"cluster", "b1"}, {"job", 55}, {"nodes", json::array{"b1n1"}}});
        });
        fault_without_room(f, [&] {
            auto kept = f.call("POST", "/v1/runs/r1/environment", R"({"attempt": 1, "environment": ["MYVAR=kept-42", "SLURM_JOB_ID=7"]})");
            INFO(kept.body);
            REQUIRE(kept.status == 200);
        });
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "MOVED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        const json::object p = json::parse(f.peers->requests(kBeta).at(0).body).as_object();
        CHECK(p.at("environment") == json::array{"MYVAR=kept-42"});   // SLURM_* dropped when kept
        std::string all;   // the database, its journal included: no value of the user's
        for (const std::string &file : {f.cfg.database, f.cfg.database + "-wal"}) {
            std::ifstream in(file, std::ios::binary);
            all += std::string(std::istreambuf_iterator<char>(in), {});
        }
        CHECK(all.size() > 0);
        CHECK(all.find("kept-42") == std::string::npos);
    }
    // The receiver: malformed is refused whole, naming the entry; its own policy drops what it drops.
    ServiceFixture f({{"c1", kConf}});
    f.cfg.environment_drop = {"SECRET_*"};
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}};
    }
    json::object d = json::parse(decision_body("beta:r5/attempt-2", "r5", 2, "daemon")).as_object();
    d["environment"] = json::array{"GOOD=1", "BAD NAME=2"};
    auto r = f.call("POST", "/v1/decisions", json::serialize(d), "peer-t");
    CHECK(r.status == 400);
    CHECK(contains(r.body, "environment[1]"));
    CHECK(f.slurm->count("sbatch") == 0);
    d["environment"] = json::array{"MYVAR=kept-42", "SECRET_TOKEN=x"};
    r = f.call("POST", "/v1/decisions", json::serialize(d), "peer-t");
    INFO(r.body);
    REQUIRE(r.status == 200);
    const auto changes = f.slurm->changes();
    REQUIRE(changes.size() == 1);
    CHECK(std::find(changes[0].argv.begin(), changes[0].argv.end(), "--export-file=3") != changes[0].argv.end());
    REQUIRE(changes[0].as.fd3);
    CHECK(changes[0].as.fd3->find(std::string("MYVAR=kept-42") + '\0') == 0);
    CHECK(changes[0].as.fd3->find("SECRET_TOKEN") == std::string::npos);
}

TEST_CASE("a refused decision keeps nothing: its environment never waits on disk for the run id's next owner") {
    // Issue 43: the environment was kept before sbatch, and a refusal left
    // it under the run id, replayed later into another user's job.
    ServiceFixture f({{"c1", kConf}});
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}};
        f.slurm->sbatch_error = "sbatch: error: Invalid license specification";
    }
    json::object d = json::parse(decision_body("beta:llama-run/attempt-2", "llama-run", 2, "daemon")).as_object();
    d["environment"] = json::array{"PATH=/home/attacker/bin:/usr/bin", "BASH_ENV=/home/attacker/evil.sh"};
    auto r = f.call("POST", "/v1/decisions", json::serialize(d), "peer-t");
    INFO(r.body);
    CHECK(r.status == 409);
    CHECK(contains(r.body, "Invalid license specification"));
    std::string why;
    const std::string dir = private_dir(f.cfg.database, why);
    CHECK(access((dir + "/llama-run.environment").c_str(), F_OK) != 0);
    // Applied: kept after the job, for the decision's user and that job.
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->sbatch_error.clear();
    }
    d["id"] = "beta:r6/attempt-2";
    d["run"] = "r6";
    r = f.call("POST", "/v1/decisions", json::serialize(d), "peer-t");
    REQUIRE(r.status == 200);
    const long long job = json::parse(r.body).at("job").as_int64();
    const auto kept = read_environment_file(dir, "r6", why);
    REQUIRE(kept);
    CHECK(kept->origin.cluster == "c1");
    CHECK(kept->origin.job == job);
    CHECK(kept->origin.uid == detail::user_uid("daemon"));
}

TEST_CASE("runs peers' decisions make here count apart from the user's own: a peer cannot spend a local user's limit") {
    ServiceFixture f({{"c1", kConf}});
    f.cfg.runs_per_user = 1;
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}, {"n2", "IDLE"}};
    }
    auto r = f.call("POST", "/v1/decisions", decision_body("beta:p1/attempt-2", "p1", 2, "daemon"), "peer-t");
    INFO(r.body);
    REQUIRE(r.status == 200);
    // The user's own first run is still theirs to make.
    CHECK(f.call("POST", "/v1/runs", R"({"id":"mine","owner":"daemon"})").status == 201);
    CHECK(f.call("POST", "/v1/runs", R"({"id":"mine2","owner":"daemon"})").status == 429);
    // Peers' runs for the user have the same limit, their own.
    r = f.call("POST", "/v1/decisions", decision_body("beta:p2/attempt-2", "p2", 2, "daemon"), "peer-t");
    CHECK(r.status == 409);
    CHECK(contains(r.body, "user 'daemon' has 1 runs made by peers' decisions here, not ended (limits.runs_per_user)"));
    CHECK(f.slurm->count("sbatch") == 1);
}

TEST_CASE("a peer's options speak the site's names: this broker's cluster takes them in its own, or is no place for them") {
    ServiceFixture f({{"c1", kConf}});
    f.cfg.cluster_info["c1"].names["partition"]["gpu"] = std::string("gpu-here");
    f.cfg.cluster_info["c1"].names["qos"]["high"] = std::nullopt;
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}, {"n2", "IDLE"}};
        f.slurm->partitions[kConf] = {{"n1", "gpu-here"}, {"n2", "cpu"}};
    }
    json::object d = json::parse(decision_body("beta:r4/attempt-2", "r4", 2, "daemon")).as_object();
    d["spec"].as_object()["options"] = json::object{{"partition", "gpu"}, {"reservation", "theirs"}};
    auto r = f.call("POST", "/v1/decisions", json::serialize(d), "peer-t");
    INFO(r.body);
    REQUIRE(r.status == 200);
    const auto changes = f.slurm->changes();
    REQUIRE(changes.size() == 1);
    const auto &argv = changes[0].argv;
    CHECK(std::find(argv.begin(), argv.end(), "--partition=gpu-here") != argv.end());
    CHECK(std::find(argv.begin(), argv.end(), "--nodelist=n1") != argv.end());
    CHECK(std::none_of(argv.begin(), argv.end(), [](const std::string &a) { return a.rfind("--reservation", 0) == 0; }));
    CHECK(contains(f.events("r4"), "partition gpu -> gpu-here"));
    // A QOS this site has none of: refused, the reason named.
    d["id"] = "beta:r3/attempt-2";
    d["run"] = "r3";
    d["spec"].as_object()["options"] = json::object{{"qos", "high"}};
    r = f.call("POST", "/v1/decisions", json::serialize(d), "peer-t");
    CHECK(r.status == 409);
    CHECK(contains(r.body, "no qos for high"));
    CHECK(f.slurm->count("sbatch") == 1);
}

namespace {

std::string commit_body(int rank, int world, const std::string &name) {
    const std::string p = "rank-" + std::to_string(rank) + ".pt";
    return json::serialize(json::object{{"attempt", 1}, {"rank", rank}, {"world_size", world},
                                        {"files", json::array{json::object{{"path", p}, {"sha256", shardnet::sha256_hex(name + p)},
                                                                           {"bytes", 100 + rank}}}}});
}

// The sender's "sealed" as a peer receives it, with one field replaced.
std::string with_sealed(const json::value &sealed) {
    json::object d = json::parse(decision_body("alpha:r1/attempt-2", "r1", 2, "daemon")).as_object();
    d["sealed"] = sealed;
    return json::serialize(d);
}

}  // namespace

TEST_CASE("a decision carries the run's newest seals; the peer checks them, keeps them and serves them with their proofs") {
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start();
    f.peers->on(kBeta, [](const HttpRequest &) {
        return answer(200, json::object{{"accepted", true}, {"broker", "beta"}, {"cluster", "b1"}, {"job", 55}, {"nodes", json::array{"b1n1"}}});
    });
    fault_without_room(f, [&] {
        for (const char *name : {"checkpoint-10", "checkpoint-20", "checkpoint-30"})
            for (int rank : {0, 1})
                REQUIRE(f.call("POST", std::string("/v1/runs/r1/checkpoints/") + name + "/commit", commit_body(rank, 2, name)).status == 200);
    });
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "MOVED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const json::value sent = json::parse(f.peers->requests(kBeta).at(0).body);
    const json::array &sealed = sent.at("sealed").as_array();
    REQUIRE(sealed.size() == 2);   // the newest two, newest first
    CHECK(sealed[0].at("name").as_string() == "checkpoint-30");
    CHECK(sealed[0].at("parent").as_string() == "checkpoint-20");
    CHECK(sealed[0].at("sealed_by").as_string() == "alpha");
    CHECK(sealed[1].at("name").as_string() == "checkpoint-20");
    CHECK(sealed[0].at("files").as_array().size() == 2);
    CHECK(sealed[0].at("list").at("count").as_int64() == 2);
    // What the sender serves of it is what it sends.
    auto here = f.call("GET", "/v1/runs/r1/checkpoints/checkpoint-30/files");
    REQUIRE(here.status == 200);
    CHECK(json::parse(here.body).at("list") == sealed[0].at("list"));

    // The peer: the decision with its seals, as the sender sent them.
    ServiceFixture peer({{"c1", kConf}});
    peer.start([](FakeSlurm &s) { s.nodes[kConf] = {{"n1", "IDLE"}}; });
    auto r = peer.call("POST", "/v1/decisions", with_sealed(sealed), "peer-t");
    REQUIRE_MESSAGE(r.status == 200, r.body);
    // The same decision id resent for another run is not the one received:
    // refused, nothing written for that run.
    auto other = peer.call("POST", "/v1/decisions", decision_body("alpha:r1/attempt-2", "r9", 2, "daemon"), "peer-t");
    CHECK(other.status == 409);
    CHECK(contains(other.body, "decision_conflict"));
    CHECK(peer.call("GET", "/v1/runs/r9").status == 404);
    auto got = peer.call("GET", "/v1/runs/r1/checkpoints/checkpoint-30/files?rank=1");
    REQUIRE_MESSAGE(got.status == 200, got.body);
    const json::value g = json::parse(got.body);
    CHECK(g.at("carried").as_bool());
    // Who vouches for it here: the broker that sent it (its peer token's name), not what the body says.
    CHECK(g.at("sealed_by").as_string() == "beta-broker");
    CHECK(g.at("list") == sealed[0].at("list"));
    REQUIRE(g.at("files").as_array().size() == 1);
    const json::value &file = g.at("files").at(0);
    CHECK(file.at("path").as_string() == "rank-1.pt");
    CHECK(file.at("sha256").as_string() == shardnet::sha256_hex("checkpoint-30rank-1.pt"));
    std::vector<shardnet::merkle::Hash> path;
    for (const auto &h : file.at("inclusion").as_array()) path.push_back(*shardnet::merkle::from_hex(h.as_string()));
    const shardnet::file_list::Entry e{"rank-1.pt", std::string(file.at("sha256").as_string()), 101};
    CHECK(shardnet::merkle::verify_inclusion(file.at("index").as_int64(), 2, shardnet::file_list::leaf(e), path,
                                             *shardnet::merkle::from_hex(g.at("list").at("merkle_root").as_string())));
    // The whole list, as shard verify reads it.
    CHECK(json::parse(peer.call("GET", "/v1/runs/r1/checkpoints/checkpoint-20/files").body).at("files").as_array().size() == 2);
    // A checkpoint it was not told of: the sender's word is still elsewhere.
    CHECK(peer.call("GET", "/v1/runs/r1/checkpoints/checkpoint-10/files?rank=0").status == 404);
}

TEST_CASE("a peer's carried seals are untrusted: each malformed one refuses the decision with a 400 naming the field") {
    ServiceFixture f({{"c1", kConf}});
    f.start([](FakeSlurm &s) { s.nodes[kConf] = {{"n1", "IDLE"}}; });
    const std::string sha = shardnet::sha256_hex("x");
    std::vector<shardnet::file_list::Entry> files{{"rank-0.pt", sha, 5, 0}};
    const json::object list = shardnet::file_list::summary_json(shardnet::file_list::summarize(files));
    auto seal = [&](const std::function<void(json::object &)> &change) {
        json::object s{{"name", "checkpoint-30"}, {"attempt", 1}, {"ranks", 1}, {"parent", nullptr}, {"sealed_by", "alpha"},
                       {"list", list}, {"receipt", nullptr},
                       {"files", json::array{json::object{{"path", "rank-0.pt"}, {"sha256", sha}, {"bytes", 5}, {"rank", 0}}}}};
        change(s);
        return json::array{s};
    };
    auto refused = [&](const json::value &sealed, const std::string &words) {
        auto r = f.call("POST", "/v1/decisions", with_sealed(sealed), "peer-t");
        INFO(r.body);
        CHECK(r.status == 400);
        CHECK(contains(r.body, "\"field\":\"sealed\""));
        CHECK(contains(r.body, words));
    };
    refused(json::object{}, "sealed: expected an array");
    refused(seal([](json::object &s) { s["files"].as_array()[0].as_object()["sha256"] = "00"; }),
            "sealed[0].files[0].sha256: expected 64 lower-case hex digits");
    refused(seal([](json::object &s) { s["files"].as_array()[0].as_object()["path"] = "../../etc/shadow"; }), "sealed[0].files[0].path:");
    refused(seal([](json::object &s) { s["files"].as_array()[0].as_object()["rank"] = 3; }), "sealed[0].files[0].rank: expected 0..0");
    refused(seal([](json::object &s) { s["files"].as_array()[0].as_object()["bytes"] = 6; }),
            "sealed[0].list: its files make 1 file(s), 6 bytes");
    refused(seal([](json::object &s) { s["name"] = "../x"; }), "sealed[0].name: 1-128 of");
    refused(seal([](json::object &s) { s["receipt"] = json::object{{"seq", 1}, {"digest", "zz"}}; }), "sealed[0].receipt.digest");
    refused(seal([](json::object &s) { s["evil"] = 1; }), "sealed[0].evil: unknown field");
    refused(seal([](json::object &s) { s["list"].as_object()["merkle_root"] = std::string(64, 'A'); }), "sealed[0].list.merkle_root");
    json::array five;
    for (int i = 0; i < 5; ++i) five.push_back(seal([&](json::object &s) { s["name"] = "checkpoint-" + std::to_string(i); })[0]);
    refused(five, "sealed: at most 4 sealed checkpoints, not 5");
    json::array twice{seal([](json::object &) {})[0], seal([](json::object &) {})[0]};
    refused(twice, "sealed[1].name: checkpoint-30 is carried twice");
    // More files than a decision carries, in all.
    json::array many;
    std::vector<shardnet::file_list::Entry> big;
    for (int i = 0; i < 4097; ++i) {
        const std::string p = "f" + std::to_string(i);
        many.push_back(json::object{{"path", p}, {"sha256", sha}, {"bytes", 1}, {"rank", 0}});
        big.push_back({p, sha, 1, 0});
    }
    shardnet::file_list::sort(big);
    refused(seal([&](json::object &s) { s["files"] = many, s["list"] = shardnet::file_list::summary_json(shardnet::file_list::summarize(big)); }),
            "sealed[0].files: more than 4096 files");
    CHECK(f.slurm->count("sbatch") == 0);   // nothing submitted for any of them
    CHECK(f.call("POST", "/v1/decisions", with_sealed(seal([](json::object &) {})), "peer-t").status == 200);
}

TEST_CASE("seals never keep a run from moving: a peer that answers 413 gets the decision again without them") {
    ServiceFixture f({{"c1", kConf}}, two_peers());
    f.start();
    std::atomic<int> asked{0};
    f.peers->on(kBeta, [&](const HttpRequest &) {
        if (asked++ == 0) return answer(413, json::object{{"error", json::object{{"code", "body_too_large"}, {"message", "over 1 MiB"}}}});
        return answer(200, json::object{{"accepted", true}, {"broker", "beta"}, {"cluster", "b1"}, {"job", 56}, {"nodes", json::array{"b1n1"}}});
    });
    fault_without_room(f, [&] {
        for (int rank : {0, 1}) REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-10/commit", commit_body(rank, 2, "checkpoint-10")).status == 200);
    });
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "MOVED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const auto sent = f.peers->requests(kBeta);
    REQUIRE(sent.size() == 2);
    CHECK(json::parse(sent[0].body).as_object().contains("sealed"));
    CHECK_FALSE(json::parse(sent[1].body).as_object().contains("sealed"));
    CHECK(json::parse(sent[1].body).at("id") == json::parse(sent[0].body).at("id"));
}
