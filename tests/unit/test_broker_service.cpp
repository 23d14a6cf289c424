#include <boost/json.hpp>
#include <cstdlib>
#include <doctest/doctest.h>
#include <chrono>
#include <thread>
#include <fstream>
#include <sstream>
#include <future>
#include <sqlite3.h>
#include <unistd.h>

#include "broker/trust/auth.hpp"
#include "broker/service.hpp"
#include "common/worker_token.hpp"
#include "tests/unit/fakes/follow.hpp"

using namespace shardnet::broker;
namespace json = boost::json;

namespace {

const std::string kWorkerKey(32, 'w');

struct Fixture {
    std::string dir;
    std::unique_ptr<Service> svc;
    explicit Fixture(const std::function<void(BrokerConfig &)> &tune = {}) {
        char tmpl[] = "/tmp/shardnet-broker-test-XXXXXX";
        dir = mkdtemp(tmpl);
        BrokerConfig cfg;
        cfg.plain_http = true;
        cfg.database = dir + "/b.db";
        cfg.tokens = {TokenEntry{"ops", sha256_hex("admin-t"), Scope::admin, ""},
                      TokenEntry{"agents", sha256_hex("worker-t"), Scope::worker, ""},
                      TokenEntry{"r2-only", sha256_hex("r2-t"), Scope::worker, "r2"},
                      // User tokens act for real accounts of this host.
                      TokenEntry{"alice", sha256_hex("alice-t"), Scope::user, "", 0, "daemon"},
                      TokenEntry{"bob", sha256_hex("bob-t"), Scope::user, "", 0, "bin"},
                      TokenEntry{"beta-broker", sha256_hex("peer-t"), Scope::peer, ""}};
        cfg.worker_keys = {WorkerKey{"site", "/k", kWorkerKey}};
        if (tune) tune(cfg);
        svc = std::make_unique<Service>(cfg, std::make_unique<Store>(cfg.database));
    }
    ~Fixture() {
        svc.reset();
        if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) {}
    }
    ApiResponse call(const std::string &method, const std::string &target, const std::string &token,
                     const std::string &body = "") {
        std::promise<ApiResponse> p;
        svc->handle(ApiRequest{method, target, token, body, nullptr}, [&p](ApiResponse r) { p.set_value(std::move(r)); });
        return p.get_future().get();
    }
    static json::value body(const ApiResponse &r) { return json::parse(r.body); }
};

std::string hb(const std::string &run, int attempt, const std::string &node, int step, const char *state = "running") {
    return R"({"run":")" + run + R"(","attempt":)" + std::to_string(attempt) + R"(,"node":")" + node +
           R"(","interval":1,"state":")" + state + R"(","ranks":[{"rank":0,"step":)" + std::to_string(step) + "}]}";
}

std::string commit(int attempt, int rank, int world) {
    return R"({"attempt":)" + std::to_string(attempt) + R"(,"rank":)" + std::to_string(rank) + R"(,"world_size":)" +
           std::to_string(world) + R"(,"files":[{"path":"shard.pt","sha256":"00","bytes":1}]})";
}

}  // namespace

TEST_CASE("heartbeats create the run and show in it") {
    Fixture f;
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("r1", 1, "a1", 5)).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("r1", 1, "a2", 6)).status == 204);
    auto r = f.call("GET", "/v1/runs/r1", "admin-t");
    REQUIRE(r.status == 200);
    auto v = Fixture::body(r).as_object();
    CHECK(v.at("state").as_string() == "RUNNING");
    CHECK(v.at("workers").as_array().size() == 2);
    CHECK(v.at("workers").as_array()[0].at("health").as_string() == "healthy");
    CHECK(v.at("workers").as_array()[0].at("role").as_string() == "step");
    REQUIRE(v.at("groups").as_array().size() == 1);
    CHECK(v.at("groups").as_array()[0].at("workers").as_int64() == 2);
    CHECK(v.at("groups").as_array()[0].at("healthy").as_int64() == 2);
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t",
                 R"({"run":"r1","attempt":1,"node":"a1","step":"batch","interval":1,"state":"running","ranks":[{"rank":0,"step":6}]})").status == 204);
    // A node is a Slurm node's plain name: never a worker key, a host list or markup.
    for (const char *bad : {"a1/batch", "gpu[001-512],x", "n1 n2", "<b>n1</b>"})
        CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("r1", 1, bad, 6)).status == 400);
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("r1", 1, "a2", 7, "ended")).status == 204);
    v = Fixture::body(f.call("GET", "/v1/runs/r1", "admin-t")).as_object();
    auto groups = v.at("groups").as_array();
    REQUIRE(groups.size() == 2);
    CHECK(groups[0].at("role").as_string() == "batch");
    CHECK(groups[1].at("role").as_string() == "step");
    CHECK(groups[1].at("workers").as_int64() == 2);
    CHECK(groups[1].at("healthy").as_int64() == 1);  // a2 ended
    auto ev = Fixture::body(f.call("GET", "/v1/runs/r1/events", "admin-t")).at("events").as_array();
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].at("kind").as_string() == "RUNNING");
}

TEST_CASE("bad input gets the right 4xx, naming the field") {
    Fixture f;
    CHECK(f.call("POST", "/v1/heartbeats", "", hb("r1", 1, "a1", 5)).status == 401);
    CHECK(f.call("POST", "/v1/heartbeats", "nope", hb("r1", 1, "a1", 5)).status == 401);
    CHECK(f.call("POST", "/v1/heartbeats", "alice-t", hb("r1", 1, "a1", 5)).status == 403);
    auto r = f.call("POST", "/v1/heartbeats", "admin-t", "{not json");
    CHECK(r.status == 400);
    CHECK(r.body.find("bad_json") != std::string::npos);
    r = f.call("POST", "/v1/heartbeats", "admin-t", R"({"run":"r1","attempt":"one","node":"a","ranks":[]})");
    CHECK(r.status == 400);
    CHECK(Fixture::body(r).at("error").at("field").as_string() == "attempt");
    r = f.call("POST", "/v1/heartbeats", "admin-t", R"({"run":"../etc","attempt":1,"node":"a","ranks":[]})");
    CHECK(Fixture::body(r).at("error").at("field").as_string() == "run");
    r = f.call("POST", "/v1/heartbeats", "admin-t", R"({"run":"r1","attempt":1,"node":"a","ranks":{}})");
    CHECK(Fixture::body(r).at("error").at("field").as_string() == "ranks");
    // The requeue policy is one of three: anything else would reach a
    // decision a peer refuses.
    r = f.call("POST", "/v1/heartbeats", "admin-t", R"({"run":"r1","attempt":1,"node":"a","requeue":"anywhere","ranks":[]})");
    CHECK(r.status == 400);
    CHECK(Fixture::body(r).at("error").at("field").as_string() == "requeue");
    CHECK(f.call("GET", "/v1/nothing", "admin-t").status == 404);
    CHECK(f.call("POST", "/v1/heartbeats", "r2-t", hb("r1", 1, "a1", 5)).status == 403);  // token tied to r2
}

