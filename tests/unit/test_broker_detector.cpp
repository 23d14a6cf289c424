#include <doctest/doctest.h>

#include "broker/workers/workers.hpp"

using namespace shardnet::broker;

TEST_CASE("a worker that stops heartbeating faults after interval x misses, once") {
    WorkerTable t(3, 1000);
    t.beat("r", "n1", 1, 1, 2, 5, false, 100.0);
    t.beat("r", "n2", 1, 1, 2, 5, false, 100.0);
    CHECK(t.expire(102.5).empty());
    t.beat("r", "n2", 1, 1, 2, 6, false, 102.5);  // n2 keeps going
    auto f = t.expire(103.5);
    REQUIRE(f.size() == 1);
    CHECK(f[0].node == "n1");
    CHECK(f[0].cause == "missed heartbeats");
    CHECK(f[0].state.step == 5);
    CHECK(t.expire(200).size() == 1);  // n2 stopped too, later; n1 not again
}

TEST_CASE("a worker retired after a silence that was no failure is watched again when its job runs again (Slurm's own requeue)") {
    WorkerTable t(3, 600);
    t.beat("r", "n1/0", 1, 1, 1, 5, false, 100.0);
    REQUIRE(t.expire(104).size() == 1);   // silent: faulted, and asked of Slurm
    t.retire("r", "n1/0");                // Slurm: the job is ending (no failure); kept faulted
    CHECK(t.expire(200).empty());
    t.beat("r", "n1/0", 1, 1, 1, 1, false, 300.0);   // Slurm started it again: the same attempt, step 0 again
    CHECK(t.expire(302).empty());
    auto f = t.expire(304.5);   // watched again: its next silence is a fault
    REQUIRE(f.size() == 1);
    CHECK(f[0].node == "n1/0");
}

TEST_CASE("a worker whose step stops advancing faults as stalled") {
    WorkerTable t(3, 10);
    for (int s = 0; s < 30; ++s) t.beat("r", "n1", 1, 1, 1, 7, false, 100.0 + s);  // alive, step stuck at 7
    auto f = t.expire(130);
    REQUIRE(f.size() == 1);
    CHECK(f[0].cause == "progress stalled");
}

TEST_CASE("writing a checkpoint pauses the stall deadline") {
    WorkerTable t(3, 10);
    for (int s = 0; s < 30; ++s) t.beat("r", "n1", 1, 1, 1, 7, false, 100.0 + s, "", 0, s >= 5);  // checkpointing from 105
    CHECK(t.expire(130).empty());
}

TEST_CASE("ended workers and older attempts never fault") {
    WorkerTable t(3, 10);
    t.beat("r", "n1", 1, 1, 1, 1, false, 100.0);
    t.beat("r", "n1", 1, 1, 1, 1, true, 101.0);
    t.beat("r", "n2", 1, 1, 1, 1, false, 100.0);
    t.fence("r", 2);
    CHECK(t.expire(1000).empty());
    CHECK(t.size() == 0);  // both were attempt 1: fenced away
}

TEST_CASE("a heartbeat never refiles; a due slot refiles live workers once") {
    WorkerTable t(3, 100000);
    for (int i = 0; i < 10000; ++i) t.beat("r", "n" + std::to_string(i), 1, 10, 1, 1, false, 100.0);
    for (int s = 1; s <= 25; ++s)  // half the workers keep beating for 25 s
        for (int i = 0; i < 5000; ++i) t.beat("r", "n" + std::to_string(i), 1, 10, 1, 1 + s, false, 100.0 + s);
    CHECK(t.expire(129).empty());
    CHECK(t.expire(131).size() == 5000);   // the silent half
    CHECK(t.expire(150).empty());          // the beating half was refiled at 155
    CHECK(t.expire(156).size() == 5000);
    CHECK(t.size() == 10000);
}

#include "broker/slurm/slurm_view.hpp"

TEST_CASE("reading Slurm's own answers") {
    const std::string job = "JobId=12 JobName=wrap UserId=u(1) JobState=RUNNING Reason=None NodeList=beta[1-2]";
    CHECK(scontrol_field(job, "JobState") == "RUNNING");
    CHECK(scontrol_field(job, "NodeList") == "beta[1-2]");
    CHECK(scontrol_field(job, "State") == "");  // not a suffix match of JobState
    CHECK(scontrol_field("NodeName=b1 State=IDLE+NOT_RESPONDING Port=6818", "Port") == "6818");
    CHECK(node_state_bad("DOWN*"));
    CHECK(node_state_bad("ALLOCATED+NOT_RESPONDING"));
    CHECK(node_state_bad("MIXED+DRAIN"));
    CHECK_FALSE(node_state_bad("ALLOCATED"));
    CHECK(job_state_running("RUNNING"));
    CHECK_FALSE(job_state_running("COMPLETED"));
}

