#include <doctest/doctest.h>

#include "workers.hpp"

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

#include "slurm_view.hpp"

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