TEST_CASE("epoch fencing: an older attempt can neither heartbeat nor commit") {
    Fixture f;
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("r1", 1, "a1", 5)).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("r1", 2, "b1", 0)).status == 204);  // new attempt
    auto r = f.call("POST", "/v1/heartbeats", "admin-t", hb("r1", 1, "a1", 6));
    CHECK(r.status == 409);
    CHECK(r.body.find("stale_attempt") != std::string::npos);
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-001/commit", "admin-t", commit(1, 0, 1)).status == 409);
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-001/commit", "admin-t", commit(2, 0, 1)).status == 200);
}

TEST_CASE("a checkpoint seals when every rank of the attempt committed, with lineage") {
    Fixture f;
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("r1", 1, "a1", 5)).status == 204);
    auto r = Fixture::body(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-001/commit", "admin-t", commit(1, 0, 2)));
    CHECK_FALSE(r.at("sealed").as_bool());
    r = Fixture::body(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-001/commit", "admin-t", commit(1, 0, 2)));
    CHECK_FALSE(r.at("sealed").as_bool());  // the same rank twice is one commit
    r = Fixture::body(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-001/commit", "admin-t", commit(1, 1, 2)));
    CHECK(r.at("sealed").as_bool());
    for (int rank = 0; rank < 2; ++rank)
        f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-002/commit", "admin-t", commit(1, rank, 2));
    auto cps = Fixture::body(f.call("GET", "/v1/runs/r1/checkpoints", "admin-t")).at("checkpoints").as_array();
    REQUIRE(cps.size() == 2);
    CHECK(cps[1].at("parent").as_string() == "checkpoint-001");
    auto ev = Fixture::body(f.call("GET", "/v1/runs/r1/events?after=1", "admin-t")).at("events").as_array();
    REQUIRE(ev.size() == 2);
    CHECK(ev[0].at("kind").as_string() == "SEALED");
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/c/commit", "admin-t", R"({"attempt":1,"rank":3,"world_size":2,"files":[]})").status == 400);
}

TEST_CASE("users see their own runs; FAULT events carry evidence") {
    Fixture f;
    auto r = f.call("POST", "/v1/runs", "alice-t", R"({"id":"alice-run","world_size":2,"manifest":{"gpus":2}})");
    CHECK(r.status == 201);
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"alice-run"})").status == 409);
    auto bad = f.call("POST", "/v1/runs", "alice-t", R"({"id":"r-bad","manifest":{"requires":{"fabric":"smoke-signals"}}})");
    CHECK(bad.status == 400);
    CHECK(Fixture::body(bad).at("error").at("field").as_string() == "manifest.requires.fabric");
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"r-ok","manifest":{"requires":{"fabric":"infiniband","memory_gb":64}}})").status == 201);
    CHECK(f.call("GET", "/v1/runs/alice-run", "bob-t").status == 404);
    CHECK(f.call("GET", "/v1/runs/alice-run", "alice-t").status == 200);
    CHECK(Fixture::body(f.call("GET", "/v1/runs", "bob-t")).at("runs").as_array().empty());
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("alice-run", 1, "a1", 5)).status == 204);
    f.svc->tick(wall_now() + 10);
    f.svc->drain();
    auto ev = Fixture::body(f.call("GET", "/v1/runs/alice-run/events", "alice-t")).at("events").as_array();
    REQUIRE(ev.size() == 3);
    CHECK(ev[0].at("kind").as_string() == "PENDING");
    CHECK(ev[1].at("kind").as_string() == "RUNNING");   // its first heartbeat
    CHECK(ev[2].at("kind").as_string() == "FAULT");
    CHECK(ev[2].at("cause").as_string() == "worker a1 missed heartbeats");
    CHECK(ev[2].at("evidence").at("last_step").to_number<int>() == 5);
    CHECK(Fixture::body(f.call("GET", "/v1/runs/alice-run", "alice-t")).at("state").as_string() == "DEGRADED");
}

TEST_CASE("the batch script's end ends the run with its status") {
    Fixture f;
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", R"({"run":"b1","attempt":1,"node":"a1","step":"batch","ranks":[{"rank":0,"exit":null}]})").status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", R"({"run":"b1","attempt":1,"node":"a1","step":"batch","state":"ended","ranks":[{"rank":0,"exit":{"code":0,"signal":null}}]})").status == 204);
    CHECK(Fixture::body(f.call("GET", "/v1/runs/b1", "admin-t")).at("state").as_string() == "SUCCEEDED");
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", R"({"run":"b2","attempt":1,"node":"a1","step":"batch","state":"ended","ranks":[{"rank":0,"exit":{"code":null,"signal":9}}]})").status == 204);
    // Not at once: a non-zero end is classified first (no other worker, so
    // no node to suspect: the program's own end).
    boost::json::array ev;
    for (int i = 0; i < 500 && ev.size() < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        ev = Fixture::body(f.call("GET", "/v1/runs/b2/events", "admin-t")).at("events").as_array();
    }
    REQUIRE(ev.size() == 2);
    CHECK(ev[1].at("kind").as_string() == "FAILED");
    CHECK(ev[1].at("cause").as_string() == "batch script killed by signal 9 on a1 (every node alive)");
}

