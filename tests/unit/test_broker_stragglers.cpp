// Stragglers (broker/detector/straggler_watch.hpp): a node of a job step
// whose step rate stays under a fraction of its step's median for some
// windows is named, once while it stays slow; a healthy run, a checkpoint's
// pause, a stalled job, a batch script and a lone node are not.
#include <doctest/doctest.h>

#include <chrono>
#include <random>
#include <thread>

#include "broker/detector/straggler_watch.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet::broker;
using namespace shardnet::broker::testing;

namespace {

// When the samples below last advanced: the window's end they are seen at
// (set by each loop, as the broker's clock would be at a report).
double reported = 0;

WorkerState at(long long step, long long attempt = 1, double ckpt_time = 0) {
    WorkerState w;
    w.step_time = reported;
    w.attempt = attempt;
    w.ranks = 1;
    w.step = step;
    w.ckpt_time = ckpt_time;
    w.job = 7;
    w.cluster = "c1";
    return w;
}

std::vector<std::string> names(const std::vector<Straggler> &v) {
    std::vector<std::string> out;
    for (const auto &s : v) out.push_back(s.worker);
    return out;
}

}  // namespace

TEST_CASE("a node at a quarter of its step's pace is named after two windows, once, and again after it recovered and slowed") {
    StragglerWatch w({0.5, 60, 2});
    long long fast = 0, slow = 0;
    std::vector<std::vector<std::string>> said;
    // Windows 1-3 slow, 4 at pace, 5-6 slow again.
    const int slow_in[] = {1, 1, 1, 0, 1, 1};
    for (int k = 0; k <= 6; ++k) {
        reported = 1000 + 60.0 * k;
        w.see("r", "n1/0", at(fast));
        w.see("r", "n2/0", at(fast));
        w.see("r", "n3/0", at(slow));
        said.push_back(names(w.end(1000 + 60.0 * k)));
        fast += 240;                                   // 4 steps/s
        slow += k < 6 && slow_in[k] ? 60 : 240;        // 1 step/s while slow
    }
    CHECK(said[0].empty());   // the first look only samples
    CHECK(said[1].empty());   // one slow window: not yet
    CHECK(said[2] == std::vector<std::string>{"n3/0"});
    CHECK(said[3].empty());   // still slow: said once
    CHECK(said[4].empty());   // at pace again
    CHECK(said[5].empty());
    CHECK(said[6] == std::vector<std::string>{"n3/0"});
}

TEST_CASE("the named straggler says its rate, the median and its step's size") {
    StragglerWatch w({0.5, 10, 1});
    reported = 100;
    w.see("r", "a/0", at(0)), w.see("r", "b/0", at(0)), w.see("r", "c/0", at(0));
    w.end(100);
    reported = 110;
    w.see("r", "a/0", at(100)), w.see("r", "b/0", at(80)), w.see("r", "c/0", at(20));
    auto s = w.end(110);
    REQUIRE(s.size() == 1);
    CHECK(s[0].worker == "c/0");
    CHECK(s[0].rate == doctest::Approx(2.0));
    CHECK(s[0].median == doctest::Approx(8.0));
    CHECK(s[0].peers == 3);
    CHECK(s[0].job == 7);
    CHECK(s[0].cluster == "c1");
}

TEST_CASE("no straggler in a healthy run: 8 nodes with +-30% jitter for 200 windows") {
    StragglerWatch w({0.5, 60, 2});
    std::mt19937 rng(42);
    std::uniform_real_distribution<double> jitter(0.7, 1.3);
    std::vector<long long> step(8, 0);
    std::size_t named = 0;
    for (int k = 0; k < 200; ++k) {
        reported = 60.0 * k;
        for (int n = 0; n < 8; ++n) w.see("r", "n" + std::to_string(n) + "/0", at(step[n]));
        named += w.end(60.0 * k).size();
        for (auto &s : step) s += (long long)(600 * jitter(rng));
    }
    CHECK(named == 0);
}

