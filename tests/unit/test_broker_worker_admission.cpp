// A job's worker is admitted once, against what Slurm says of the job: its
// node must be one of the job's nodes, and the job's workers that still
// report stay within its task count. Slurm is read once per job, not per
// heartbeat. And a job that names another user's run learns no more than
// one that names no run at all.
#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <doctest/doctest.h>

#include "common/worker_token.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet;
using namespace shardnet::broker;
using namespace shardnet::broker::testing;

namespace {

const std::string kConf = "/fake/c1.conf";
const std::string kKey(32, 'w');

std::string token(const std::string &run, unsigned long long attempt, unsigned long long job, unsigned long long uid = 1) {
    return derive_worker_token(kKey, WorkerClaim{run, attempt, 2, uid, job, "c1"});
}

std::string beat(const std::string &run, long long attempt, const std::string &node, const std::string &step,
                 const std::string &state = "running") {
    return R"({"run":")" + run + R"(","attempt":)" + std::to_string(attempt) + R"(,"node":")" + node + R"(","step":")" + step +
           R"(","interval":1,"state":")" + state + R"(","ranks":[{"rank":0,"step":1}]})";
}

struct AdmissionFixture : ServiceFixture {
    AdmissionFixture() : ServiceFixture({{"c1", kConf}}) {
        cfg.worker_keys = {WorkerKey{"site", "/k", kKey}};
        start([](FakeSlurm &s) {
            FakeSlurm::Job j;
            j.id = 7, j.uid = 1, j.nodes = "n1,n2", j.batch_host = "n1", j.node_count = 2, j.tasks = 2;
            s.jobs[kConf][7] = j;
            FakeSlurm::Job k;
            k.id = 8, k.uid = 2, k.nodes = "m1", k.batch_host = "m1", k.node_count = 1, k.tasks = 1;
            s.jobs[kConf][8] = k;
            s.nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "IDLE"}, {"m1", "ALLOCATED"}};
        });
    }
    std::size_t workers(const std::string &run) {
        auto o = this->run(run);
        return o.contains("workers") ? o.at("workers").as_array().size() : 0;
    }
};

}  // namespace