TEST_CASE("node descriptors: stored, listed with classes and fabric, served whole") {
    Fixture f;
    const std::string desc = R"({"schema":"shardnet.node/1","host":"beta1","hash":"sha256:ab",)"
                             R"("accelerators":[{"class":"H200-SXM"},{"class":"H200-SXM"}],"fabric":{"summary":["NVSwitch","InfiniBand"]}})";
    CHECK(f.call("POST", "/v1/nodes", "worker-t", desc).status == 200);
    CHECK(f.call("POST", "/v1/nodes", "worker-t", R"({"schema":"other/9","host":"x","hash":"h"})").status == 400);
    auto list = Fixture::body(f.call("GET", "/v1/nodes", "admin-t")).at("nodes").as_array();
    REQUIRE(list.size() == 1);
    CHECK(list[0].at("accelerators").as_array().size() == 2);
    CHECK(list[0].at("fabric").as_array()[0].as_string() == "NVSwitch");
    CHECK(Fixture::body(f.call("GET", "/v1/nodes/beta1", "admin-t")).at("hash").as_string() == "sha256:ab");
    CHECK(f.call("GET", "/v1/nodes/gamma9", "admin-t").status == 404);
}

TEST_CASE("node descriptors of the wrong shape are refused, naming the part") {
    Fixture f;
    const std::string head = R"({"schema":"shardnet.node/1","host":"bad1","hash":"h",)";
    struct Case { const char *tail, *field; };
    for (const Case &c : {Case{R"("accelerators":[1]})", "accelerators"}, Case{R"("accelerators":{}})", "accelerators"},
                          Case{R"("accelerators":[{"class":7}]})", "accelerators"}, Case{R"("fabric":{"summary":3}})", "fabric"},
                          Case{R"("fabric":["IB"]})", "fabric"}, Case{R"("memory":{"total_bytes":"lots"}})", "memory"},
                          Case{R"("nics":[[]]})", "nics"}, Case{R"("cpu":1})", "cpu"}}) {
        CAPTURE(c.tail);
        auto r = f.call("POST", "/v1/nodes", "worker-t", head + c.tail);
        CHECK(r.status == 400);
        CHECK(Fixture::body(r).at("error").at("field").as_string() == c.field);
    }
    // Nothing of them was kept, and the listing still works.
    CHECK(Fixture::body(f.call("GET", "/v1/nodes", "admin-t")).at("nodes").as_array().empty());
    // What shardnet-probe writes passes.
    for (const char *fixture : {"nvidiaDGX2", "24em64t-2n6c2t-pci"}) {
        std::ifstream in(std::string(FIXTURES) + "/probe/" + fixture + ".json");
        std::stringstream ss;
        ss << in.rdbuf();
        CAPTURE(fixture);
        CHECK(f.call("POST", "/v1/nodes", "worker-t", ss.str()).status == 200);
    }
    CHECK(Fixture::body(f.call("GET", "/v1/nodes", "admin-t")).at("nodes").as_array().size() == 2);
}

namespace {
std::string wt(const std::string &run, unsigned long long attempt, unsigned long long job = 42, unsigned long long uid = 1001,
               unsigned long long world = 1, const std::string &cluster = "alpha") {
    return shardnet::derive_worker_token(kWorkerKey, shardnet::WorkerClaim{run, attempt, world, uid, job, cluster});
}
}  // namespace