TEST_CASE("a node whose heartbeat is slower than the window is judged at its own reports, at its own pace: not named") {
    StragglerWatch w({0.5, 10, 1});
    std::size_t named = 0;
    long long step = 0, late_step = 0;
    double late_time = 0;
    for (int k = 0; k < 20; ++k) {
        reported = 10.0 * k;
        w.see("r", "a/0", at(step)), w.see("r", "b/0", at(step));
        if (k % 3 == 0) late_step = step, late_time = reported;   // c reports every 30 s, at the same pace
        double keep = reported;
        reported = late_time;
        w.see("r", "c/0", at(late_step));
        reported = keep;
        named += w.end(10.0 * k).size();
        step += 40;
    }
    CHECK(named == 0);
}

TEST_CASE("a synchronous job (every node at the slowest one's pace) names nobody") {
    StragglerWatch w({0.5, 60, 1});
    std::size_t named = 0;
    for (int k = 0; k < 10; ++k) {
        reported = 60.0 * k;
        for (int n = 0; n < 4; ++n) w.see("r", "n" + std::to_string(n) + "/0", at(30 * k));
        named += w.end(60.0 * k).size();
    }
    CHECK(named == 0);
}

TEST_CASE("a window with a checkpoint written is not judged; a stalled step, a batch script, a lone node and other steps are not compared") {
    SUBCASE("checkpointing") {
        StragglerWatch w({0.5, 60, 1});
        reported = 0;
        w.see("r", "a/0", at(0)), w.see("r", "b/0", at(0));
        w.end(0);
        reported = 60;
        w.see("r", "a/0", at(240)), w.see("r", "b/0", at(10, 1, 30));   // b wrote a checkpoint at 30 s
        CHECK(w.end(60).empty());
        reported = 120;
        w.see("r", "a/0", at(480)), w.see("r", "b/0", at(20, 1, 30));   // the next window without one: slow
        CHECK(names(w.end(120)) == std::vector<std::string>{"b/0"});
    }
    SUBCASE("a stalled step is the stall deadline's business") {
        StragglerWatch w({0.5, 60, 1});
        reported = 0;   // a stalled step's time does not move
        for (int k = 0; k < 3; ++k) {
            w.see("r", "a/0", at(5)), w.see("r", "b/0", at(5)), w.see("r", "c/0", at(k == 0 ? 0 : 5));
            CHECK(w.end(60.0 * k).empty());
        }
    }
    SUBCASE("batch scripts, lone nodes, steps apart, runs apart, attempts apart") {
        StragglerWatch w({0.5, 60, 1});
        for (int k = 0; k < 3; ++k) {
            reported = 60.0 * k;
            w.see("r", "a/batch", at(0));         // a batch script's step stays put
            w.see("r", "a/0", at(600 * k));
            w.see("r", "b/1", at(10 * k));        // another step of the job: not compared with a/0
            w.see("q", "c/0", at(10 * k));        // another run
            w.see("r", "d/0", at(10 * k, 2));     // another attempt
            CHECK(w.end(60.0 * k).empty());
        }
        CHECK(w.tracked() == 5);
        w.see("r", "a/0", at(9999));
        w.end(500);
        CHECK(w.tracked() == 1);   // workers gone from the table are forgotten
    }
    SUBCASE("fraction 0 turns it off") {
        StragglerWatch w({0, 60, 1});
        for (int k = 0; k < 3; ++k) {
            reported = 60.0 * k;
            w.see("r", "a/0", at(600 * k)), w.see("r", "b/0", at(k));
            CHECK(w.end(60.0 * k).empty());
        }
        CHECK(w.tracked() == 0);
    }
}