TEST_CASE("a job's heartbeat names one of its own Slurm nodes, else it is refused naming the node; Slurm is read once per job") {
    AdmissionFixture f;
    const std::string t = token("rj", 1, 7);
    CHECK(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n1", "0"), t).status == 204);
    // n3 is the cluster's, not the job's.
    auto r = f.call("POST", "/v1/heartbeats", beat("rj", 1, "n3", "0"), t);
    CHECK(r.status == 403);
    CHECK(r.body.find("node n3 is not one of job c1/7's nodes") != std::string::npos);
    CHECK(r.body.find(R"("field":"node")") != std::string::npos);
    // A name no Slurm node has: refused as it is read, before Slurm is asked.
    for (const std::string bad : {"n\\u202e1", "n\xe2\x80\xae" "1", "<b>n1</b>", "n1,n2", "n[1-2]", "n1\\u0000", "&lt;n1"}) {
        CAPTURE(bad);
        r = f.call("POST", "/v1/heartbeats", beat("rj", 1, bad, "0"), t);
        CHECK(r.status == 400);
        CHECK(r.body.find(R"("field":"node")") != std::string::npos);
    }
    CHECK(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n2", "0"), t).status == 204);
    const auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) {
        REQUIRE(f.call("POST", "/v1/heartbeats", beat("rj", 1, i % 2 ? "n1" : "n2", "0"), t).status == 204);
        REQUIRE(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n3", "0"), t).status == 403);
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    // One squeue for the job: the known workers' heartbeats asked nothing
    // more, and the refused node at most once per JobAllocations::kRecheckSeconds
    // (Slurm's own requeue may have moved the job).
    CHECK(f.slurm->count("squeue") <= 1 + int(took / JobAllocations::kRecheckSeconds));
    CHECK(f.slurm->count("squeue") < 10);
    CHECK(f.workers("rj") == 2);   // n1/0 and n2/0; never n3
}

TEST_CASE("a job's first heartbeats that come together wait for one read of Slurm, not one each") {
    AdmissionFixture f;
    f.slurm->squeue_ms = 300;
    const std::string t = token("rt", 1, 7);
    std::vector<std::promise<ApiResponse>> answers(20);
    for (std::size_t i = 0; i < answers.size(); ++i)
        f.svc->handle(ApiRequest{"POST", "/v1/heartbeats", t, beat("rt", 1, i % 2 ? "n1" : "n2", "0"), nullptr},
                      [&p = answers[i]](ApiResponse r) { p.set_value(std::move(r)); });
    for (auto &a : answers) {
        auto fut = a.get_future();
        REQUIRE(fut.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
        CHECK(fut.get().status == 204);
    }
    CHECK(f.slurm->count("squeue") == 1);
}

TEST_CASE("a node Slurm cannot vouch for is not taken: 503 to report again, and no run made") {
    AdmissionFixture f;
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->down_controllers.insert(kConf);
    }
    auto r = f.call("POST", "/v1/heartbeats", beat("rj", 1, "n1", "0"), token("rj", 1, 7));
    CHECK(r.status == 503);
    CHECK(r.retry_after > 0);
    CHECK(r.body.find("slurm_unavailable") != std::string::npos);
    CHECK(f.call("GET", "/v1/runs/rj").status == 404);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->down_controllers.clear();
    }
    // The failed look is tried again after JobAllocations::kRetrySeconds.
    REQUIRE(ServiceFixture::until([&] { return f.call("POST", "/v1/heartbeats", beat("rj", 1, "n1", "0"), token("rj", 1, 7)).status == 204; }, 5));
    ServiceFixture::settle();   // what the awaited change started is written too
}

TEST_CASE("a job's workers that still report are capped at its task count from Slurm; ended ones are not kept without bound") {
    AdmissionFixture f;
    const std::string t = token("rj", 1, 7);
    CHECK(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n1", "0"), t).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n2", "0"), t).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n1", "batch"), t).status == 204);   // the batch script is no task's worker
    // A third at once: the job has 2 tasks.
    auto r = f.call("POST", "/v1/heartbeats", beat("rj", 1, "n1", "1"), t);
    CHECK(r.status == 409);
    CHECK(r.body.find("too_many_workers") != std::string::npos);
    CHECK(r.body.find("job c1/7 has 2 tasks (Slurm); 2 of its workers already report") != std::string::npos);
    CHECK(r.body.find("worker n1/1 is refused") != std::string::npos);
    // Step 0 ends: the next step's workers are taken.
    CHECK(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n1", "0", "ended"), t).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n2", "0", "ended"), t).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n1", "1"), t).status == 204);
    // Step after step (a job's loop of sruns): the table stays small.
    for (int step = 2; step < 300; ++step) {
        REQUIRE(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n2", std::to_string(step)), t).status == 204);
        REQUIRE(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n2", std::to_string(step), "ended"), t).status == 204);
    }
    CHECK(f.workers("rj") <= 2 * 4 + 16 + 3);
    // Whatever names a job makes up, 203 workers do not fit a 2-task job.
    int taken = 0;
    for (int i = 0; i < 203; ++i) taken += f.call("POST", "/v1/heartbeats", beat("rj", 1, "n2", "x" + std::to_string(i)), t).status == 204;
    CHECK(taken == 1);   // n1/1 reports; one more fits
}

TEST_CASE("a heartbeat naming another user's run answers as one naming no run: past attempt 1 word for word") {
    AdmissionFixture f;
    REQUIRE(f.call("POST", "/v1/heartbeats", beat("victim", 1, "n1", "0"), token("victim", 1, 7)).status == 204);
    // uid 2's job 8 (on m1), with the tokens its agents really get.
    for (long long attempt : {2LL, 3LL, 1000000LL})
        for (const std::string node : {"m1", "n1", "n3"}) {
            CAPTURE(attempt);
            CAPTURE(node);
            const auto theirs = f.call("POST", "/v1/heartbeats", beat("victim", attempt, node, "0"), token("victim", attempt, 8, 2));
            const auto missing = f.call("POST", "/v1/heartbeats", beat("nobody", attempt, node, "0"), token("nobody", attempt, 8, 2));
            CHECK(theirs.status >= 400);
            CHECK(theirs.status == missing.status);
            std::string m = missing.body;
            for (auto at = m.find("nobody"); at != std::string::npos; at = m.find("nobody")) m.replace(at, 6, "victim");
            CHECK(theirs.body == m);
        }
    // At attempt 1 a missing id is claimed; a taken one is refused, and the
    // refusal says no more than that.
    const auto r = f.call("POST", "/v1/heartbeats", beat("victim", 1, "m1", "0"), token("victim", 1, 8, 2));
    CHECK(r.status == 403);
    CHECK(r.body.find("run id victim is taken") != std::string::npos);
    CHECK(r.body.find("uid") == std::string::npos);
    CHECK(r.body.find("c1/7") == std::string::npos);
    CHECK(f.state("victim") == "RUNNING");
}

TEST_CASE("a fenced attempt's worker is answered stale_attempt, as before admission: its job is told, not asked about") {
    AdmissionFixture f;
    REQUIRE(f.call("POST", "/v1/heartbeats", beat("rj", 1, "n1", "0"), token("rj", 1, 7)).status == 204);
    // Slurm's own requeue of job 7: attempt 2 is the same job's.
    REQUIRE(f.call("POST", "/v1/heartbeats", beat("rj", 2, "n1", "0"), token("rj", 2, 7)).status == 204);
    const int asked = f.slurm->count("squeue");
    for (const std::string node : {"n2", "n3"}) {
        CAPTURE(node);
        const auto r = f.call("POST", "/v1/heartbeats", beat("rj", 1, node, "4"), token("rj", 1, 7));
        CHECK(r.status == 409);
        CHECK(r.body.find("stale_attempt") != std::string::npos);
    }
    CHECK(f.slurm->count("squeue") == asked);
}

TEST_CASE("a job of a cluster this broker does not run: its workers are capped at its token's step, one batch script") {
    AdmissionFixture f;
    // Cluster "elsewhere" is not in the config: no Slurm to ask.
    const std::string t = derive_worker_token(kKey, WorkerClaim{"re", 1, 2, 1, 9, "elsewhere"});
    CHECK(f.call("POST", "/v1/heartbeats", beat("re", 1, "x1", "0"), t).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", beat("re", 1, "x2", "0"), t).status == 204);
    auto r = f.call("POST", "/v1/heartbeats", beat("re", 1, "x3", "0"), t);
    CHECK(r.status == 409);
    CHECK(r.body.find("job elsewhere/9 has 2 tasks (its token's step: cluster elsewhere is not one this broker runs); 2 of its workers "
                      "already report") != std::string::npos);
    CHECK(f.call("POST", "/v1/heartbeats", beat("re", 1, "x1", "batch"), t).status == 204);
    r = f.call("POST", "/v1/heartbeats", beat("re", 1, "x2", "batch"), t);
    CHECK(r.status == 409);
    CHECK(r.body.find("job elsewhere/9 has one batch script (its token's step") != std::string::npos);
    // Whatever names it makes up, the table does not grow.
    int taken = 0;
    for (int i = 0; i < 203; ++i) taken += f.call("POST", "/v1/heartbeats", beat("re", 1, "y" + std::to_string(i), "0"), t).status == 204;
    CHECK(taken == 0);
    CHECK(f.workers("re") == 3);
    // A one-task helper step of a job whose step 0 has 4 tasks: counted
    // against the 4 its job's tokens named, not its own 1.
    const std::string wide = derive_worker_token(kKey, WorkerClaim{"rw", 1, 4, 1, 10, "elsewhere"});
    const std::string helper = derive_worker_token(kKey, WorkerClaim{"rw", 1, 1, 1, 10, "elsewhere"});
    CHECK(f.call("POST", "/v1/heartbeats", beat("rw", 1, "x1", "0"), wide).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", beat("rw", 1, "x2", "0"), wide).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", beat("rw", 1, "x1", "1"), helper).status == 204);
    CHECK(f.call("POST", "/v1/heartbeats", beat("rw", 1, "x3", "0"), wide).status == 204);
    r = f.call("POST", "/v1/heartbeats", beat("rw", 1, "x4", "0"), wide);
    CHECK(r.status == 409);
    CHECK(r.body.find("job elsewhere/10 has 4 tasks") != std::string::npos);
}