TEST_CASE("a derived worker token reports for its own run and attempt only") {
    Fixture f;
    const std::string t1 = wt("r7", 1);
    CHECK(f.call("POST", "/v1/heartbeats", t1, hb("r7", 1, "a1", 1)).status == 204);
    CHECK(f.call("POST", "/v1/runs/r7/checkpoints/c1/commit", t1, commit(1, 0, 1)).status == 200);
    auto other_run = f.call("POST", "/v1/heartbeats", t1, hb("r8", 1, "a1", 1));
    CHECK(other_run.status == 403);
    auto next_attempt = f.call("POST", "/v1/heartbeats", t1, hb("r7", 2, "a1", 1));
    CHECK(next_attempt.status == 403);
    CHECK(next_attempt.body.find("attempt 1") != std::string::npos);
    CHECK(f.call("POST", "/v1/runs/r7/checkpoints/c2/commit", t1, commit(2, 0, 1)).status == 403);
    // Attempt 2 is the broker's to issue: a job it did not submit cannot
    // claim it, whatever its environment said.
    auto claimed = f.call("POST", "/v1/heartbeats", wt("r7", 2, 43), hb("r7", 2, "b1", 1));
    CHECK(claimed.status == 403);
    CHECK(claimed.body.find("not issued by this broker") != std::string::npos);
    CHECK(Fixture::body(f.call("GET", "/v1/runs/r7", "admin-t")).at("attempt").as_int64() == 1);
    CHECK(f.call("POST", "/v1/heartbeats", t1, hb("r7", 1, "a1", 2)).status == 204);   // not fenced
    // Slurm's own requeue of the same job counts its restarts: that is the job's.
    CHECK(f.call("POST", "/v1/heartbeats", wt("r7", 2, 42), hb("r7", 2, "a1", 1)).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", t1, hb("r7", 1, "a1", 3)).status == 409);
    CHECK(f.call("GET", "/v1/runs/r7", t1).status == 200);
    CHECK(f.call("GET", "/v1/runs/r1", t1).status == 404);
    CHECK(Fixture::body(f.call("GET", "/v1/runs/r7", "admin-t")).at("attempt").as_int64() == 2);
}

TEST_CASE("a ranks' report: the job's own token for its recorded attempt, ranks as the broker counts them") {
    Fixture f;
    const std::string t1 = wt("r7", 1, 42, 1001, 2);
    const std::string report = R"({"attempt":1,"world_size":4,"node":"a1","ranks":[{"rank":3,"environment":null}]})";
    CHECK(f.call("POST", "/v1/runs/r7/ranks", t1, report).status == 404);   // no run yet: a heartbeat comes first
    CHECK(f.call("POST", "/v1/heartbeats", t1, hb("r7", 1, "a1", 1)).status == 204);
    // The body's world_size is not the token's: this attempt has 2 ranks.
    auto r = f.call("POST", "/v1/runs/r7/ranks", t1, report);
    CHECK(r.status == 400);
    CHECK(r.body.find("this attempt has 2 ranks") != std::string::npos);
    // Checked, then kept for receipts only: this broker signs none (204, nothing kept).
    r = f.call("POST", "/v1/runs/r7/ranks", t1, R"({"attempt":1,"world_size":4,"node":"a1","ranks":[{"rank":1}]})");
    CHECK(r.status == 204);
    // Another job of the same user, another run, another attempt, a shared token: refused.
    CHECK(f.call("POST", "/v1/runs/r7/ranks", wt("r7", 1, 43, 1001, 2), R"({"attempt":1,"world_size":2,"node":"a2","ranks":[{"rank":0}]})").status == 403);
    CHECK(f.call("POST", "/v1/runs/r7/ranks", wt("r8", 1, 42, 1001, 2), R"({"attempt":1,"world_size":2,"node":"a2","ranks":[{"rank":0}]})").status == 403);
    CHECK(f.call("POST", "/v1/runs/r7/ranks", t1, R"({"attempt":2,"world_size":2,"node":"a2","ranks":[{"rank":0}]})").status == 403);
    r = f.call("POST", "/v1/runs/r7/ranks", "worker-t", R"({"attempt":1,"world_size":2,"node":"a2","ranks":[{"rank":0}]})");
    CHECK(r.status == 403);
    CHECK(r.body.find("per-job worker token") != std::string::npos);
    CHECK(f.call("POST", "/v1/runs/r7/ranks", "alice-t", R"({"attempt":1,"world_size":2,"node":"a2","ranks":[{"rank":0}]})").status == 403);
}

TEST_CASE("the dashboard's views: a user's or an admin's token only") {
    Fixture f;
    const std::string t1 = wt("r7", 1);
    CHECK(f.call("POST", "/v1/heartbeats", t1, hb("r7", 1, "a1", 1)).status == 204);
    for (const std::string path : {"/v1/views/runs", "/v1/views/runs/r7"}) {
        CAPTURE(path);
        CHECK(f.call("GET", path, "admin-t").status == 200);
        CHECK(f.call("GET", path, t1).status == 403);
        CHECK(f.call("GET", path, "peer-t").status == 403);
        auto r = f.call("GET", path, "worker-t");
        CHECK(r.status == 403);
        CHECK(r.body.find("user or admin token") != std::string::npos);
    }
    CHECK(f.call("GET", "/v1/views/runs", "alice-t").status == 200);
    CHECK(f.call("GET", "/v1/views/runs/r7", "alice-t").status == 404);   // not alice's run
}

TEST_CASE("a shared worker token cannot report for a run; it publishes node descriptors only") {
    Fixture f;
    auto r = f.call("POST", "/v1/heartbeats", "worker-t", hb("r1", 1, "a1", 1));
    CHECK(r.status == 403);
    CHECK(r.body.find("per-job worker token") != std::string::npos);
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/c1/commit", "worker-t", commit(1, 0, 1)).status == 403);
    CHECK(f.call("GET", "/v1/runs/r1", "admin-t").status == 404);   // nothing was created
}

TEST_CASE("another user's job cannot report under a run, fence it or take its attempt") {
    Fixture f;
    const std::string a = wt("victim", 1, 42, 1001, 2);
    CHECK(f.call("POST", "/v1/heartbeats", a, hb("victim", 1, "a1", 5)).status == 204);
    auto run = Fixture::body(f.call("GET", "/v1/runs/victim", "admin-t"));
    CHECK(run.at("attempt").as_int64() == 1);
    // User 1002, with tokens their own jobs really got (the attack needs no forgery).
    for (unsigned long long attempt : {1ULL, 2ULL, 1000000ULL}) {
        CAPTURE(attempt);
        auto r = f.call("POST", "/v1/heartbeats", wt("victim", attempt, 77, 1002), hb("victim", (int)attempt, "b1", 1));
        CHECK(r.status == 403);
        CHECK(r.body.find("1002") == std::string::npos);   // nothing of whose the run is
        if (attempt == 1) CHECK(r.body.find("run id victim is taken") != std::string::npos);
        // Past attempt 1, word for word what a run that does not exist answers.
        else {
            std::string missing = f.call("POST", "/v1/heartbeats", wt("victim-0", attempt, 77, 1002), hb("victim-0", (int)attempt, "b1", 1)).body;
            for (auto at = missing.find("victim-0"); at != std::string::npos; at = missing.find("victim-0")) missing.replace(at, 8, "victim");
            CHECK(r.body == missing);
        }
        // On the run's own routes: as if there were no such run (no existence leak).
        CHECK(f.call("POST", "/v1/runs/victim/checkpoints/c9/commit", wt("victim", attempt, 77, 1002), commit((int)attempt, 0, 1)).status == 404);
    }
    // Nor read the run, its workers or events, nor describe nodes.
    CHECK(f.call("GET", "/v1/runs/victim", wt("victim", 1, 77, 1002)).status == 404);
    CHECK(f.call("GET", "/v1/runs/victim/events", wt("victim", 1, 77, 1002)).status == 404);
    CHECK(f.call("GET", "/v1/runs/victim", a).status == 200);
    CHECK(f.call("POST", "/v1/nodes", a, R"({"schema":"shardnet.node/1","host":"h1","hash":"x"})").status == 403);
    // The same user's second job cannot take attempt 1 either.
    auto twin = f.call("POST", "/v1/heartbeats", wt("victim", 1, 43, 1001), hb("victim", 1, "a2", 1));
    CHECK(twin.status == 403);
    CHECK(twin.body.find("is job alpha/42") != std::string::npos);
    // A body naming another job than the token's is refused.
    auto lie = f.call("POST", "/v1/heartbeats", a, R"({"run":"victim","attempt":1,"node":"a1","cluster":"alpha","job":7,"ranks":[]})");
    CHECK(lie.status == 403);
    CHECK(lie.body.find("alpha/42") != std::string::npos);
    run = Fixture::body(f.call("GET", "/v1/runs/victim", "admin-t"));
    CHECK(run.at("attempt").as_int64() == 1);
    CHECK(run.at("state").as_string() == "RUNNING");
    CHECK(run.at("owner").as_string() != "");
    // Nothing of it changed after a restart either.
    f.svc->drain();
    f.svc.reset();
    BrokerConfig cfg;
    cfg.plain_http = true;
    cfg.database = f.dir + "/b.db";
    cfg.tokens = {TokenEntry{"ops", sha256_hex("admin-t"), Scope::admin, ""}};
    cfg.worker_keys = {WorkerKey{"site", "/k", kWorkerKey}};
    f.svc = std::make_unique<Service>(cfg, std::make_unique<Store>(cfg.database));
    CHECK(f.call("POST", "/v1/heartbeats", wt("victim", 1, 77, 1002), hb("victim", 1, "b1", 1)).status == 403);
    CHECK(f.call("POST", "/v1/heartbeats", wt("victim", 1, 43, 1001), hb("victim", 1, "a2", 1)).status == 403);
    CHECK(f.call("POST", "/v1/heartbeats", a, hb("victim", 1, "a1", 6)).status == 204);
}

TEST_CASE("a seal waits for the attempt's ranks as the broker knows them, not for a commit's world_size") {
    Fixture f;
    const std::string t = wt("w2", 1, 42, 1001, 2);   // a 2-rank step
    CHECK(f.call("POST", "/v1/heartbeats", t, hb("w2", 1, "a1", 1)).status == 204);
    auto one = Fixture::body(f.call("POST", "/v1/runs/w2/checkpoints/checkpoint-999/commit", t, commit(1, 0, 1)));
    CHECK(one.at("sealed").as_bool() == false);
    CHECK(one.at("of").as_int64() == 2);
    // A smaller step of the same job does not lower it either.
    auto small = Fixture::body(f.call("POST", "/v1/runs/w2/checkpoints/checkpoint-998/commit", wt("w2", 1, 42, 1001, 1), commit(1, 0, 1)));
    CHECK(small.at("sealed").as_bool() == false);
    CHECK(Fixture::body(f.call("GET", "/v1/runs/w2/checkpoints", "admin-t")).at("checkpoints").as_array().empty());
    auto two = Fixture::body(f.call("POST", "/v1/runs/w2/checkpoints/checkpoint-999/commit", t, commit(1, 1, 2)));
    CHECK(two.at("sealed").as_bool() == true);
    CHECK(f.call("POST", "/v1/runs/w2/checkpoints/c/commit", t, commit(1, 2, 3)).status == 400);   // rank 2 of 2
}

TEST_CASE("a job's default run id cannot be taken by anyone else") {
    Fixture f;
    // (alpha is not a cluster of this fixture's broker: the plugin's own fallback prefix is.)
    auto r = f.call("POST", "/v1/heartbeats", wt("job.42", 1, 77, 1002), hb("job.42", 1, "b1", 1));
    CHECK(r.status == 403);
    CHECK(r.body.find("default run id") != std::string::npos);
    CHECK(f.call("POST", "/v1/heartbeats", wt("job.42", 1, 42, 1001), hb("job.42", 1, "a1", 1)).status == 204);
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"job.43"})").status == 400);
}