TEST_CASE("a suspected worker is looked at again later, and a heartbeat clears it") {
    WorkerTable t(3, 1000);
    t.beat("r", "n1", 1, 1, 1, 5, false, 100.0, "beta", 7);
    auto f = t.expire(104);
    REQUIRE(f.size() == 1);
    CHECK(f[0].state.job == 7);
    CHECK(f[0].state.cluster == "beta");
    t.suspect("r", "n1", 107);
    CHECK(t.expire(106).empty());
    f = t.expire(108);
    REQUIRE(f.size() == 1);
    CHECK(f[0].state.suspected);
    t.beat("r", "n2", 1, 1, 1, 5, false, 200.0);
    t.expire(204);
    t.suspect("r", "n2", 207);
    t.beat("r", "n2", 1, 1, 1, 6, false, 205.0);  // it speaks again
    CHECK(t.expire(207.5).empty());
}

TEST_CASE("a watched allocation node comes due at its deadline, is held while Slurm says it is up, and goes with its first worker") {
    WorkerTable t(3, 1000);
    CHECK(t.beat("r", "a1/batch", 1, 1, 1, std::nullopt, false, 100.0, "alpha", 7));   // new worker
    CHECK_FALSE(t.beat("r", "a1/batch", 1, 1, 1, std::nullopt, false, 100.5, "alpha", 7));
    t.watch("r", "a2/alloc", 1, 1, 100.0, "alpha", 7);
    t.watch("r", "a3/alloc", 1, 1, 100.0, "alpha", 7);
    t.watch("r", "a1/batch", 1, 1, 100.0, "alpha", 7);  // a known key is left alone
    for (double now = 100.0; now < 103; now += 0.5) t.beat("r", "a1/batch", 1, 1, 1, std::nullopt, false, now, "alpha", 7);
    CHECK(t.expire(102.9).empty());
    auto f = t.expire(103.0);
    REQUIRE(f.size() == 2);
    for (const auto &x : f) {
        CHECK(x.state.watch_only);
        CHECK(x.cause == "has no worker yet");
        CHECK(x.state.job == 7);
        CHECK(x.state.cluster == "alpha");
    }
    // Slurm said both are up: held for another deadline. a2's step worker
    // then reports, which retires its watch; a3 comes due again.
    t.suspect("r", "a2/alloc", 106.0);
    t.suspect("r", "a3/alloc", 106.0);
    t.beat("r", "a2/0", 1, 1, 1, 1, false, 104.0, "alpha", 7);
    t.unwatch("r", "a2/alloc", 1);
    for (double now = 103; now < 107; now += 0.5) {
        t.beat("r", "a1/batch", 1, 1, 1, std::nullopt, false, now, "alpha", 7);
        t.beat("r", "a2/0", 1, 1, 1, 1, false, now, "alpha", 7);
    }
    f = t.expire(106.5);
    REQUIRE(f.size() == 1);
    CHECK(f[0].node == "a3/alloc");
    // Watches are not workers: a run's listing leaves them out.
    for (const auto &[key, w] : t.of_run("r")) CHECK(key.find("/alloc") == std::string::npos);
    CHECK(t.of_run("r").size() == 2);
}

TEST_CASE("a worker that reports before the broker looks at the allocation keeps its node from being watched") {
    WorkerTable t(3, 1000);
    t.beat("r", "a2/0", 1, 1, 1, 1, false, 100.0, "alpha", 7);
    t.unwatch("r", "a2/alloc", 1);
    t.watch("r", "a2/alloc", 1, 1, 100.5, "alpha", 7);  // too late: a2 has its worker
    t.beat("r", "a2/0", 1, 1, 1, 2, true, 101.0, "alpha", 7);  // the step ends
    CHECK(t.expire(200).empty());
    t.watch("r", "a2/alloc", 2, 1, 201.0, "alpha", 8);  // attempt 2 watches it afresh
    auto f = t.expire(204.0);
    REQUIRE(f.size() == 1);
    CHECK(f[0].attempt == 2);
}