TEST_CASE("the broker writes a STRAGGLER event naming the slow node of a running job, once; shard launch's swap of it is taken only then") {
    const std::string conf = "/fake/c1.conf";
    ServiceFixture f({{"c1", conf}});
    f.cfg.straggler_window_seconds = 1;   // real time: the detector's tick also judges silences
    f.cfg.straggler_windows = 2;
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        FakeSlurm::Job j;
        j.id = 7, j.nodes = "n1,n2,n3,n4", j.batch_host = "n1", j.node_count = j.tasks = 4;
        f.slurm->jobs[conf][7] = j;
        f.slurm->nodes[conf] = {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "ALLOCATED"}, {"n4", "ALLOCATED"}};
    }
    auto beat = [&](const std::string &node, long long step) {
        const std::string body = R"({"run":"r1","attempt":1,"node":")" + node + R"(","step":"0","cluster":"c1","job":7,)"
                                 R"("interval":1,"state":"running","ranks":[{"rank":0,"step":)" + std::to_string(step) + "}]}";
        return f.call("POST", "/v1/heartbeats", body).status;
    };
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    auto report = [&](const std::string &body) { return f.call("POST", "/v1/runs/r1/restarts", body).status; };
    REQUIRE(report(R"({"kind":"supervising","attempt":1,"spares":1,"nodes":["n1","n2","n3"]})") == 200);
    const std::string swap = R"({"kind":"swapped","attempt":1,"restart":1,"slow":["n3"],"took":["n4"],"nodes":["n1","n2","n4"],"spares":0,"ended_step":"0"})";
    CHECK(report(swap) == 409);   // no STRAGGLER yet: the job's word alone swaps nothing
    // ... and changes nothing: the step's workers are still watched (not retired as its ended step's).
    auto healthy = [&] {
        int n = 0;
        const boost::json::object run = f.run("r1");
        for (const auto &w : run.at("workers").as_array())
            n += w.at("health").as_string() != "ended" && w.at("health").as_string() != "faulted";
        return n;
    };

    for (int k = 0; k <= 3; ++k) {
        REQUIRE(beat("n1", 1 + 400 * k) == 204);
        REQUIRE(beat("n2", 1 + 400 * k) == 204);
        REQUIRE(beat("n3", 1 + 40 * k) == 204);
        f.svc->tick(wall_now());
        std::this_thread::sleep_for(std::chrono::milliseconds(1050));
    }
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("STRAGGLER") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    CHECK(ev.find("STRAGGLER: node n3 ran ") != std::string::npos);
    CHECK(ev.find(" steps/s for 2 window(s) of 1 s, under 0.50 x the median ") != std::string::npos);
    CHECK(ev.find(" steps/s of its step's 3 nodes") != std::string::npos);
    CHECK(ev.find("node n1 ran") == std::string::npos);
    CHECK(ev.find("STRAGGLER") == ev.rfind("STRAGGLER"));   // once
    CHECK(f.state("r1") == "RUNNING");                      // a straggler is no FAULT
    const int watched = healthy();
    CHECK(watched == 4);   // the batch script and n1/0, n2/0, n3/0
    CHECK(report(R"({"kind":"swapped","attempt":1,"restart":1,"slow":["n2"],"took":["n4"],"nodes":["n1","n3","n4"],"ended_step":"0"})") == 409);   // not the one named
    CHECK(healthy() == watched);   // a refused swap retires nothing
    CHECK(report(R"({"kind":"swapped","attempt":1,"restart":1,"slow":["n3"],"dead":["n3"],"took":["n4"],"nodes":["n1","n2","n4"]})") == 400);
    REQUIRE(report(swap) == 200);
    CHECK(report(swap) == 200);   // sent again: taken once
    // One STRAGGLER pays for one swap: n3 is no longer in the step.
    CHECK(report(R"({"kind":"swapped","attempt":1,"restart":2,"slow":["n3"],"took":["n4"],"nodes":["n1","n2","n4"]})") == 409);
    const std::string after = f.events("r1");
    INFO(after);
    CHECK(after.find("RESTARTED: in-job restart 1: straggler node n3 swapped out at a sealed checkpoint, n4 took its place") != std::string::npos);
    CHECK(after.find("RESTARTED") == after.rfind("RESTARTED"));
    CHECK(f.state("r1") == "RUNNING");
    // The ended step's workers (n1/0, n2/0, n3/0) are done: their silence is no FAULT.
    // (Two deadlines pass: a silent worker whose slurmd answers is a FAULT at the second.)
    for (double ahead : {30.0, 60.0, 90.0}) {
        f.tick_ahead(ahead);
    }
    const std::string late = f.events("r1");
    INFO(late);
    for (const char *w : {"worker n1/0", "worker n2/0", "worker n3/0"}) CHECK(late.find(w) == std::string::npos);
}