TEST_CASE("another user's job cannot commit to a run nobody has claimed yet") {
    Fixture f;
    CHECK(f.call("POST", "/v1/runs", "admin-t", R"({"id":"train-a","world_size":4})").status == 201);
    auto r = f.call("POST", "/v1/runs/train-a/checkpoints/step-999999/commit", wt("train-a", 1, 501, 1002), commit(1, 0, 1));
    CHECK(r.status == 403);
    CHECK(r.body.find("a heartbeat comes first") != std::string::npos);
    CHECK(Fixture::body(f.call("GET", "/v1/runs/train-a/checkpoints", "admin-t")).at("checkpoints").as_array().empty());
    // Its owner's job claims it with a heartbeat, then commits.
    const std::string a = wt("train-a", 1, 500, 1001);
    CHECK(f.call("POST", "/v1/heartbeats", a, hb("train-a", 1, "a1", 1)).status == 204);
    CHECK(f.call("POST", "/v1/runs/train-a/checkpoints/step-1/commit", a, commit(1, 0, 1)).status == 200);
    // Claimed, it is another user's run: to uid 1002's job, no run at all.
    CHECK(f.call("POST", "/v1/runs/train-a/checkpoints/step-2/commit", wt("train-a", 1, 501, 1002), commit(1, 0, 1)).status == 404);
}

TEST_CASE("a follower that may no longer see a run gets none of its events") {
    Fixture f;
    CHECK(f.call("POST", "/v1/runs", "admin-t", R"({"id":"train-d"})").status == 201);
    auto sink = std::make_shared<EventSink>();
    std::mutex mu;
    std::vector<std::string> got;
    sink->push = [&](std::string m) { std::lock_guard<std::mutex> l(mu); got.push_back(std::move(m)); };
    // Another user's job token names the run while nobody owns it.
    const std::string bob = wt("train-d", 1, 601, 1002);
    CHECK_FALSE(testing::follow_events(*f.svc, ApiRequest{"GET", "/v1/runs/train-d/events?follow=1", bob, "", nullptr}, sink));
    f.svc->drain();
    const std::size_t backlog = got.size();
    CHECK(backlog == 1);   // PENDING
    // Its owner's job claims it: nothing of the run reaches the other user any more.
    CHECK(f.call("POST", "/v1/heartbeats", wt("train-d", 1, 600, 1001), hb("train-d", 1, "a1", 1)).status == 204);
    CHECK(f.call("POST", "/v1/runs/train-d/checkpoints/alice-ckpt-7/commit", wt("train-d", 1, 600, 1001), commit(1, 0, 1)).status == 200);
    f.svc->drain();
    std::lock_guard<std::mutex> l(mu);
    CHECK(got.size() == backlog);
    CHECK_FALSE(sink->open);
}

TEST_CASE("a peer's decision cannot take a run that lives here, nor a local job's default id") {
    Fixture f;
    CHECK(f.call("POST", "/v1/heartbeats", wt("train-x", 1, 800, 1001), hb("train-x", 1, "a1", 1)).status == 204);
    auto decision = [](const std::string &run, const std::string &extra = "") {
        return R"({"id":"evil:)" + run + R"(","from_broker":"evil","run":")" + run + R"(","to_attempt":2,"resume":"latest",)"
               R"("spec":{"user":"daemon","nodes":1,"tasks":1},"script":"#!/bin/bash\nid\n")" + extra + "}";
    };
    auto r = f.call("POST", "/v1/decisions", "peer-t", decision("train-x"));
    CAPTURE(r.body);
    CHECK(r.status == 409);
    CHECK(r.body.find("may only hand back a run that this broker moved") != std::string::npos);
    r = f.call("POST", "/v1/decisions", "peer-t", decision("job.4242"));
    CHECK(r.status == 409);
    CHECK(r.body.find("default run id") != std::string::npos);
    // A manifest of the wrong shape is refused before anything is kept.
    r = f.call("POST", "/v1/decisions", "peer-t", decision("new-run", R"(,"manifest":"{\"requires\":5}")"));
    CHECK(r.status == 400);
    CHECK(r.body.find("manifest") != std::string::npos);
    CHECK(Fixture::body(f.call("GET", "/v1/runs/train-x", "admin-t")).at("attempt").as_int64() == 1);
    CHECK(Fixture::body(f.call("GET", "/v1/runs/train-x", "admin-t")).at("state").as_string() == "RUNNING");
}

TEST_CASE("an event stream's backlog comes in pages, each when asked for; Last-Event-ID resumes after it") {
    Fixture f;
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("pg", 1, "a1", 1)).status == 204);
    for (int i = 0; i < 40; ++i)
        CHECK(f.call("POST", "/v1/runs/pg/checkpoints/c-" + std::to_string(i) + "/commit", "admin-t", commit(1, 0, 1)).status == 200);
    f.svc->drain();
    auto ids_of = [](const std::vector<std::string> &msgs) {
        std::vector<long long> ids;
        for (const auto &m : msgs) ids.push_back(std::stoll(m.substr(4)));   // "id: N\n..."
        return ids;
    };
    // All of it at once, for reference.
    auto whole = std::make_shared<EventSink>();
    std::mutex mu;
    std::vector<std::string> all, paged;
    whole->push = [&](std::string m) { std::lock_guard<std::mutex> l(mu); all.push_back(std::move(m)); };
    CHECK_FALSE(testing::follow_events(*f.svc, ApiRequest{"GET", "/v1/runs/pg/events?follow=1", "admin-t", "", nullptr}, whole));
    f.svc->drain();
    REQUIRE(all.size() > 40);
    // Pages of about 1 KiB: each next one only when the stream asks.
    auto sink = std::make_shared<EventSink>();
    sink->page_bytes = 1024;
    std::function<void()> next;
    int pages = 1;
    sink->push = [&](std::string m) { std::lock_guard<std::mutex> l(mu); paged.push_back(std::move(m)); };
    sink->more = [&](std::function<void()> n) { std::lock_guard<std::mutex> l(mu); next = std::move(n); };
    CHECK_FALSE(testing::follow_events(*f.svc, ApiRequest{"GET", "/v1/runs/pg/events?follow=1", "admin-t", "", nullptr}, sink));
    for (;;) {
        f.svc->drain();
        std::function<void()> n;
        {
            std::lock_guard<std::mutex> l(mu);
            CHECK(paged.size() < all.size() + 1);
            n = std::move(next);
            next = nullptr;
        }
        if (!n) break;
        ++pages;
        n();
    }
    CHECK(pages > 3);
    CHECK(ids_of(paged) == ids_of(all));   // no gap, no repeat
    // Then live: the next event reaches the paged stream too.
    const std::size_t backlog = paged.size();
    CHECK(f.call("POST", "/v1/runs/pg/checkpoints/live/commit", "admin-t", commit(1, 0, 1)).status == 200);
    f.svc->drain();
    {
        std::lock_guard<std::mutex> l(mu);
        CHECK(paged.size() == backlog + 1);
    }
    // A reconnect says where it was: exactly the events after it, whatever ?after= says.
    const long long mid = ids_of(all)[20];
    auto again = std::make_shared<EventSink>();
    std::vector<std::string> resumed;
    again->push = [&](std::string m) { std::lock_guard<std::mutex> l(mu); resumed.push_back(std::move(m)); };
    ApiRequest r{"GET", "/v1/runs/pg/events?follow=1&after=0", "admin-t", "", nullptr};
    r.last_event_id = std::to_string(mid);
    CHECK_FALSE(testing::follow_events(*f.svc, r, again));
    f.svc->drain();
    {
        std::lock_guard<std::mutex> l(mu);
        std::vector<long long> want;
        for (long long id : ids_of(paged)) if (id > mid) want.push_back(id);
        CHECK(ids_of(resumed) == want);
    }
    r.last_event_id = "12abc";
    auto bad = testing::follow_events(*f.svc, r, std::make_shared<EventSink>());
    REQUIRE(bad);
    CHECK(bad->status == 400);
    CHECK(bad->body.find("Last-Event-ID") != std::string::npos);
}

TEST_CASE("event streams have a budget: per token 429, in all 503, both with Retry-After; a closed stream gives its place back") {
    Fixture f([](BrokerConfig &c) { c.sse_streams_per_token = 2; c.sse_max_streams = 3; });
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"sb"})").status == 201);
    auto follow = [&](const std::string &token, std::shared_ptr<EventSink> &sink) {
        sink = std::make_shared<EventSink>();
        sink->push = [](std::string) {};
        sink->more = [](std::function<void()> next) { next(); };
        return testing::follow_events(*f.svc, ApiRequest{"GET", "/v1/runs/sb/events?follow=1", token, "", nullptr}, sink);
    };
    std::shared_ptr<EventSink> a1, a2, a3, p1, p2;
    CHECK_FALSE(follow("alice-t", a1));
    CHECK_FALSE(follow("alice-t", a2));
    auto third = follow("alice-t", a3);
    REQUIRE(third);
    CHECK(third->status == 429);
    CHECK(third->retry_after == 5);
    CHECK(third->body.find("too_many_streams") != std::string::npos);
    CHECK_FALSE(follow("admin-t", p1));   // another token: its own two, within the three in all
    auto over = follow("admin-t", p2);
    REQUIRE(over);
    CHECK(over->status == 503);
    CHECK(over->retry_after == 5);
    f.svc->drain();
    a1->open = false;
    a1.reset();   // the stream went: its place is free
    f.svc->drain();
    CHECK_FALSE(follow("admin-t", p2));
    CHECK(f.svc->metrics().find("shardnet_event_streams 3") != std::string::npos);
}

TEST_CASE("one token's requests in flight are capped (limits.requests_per_token): the next is 429 at once; heartbeats pass; answered, the place is back") {
    Fixture f([](BrokerConfig &c) { c.requests_per_token = 2; c.store_busy_ms = 1500; });
    REQUIRE(f.call("POST", "/v1/heartbeats", "admin-t", hb("hq", 1, "a1", 1)).status == 204);
    const std::string agent = wt("rq", 1), reader = shardnet::derive_reader_token(kWorkerKey, shardnet::WorkerClaim{"rq", 1, 1, 1001, 42, "alpha"});
    REQUIRE(f.call("POST", "/v1/heartbeats", agent, hb("rq", 1, "a1", 1)).status == 204);
    // Another process holds the database: the store thread waits on it.
    sqlite3 *db = nullptr;
    REQUIRE(sqlite3_open((f.dir + "/b.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
    std::promise<ApiResponse> p1, p2;
    f.svc->handle(ApiRequest{"POST", "/v1/runs", "alice-t", R"({"id":"q1"})", nullptr}, [&p1](ApiResponse r) { p1.set_value(std::move(r)); });
    f.svc->handle(ApiRequest{"POST", "/v1/runs", "alice-t", R"({"id":"q2"})", nullptr}, [&p2](ApiResponse r) { p2.set_value(std::move(r)); });
    auto third = f.call("GET", "/v1/runs", "alice-t");
    CHECK(third.status == 429);
    CHECK(third.retry_after == 1);
    CHECK(third.body.find("too_many_requests") != std::string::npos);
    CHECK(third.body.find("this token has 2 requests in flight (limits.requests_per_token)") != std::string::npos);
    CHECK(f.call("GET", "/v1/runs", "bob-t").status == 200);                         // another token's budget is its own
    CHECK(f.call("POST", "/v1/heartbeats", "admin-t", hb("hq", 1, "a1", 2)).status == 204);   // a known run's heartbeats never wait on the store
    // Callers without a token are not one budget: two of them waiting on
    // the store leave /v1/health answered for the next.
    std::promise<ApiResponse> k1, k2;
    f.svc->handle(ApiRequest{"GET", "/v1/keys", "", "", nullptr}, [&k1](ApiResponse r) { k1.set_value(std::move(r)); });
    f.svc->handle(ApiRequest{"GET", "/v1/keys", "", "", nullptr}, [&k2](ApiResponse r) { k2.set_value(std::move(r)); });
    CHECK(f.call("GET", "/v1/health", "").status == 200);
    // A job's reader token (its ranks') shares its agents' budget: 2 and
    // twice its one task, all taken by the agent's commits.
    std::vector<std::promise<ApiResponse>> commits(4);
    for (auto &p : commits)
        f.svc->handle(ApiRequest{"POST", "/v1/runs/rq/checkpoints/c1/commit", agent, commit(1, 0, 1), nullptr}, [&p](ApiResponse r) { p.set_value(std::move(r)); });
    auto ranks = f.call("GET", "/v1/runs/rq/checkpoints/c1/files?rank=0", reader);
    CHECK(ranks.status == 429);
    CHECK(ranks.body.find("this token has 4 requests in flight") != std::string::npos);
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    p1.get_future().get();
    p2.get_future().get();
    k1.get_future().get();
    k2.get_future().get();
    for (auto &p : commits) p.get_future().get();
    CHECK(f.call("GET", "/v1/runs", "alice-t").status == 200);
}

TEST_CASE("a request's place in its token's budget is held until its answer is written (ApiResponse::hold), not only given") {
    Fixture f([](BrokerConfig &c) { c.requests_per_token = 1; });
    std::vector<ApiResponse> writing;   // answers the HTTP session still writes to a slow reader
    f.svc->handle(ApiRequest{"GET", "/v1/runs", "alice-t", "", nullptr}, [&writing](ApiResponse r) { writing.push_back(std::move(r)); });
    REQUIRE(writing.size() == 1);
    CHECK(writing[0].status == 200);
    CHECK(writing[0].hold != nullptr);
    auto r = f.call("GET", "/v1/runs", "alice-t");
    CHECK(r.status == 429);
    CHECK(r.body.find("this token has 1 requests in flight") != std::string::npos);
    writing.clear();   // written
    CHECK(f.call("GET", "/v1/runs", "alice-t").status == 200);
}

TEST_CASE("one user's runs not ended are capped (limits.runs_per_user): 429 with Retry-After; another user's are their own; an ended run frees its place") {
    Fixture f([](BrokerConfig &c) { c.runs_per_user = 2; });
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"a1"})").status == 201);
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"a2"})").status == 201);
    auto r = f.call("POST", "/v1/runs", "alice-t", R"({"id":"a3"})");
    CHECK(r.status == 429);
    CHECK(r.retry_after == 60);
    CHECK(r.body.find("too_many_runs") != std::string::npos);
    CHECK(r.body.find("user daemon has 2 runs not ended (limits.runs_per_user)") != std::string::npos);
    CHECK(f.call("POST", "/v1/runs", "bob-t", R"({"id":"b1"})").status == 201);
    CHECK(f.call("POST", "/v1/runs/a1/cancel", "alice-t").status == 200);
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"a3"})").status == 201);
}

TEST_CASE("runs_per_user holds a job's first heartbeat as it holds POST /v1/runs; the count is the registry's, kept over a restart") {
    auto tune = [](BrokerConfig &c) { c.runs_per_user = 2; };
    Fixture f(tune);
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"a1"})").status == 201);   // alice acts as daemon (uid 1)
    CHECK(f.call("POST", "/v1/heartbeats", wt("j1", 1, 51, 1), hb("j1", 1, "n1", 1)).status == 204);   // a job of daemon's
    auto r = f.call("POST", "/v1/heartbeats", wt("j2", 1, 52, 1), hb("j2", 1, "n1", 1));
    CHECK(r.status == 429);
    CHECK(r.retry_after == 60);
    CHECK(r.body.find("user daemon has 2 runs not ended (limits.runs_per_user)") != std::string::npos);
    CHECK(f.call("GET", "/v1/runs/j2", "admin-t").status == 404);   // no run was made of it
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"a2"})").status == 429);
    CHECK(f.call("POST", "/v1/heartbeats", wt("j1", 1, 51, 1), hb("j1", 1, "n1", 2)).status == 204);   // a run it has goes on
    // After a restart the count is the loaded runs'.
    f.svc->drain();
    f.svc.reset();
    BrokerConfig cfg;
    cfg.plain_http = true;
    cfg.database = f.dir + "/b.db";
    cfg.tokens = {TokenEntry{"ops", sha256_hex("admin-t"), Scope::admin, ""}, TokenEntry{"alice", sha256_hex("alice-t"), Scope::user, "", 0, "daemon"}};
    cfg.worker_keys = {WorkerKey{"site", "/k", kWorkerKey}};
    tune(cfg);
    f.svc = std::make_unique<Service>(cfg, std::make_unique<Store>(cfg.database));
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"a2"})").status == 429);
    // Ended, a run frees its place; a failed create holds none.
    CHECK(f.call("POST", "/v1/runs/a1/cancel", "alice-t").status == 200);
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"a1"})").status == 409);
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"a2"})").status == 201);
    CHECK(f.call("POST", "/v1/runs", "alice-t", R"({"id":"a3"})").status == 429);
}

TEST_CASE("a run's seals come a page at a time, in seal order, with the next page's after; or its newest; bad paging is 400") {
    Fixture f;
    const std::string t1 = wt("pg", 1);
    REQUIRE(f.call("POST", "/v1/heartbeats", t1, hb("pg", 1, "a1", 1)).status == 204);
    for (const char *c : {"c1", "c2", "c3"})
        REQUIRE(f.call("POST", std::string("/v1/runs/pg/checkpoints/") + c + "/commit", t1, commit(1, 0, 1)).status == 200);   // world 1: sealed
    auto names = [](const json::value &v) {
        std::string out;
        for (const auto &c : v.at("checkpoints").as_array()) out += std::string(c.at("name").as_string()) + " ";
        return out;
    };
    auto p1 = Fixture::body(f.call("GET", "/v1/runs/pg/checkpoints?limit=2", "admin-t"));
    CHECK(names(p1) == "c1 c2 ");
    REQUIRE(p1.at("next").is_int64());
    auto p2 = Fixture::body(f.call("GET", "/v1/runs/pg/checkpoints?limit=2&after=" + std::to_string(p1.at("next").as_int64()), "admin-t"));
    CHECK(names(p2) == "c3 ");
    CHECK(p2.at("next").is_null());
    CHECK(names(Fixture::body(f.call("GET", "/v1/runs/pg/checkpoints", t1))) == "c1 c2 c3 ");
    auto newest = Fixture::body(f.call("GET", "/v1/runs/pg/checkpoints?newest=2", t1));
    CHECK(names(newest) == "c2 c3 ");
    CHECK(newest.at("next").is_null());
    for (const char *q : {"limit=0", "limit=1001", "after=-1", "newest=x", "newest=2&after=1"}) {
        auto r = f.call("GET", std::string("/v1/runs/pg/checkpoints?") + q, "admin-t");
        CHECK_MESSAGE(r.status == 400, q);
        CHECK(r.body.find("bad_query") != std::string::npos);
    }
    CHECK(f.call("GET", "/v1/runs/pg/checkpoints?limit=2", "bob-t").status == 404);   // not bob's run
}

TEST_CASE("a sealed checkpoint's files, as committed, for the job's reader token; a reader token changes nothing") {
    Fixture f;
    const std::string t1 = wt("r7", 1);
    const std::string reader = shardnet::derive_reader_token(kWorkerKey, shardnet::WorkerClaim{"r7", 1, 1, 1001, 42, "alpha"});
    REQUIRE(f.call("POST", "/v1/heartbeats", t1, hb("r7", 1, "a1", 1)).status == 204);
    REQUIRE(f.call("POST", "/v1/runs/r7/checkpoints/c1/commit", t1, commit(1, 0, 1)).status == 200);   // world 1: sealed
    auto r = f.call("GET", "/v1/runs/r7/checkpoints/c1/files?rank=0", reader);
    REQUIRE(r.status == 200);
    const auto v = Fixture::body(r);
    CHECK(v.at("checkpoint") == "c1");
    CHECK(v.at("attempt") == 1);
    // (Receipts off: a digest that is none is taken, and listed as
    // committed, with no proof: it is no leaf of the list's root.)
    CHECK(v.at("files") == json::parse(R"([{"path":"shard.pt","sha256":"00","bytes":1,"rank":0}])"));
    CHECK(v.at("list").at("count") == 0);
    CHECK(f.call("GET", "/v1/runs/r7/checkpoints/c1/files?rank=0", t1).status == 200);   // the agent's too
    r = f.call("GET", "/v1/runs/r7/checkpoints/c1/files?rank=1", reader);
    CHECK(r.status == 404);
    CHECK(r.body.find("no_rank") != std::string::npos);
    r = f.call("GET", "/v1/runs/r7/checkpoints/c2/files?rank=0", reader);
    CHECK(r.status == 404);
    CHECK(r.body.find("no_checkpoint") != std::string::npos);
    r = f.call("GET", "/v1/runs/r7/checkpoints/c1/files?rank=x", reader);
    CHECK(r.status == 400);
    CHECK(r.body.find(R"("field":"rank")") != std::string::npos);
    // Another uid's reader sees no such run.
    const std::string theirs = shardnet::derive_reader_token(kWorkerKey, shardnet::WorkerClaim{"r7", 1, 1, 1002, 43, "alpha"});
    CHECK(f.call("GET", "/v1/runs/r7/checkpoints/c1/files?rank=0", theirs).status == 404);
    // The reader reads; it cannot heartbeat, commit or cancel.
    r = f.call("POST", "/v1/heartbeats", reader, hb("r7", 1, "a1", 2));
    CHECK(r.status == 403);
    CHECK(r.body.find("only reads") != std::string::npos);
    CHECK(f.call("POST", "/v1/runs/r7/checkpoints/c3/commit", reader, commit(1, 0, 1)).status == 403);
    CHECK(f.call("POST", "/v1/runs/r7/cancel", reader).status == 403);
    CHECK(Fixture::body(f.call("GET", "/v1/runs/r7", "admin-t")).at("state") == "RUNNING");
}
