// Goodput (broker/goodput/, doc/goodput.md): a run's wall time split into
// productive, unsealed and lost time per fault, checked by value.
#include <doctest/doctest.h>
#include <boost/json.hpp>
#include <cmath>
#include <random>

#include "broker/util/lru_map.hpp"
#include "broker/goodput/goodput.hpp"
#include "broker/goodput/goodput_json.hpp"

using namespace shardnet::broker::goodput;
namespace json = boost::json;

namespace {

Mark ev(const std::string &kind, double t, long long attempt = 0) { return Mark{kind, t, attempt, 0, {}, {}}; }
Mark seal(double t, long long attempt, const std::string &name) { return Mark{"SEAL", t, attempt, 0, {}, name}; }
Mark fault(double t, long long attempt, double last_seen, const std::string &node) {
    return Mark{"FAULT", t, attempt, last_seen, node, "worker " + node + " missed 3 heartbeats"};
}

// A run with two faults, each recovered by a new attempt, running at 1700.
std::vector<Mark> two_faults() {
    return {ev("PENDING", 1000),     ev("RUNNING", 1010, 1),  ev("PROGRESS", 1030, 1), seal(1100, 1, "ck-1"), seal(1200, 1, "ck-2"),
            fault(1250, 1, 1235, "n1/batch"), fault(1250, 1, 1240, "n1"), ev("RECOVERING", 1260, 2), ev("ATTEMPT", 1300, 2), ev("PROGRESS", 1320, 2),
            ev("RECOVERED", 1330, 2), seal(1400, 2, "ck-3"), fault(1500, 2, 1490, "n2"), fault(1505, 2, 1491, "n3"),
            ev("RECOVERING", 1520, 3), ev("ATTEMPT", 1600, 3), ev("PROGRESS", 1650, 3), ev("PROGRESS", 1660, 3)};
}

void adds_up(const Goodput &g) {
    CHECK(std::fabs(g.productive + g.unsealed + g.lost() - g.wall) < 1e-9);
    CHECK(g.productive >= 0);
    CHECK(g.unsealed >= 0);
    for (const auto &f : g.faults) {
        CHECK(f.total() >= 0);
        for (double part : {f.redone, f.detection, f.placement, f.queue_wait, f.restart}) CHECK(part >= -1e-9);
    }
}

}  // namespace

TEST_CASE("goodput: a running run with two faults adds up, each category by value") {
    const Goodput g = compute(two_faults(), 1700);
    CHECK(g.start == 1000);
    CHECK(g.end == 1700);
    CHECK_FALSE(g.ended);
    CHECK(g.wall == 700);
    CHECK(g.startup == 30);         // submit 1000 -> first step 1030
    CHECK(g.productive == 250);     // 1030 -> ck-2 at 1200, 1320 -> ck-3 at 1400
    CHECK(g.unsealed == 50);        // attempt 3 stepping since 1650, nothing sealed yet
    CHECK(g.not_kept == 0);
    CHECK(g.unattributed == 0);
    REQUIRE(g.faults.size() == 2);  // n3's FAULT is the same interruption as n2's
    const FaultCost &a = g.faults[0], &b = g.faults[1];
    CHECK(a.attempt == 1);
    CHECK(a.node == "n1/batch");    // the first FAULT names the fault; its rank, heard until 1240, dates the failure
    CHECK(a.failed_at == 1240);
    CHECK(a.fault_at == 1250);
    CHECK(a.resumed_from == std::optional<std::string>("ck-2"));
    CHECK(a.next_attempt == 2);
    CHECK(a.recovered_at == 1320);
    CHECK_FALSE(a.in_job);
    CHECK(a.redone == 40);          // ck-2 at 1200 -> the last heartbeat at 1240
    CHECK(a.detection == 10);
    CHECK(a.placement == 10);       // FAULT -> RECOVERING (attempt 2 submitted)
    CHECK(a.queue_wait == 40);      // submitted -> its first heartbeat
    CHECK(a.restart == 20);         // first heartbeat -> first step
    CHECK(b.node == "n2");
    CHECK(b.resumed_from == std::optional<std::string>("ck-3"));
    CHECK(b.redone == 91);          // n3 was heard until 1491: the failure is then
    CHECK(b.detection == 9);
    CHECK(b.placement == 20);
    CHECK(b.queue_wait == 80);
    CHECK(b.restart == 50);
    CHECK(b.next_attempt == 3);
    CHECK(g.lost() == 30 + 120 + 250);
    CHECK(g.ratio() == doctest::Approx(250.0 / 700));
    adds_up(g);
}

TEST_CASE("goodput: a SUCCEEDED run keeps what followed its last seal") {
    auto marks = two_faults();
    marks.push_back(ev("SUCCEEDED", 1700, 3));
    const Goodput g = compute(marks, 5000);   // the end is the run's, not now
    CHECK(g.ended);
    CHECK(g.wall == 700);
    CHECK(g.productive == 300);
    CHECK(g.unsealed == 0);
    CHECK(g.faults.size() == 2);
    adds_up(g);
}

TEST_CASE("goodput: a run with no seal redoes everything its failed attempt did") {
    const std::vector<Mark> marks{ev("RUNNING", 10, 1), ev("PROGRESS", 20, 1), fault(100, 1, 95, "b1"), ev("RECOVERING", 105, 2),
                                  ev("ATTEMPT", 130, 2), ev("FAILED", 200, 2)};
    const Goodput g = compute(marks, 999);
    CHECK(g.start == 10);           // no PENDING: the first heartbeat starts it
    CHECK(g.wall == 190);
    CHECK(g.productive == 0);
    CHECK(g.ratio() == 0);
    CHECK(g.startup == 10);
    REQUIRE(g.faults.size() == 1);
    CHECK_FALSE(g.faults[0].resumed_from);
    CHECK(g.faults[0].redone == 75);      // its first step at 20 -> the failure at 95
    CHECK(g.faults[0].detection == 5);
    CHECK(g.faults[0].placement == 5);
    CHECK(g.faults[0].queue_wait == 25);
    CHECK(g.faults[0].restart == 0);      // no first step of attempt 2 seen: training from its heartbeat
    CHECK(g.not_kept == 70);              // attempt 2 from 130 to FAILED at 200, nothing sealed
    adds_up(g);
}

TEST_CASE("goodput: an in-job restart is a fault of the same attempt, restart up to the relaunched step's first step") {
    const std::vector<Mark> marks{ev("RUNNING", 0, 1), ev("PROGRESS", 5, 1), seal(50, 1, "ck-1"), fault(60, 1, 58, "n2"),
                                  ev("RESTARTED", 70, 1), ev("PROGRESS", 80, 1)};
    const Goodput g = compute(marks, 100);
    REQUIRE(g.faults.size() == 1);
    CHECK(g.faults[0].in_job);
    CHECK(g.faults[0].next_attempt == 0);
    CHECK(g.faults[0].redone == 8);
    CHECK(g.faults[0].detection == 2);
    CHECK(g.faults[0].placement == 0);
    CHECK(g.faults[0].queue_wait == 0);
    CHECK(g.faults[0].restart == 20);     // FAULT 60 -> relaunch 70 -> first step 80
    CHECK(g.productive == 45);
    CHECK(g.unsealed == 20);
    adds_up(g);
}

TEST_CASE("goodput: a run still waiting for its next attempt counts the wait so far") {
    const std::vector<Mark> marks{ev("RUNNING", 0, 1), seal(30, 1, "ck-1"), fault(40, 1, 35, "n1"), ev("RECOVERING", 45, 2)};
    const Goodput g = compute(marks, 100);
    REQUIRE(g.faults.size() == 1);
    CHECK(g.productive == 30);            // no first step seen: training from the heartbeat
    CHECK(g.faults[0].queue_wait == 55);
    CHECK(g.faults[0].recovered_at == 0);
    adds_up(g);
    const Goodput none = compute({ev("POLICY", 5)}, 100);   // nothing submitted yet
    CHECK(none.wall == 0);
    CHECK(none.faults.empty());
    const json::object o = to_json(none);
    CHECK(o.at("start").is_null());
    CHECK(o.at("as_of").as_double() == 100);
}

TEST_CASE("goodput: marks in any order, at any times, still partition the wall time") {
    std::mt19937 rng(31);
    for (int round = 0; round < 200; ++round) {
        auto marks = two_faults();
        std::uniform_real_distribution<double> at(900, 1800);
        for (auto &m : marks) m.time = at(rng), m.failed_at = m.failed_at > 0 ? at(rng) : 0;
        if (round % 3 == 0) marks.push_back(ev(round % 2 ? "SUCCEEDED" : "CANCELLED", at(rng), 3));
        const Goodput g = compute(marks, 1800);
        CHECK(g.wall >= 0);
        adds_up(g);
    }
}

TEST_CASE("goodput: events read as marks, and the JSON adds up") {
    auto f = mark_of_event("FAULT", 1250, "worker n1/0 missed 3 heartbeats",
                           R"({"node":"n1/0","attempt":1,"last_seen":1240.5,"interval":1,"node_failure":true})");
    REQUIRE(f);
    CHECK(f->kind == "FAULT");
    CHECK(f->attempt == 1);
    CHECK(f->node == "n1/0");
    CHECK(f->failed_at == 1240.5);
    auto r = mark_of_event("RECOVERING", 1260, "attempt 2 submitted with --shardnet-resume=latest", R"({"decision":"alpha:r/attempt-2"})");
    REQUIRE(r);
    CHECK(r->attempt == 2);
    auto r2 = mark_of_event("RECOVERING", 1260, "attempt 7 runs as job 12 on beta, submitted before the broker stopped", "{}");
    REQUIRE(r2);
    CHECK(r2->attempt == 7);
    auto s = mark_of_event("SEALED", 1100, "ck-1 committed by all 2 ranks", R"({"checkpoint":"ck-1","attempt":1,"ranks":2,"parent":null})");
    REQUIRE(s);
    CHECK(s->kind == "SEAL");
    CHECK(s->cause == "ck-1");
    CHECK_FALSE(mark_of_event("POLICY", 1, "x", "{}"));
    CHECK(mark_of_event("RUNNING", 1, "first heartbeat", "not json")->attempt == 0);

    const json::object o = to_json(compute(two_faults(), 1700));
    const auto &lost = o.at("lost").as_object();
    CHECK(o.at("wall").as_double() == 700);
    CHECK(o.at("end").is_null());
    CHECK(lost.at("queue_wait").as_double() == 120);
    CHECK(lost.at("redone").as_double() == 131);
    CHECK(std::fabs(o.at("productive").as_double() + o.at("unsealed").as_double() + lost.at("total").as_double() - o.at("wall").as_double()) < 1e-9);
    CHECK(o.at("faults").as_array().size() == 2);
    CHECK(o.at("faults").as_array()[0].as_object().at("node").as_string() == "n1/batch");
}

TEST_CASE("goodput: a straggler's swap is no fault's relaunch") {
    CHECK_FALSE(mark_of_event("RESTARTED", 10, "in-job restart 1: straggler node n3 swapped out", R"({"attempt":1,"straggler":"n3","took":["n4"]})"));
    CHECK(mark_of_event("RESTARTED", 10, "in-job restart 1: node n3 left out", R"({"attempt":1,"dead":["n3"],"took":["n4"]})"));
}

TEST_CASE("goodput: a worker last heard before the last seal never makes detection negative") {
    // The batch agent is last heard at 90, the ranks seal at 100 and are last
    // heard at 105; the FAULTs come at 110 and 112.
    const Goodput g = compute({ev("RUNNING", 0, 1), ev("PROGRESS", 10, 1), seal(100, 1, "ck-1"), fault(110, 1, 90, "n1/batch"),
                               fault(112, 1, 105, "n1/0")},
                              200);
    adds_up(g);
    REQUIRE(g.faults.size() == 1);
    CHECK(g.faults[0].redone == doctest::Approx(5));      // 100 -> 105
    CHECK(g.faults[0].detection == doctest::Approx(5));   // 105 -> 110
    CHECK(g.productive == doctest::Approx(90));
}

TEST_CASE("goodput: the marks kept between reads (first and last of a run of seals) give the same figures as every event") {
    // Three attempts, hundreds of seals each, faults and in-job restarts
    // between; events in time order, as the store's ids are.
    std::vector<Mark> all{ev("PENDING", 1000), ev("RUNNING", 1010, 1), ev("PROGRESS", 1030, 1)};
    double t = 1030;
    for (long long a = 1; a <= 3; ++a) {
        for (int k = 0; k < 300; ++k) all.push_back(seal(t += 7, a, "ck-" + std::to_string(a) + "-" + std::to_string(k)));
        all.push_back(fault(t + 20, a, t + 15, "n" + std::to_string(a)));
        if (a == 2) {
            all.push_back(ev("RESTARTED", t += 25, a));
            for (int k = 0; k < 50; ++k) all.push_back(seal(t += 5, a, "ck-r-" + std::to_string(k)));
            all.push_back(fault(t + 20, a, t + 15, "m2"));
        }
        all.push_back(ev("RECOVERING", t + 30, a + 1));
        all.push_back(ev("ATTEMPT", t + 60, a + 1));
        t += 60;
    }
    MarkLog log;
    long long id = 0;
    for (const auto &m : all) log.add(++id, m);
    CHECK(log.last_id == id);
    CHECK(log.marks.size() < 40);   // not 1,000 seals
    // The workers' first steps come in at compute time, beside the kept marks.
    std::vector<Mark> progress{ev("PROGRESS", 2000, 1), ev("PROGRESS", t - 30, 4)};
    auto full = all, kept = log.marks;
    full.insert(full.end(), progress.begin(), progress.end());
    kept.insert(kept.end(), progress.begin(), progress.end());
    const Goodput a = compute(full, t + 500), b = compute(kept, t + 500);
    adds_up(b);
    CHECK(a.productive == doctest::Approx(b.productive));
    CHECK(a.unsealed == doctest::Approx(b.unsealed));
    CHECK(a.lost() == doctest::Approx(b.lost()));
    REQUIRE(a.faults.size() == b.faults.size());
    for (std::size_t i = 0; i < a.faults.size(); ++i) {
        CHECK(a.faults[i].resumed_from == b.faults[i].resumed_from);
        CHECK(a.faults[i].redone == doctest::Approx(b.faults[i].redone));
        CHECK(a.faults[i].restart == doctest::Approx(b.faults[i].restart));
    }
}

TEST_CASE("the goodput marks cache drops the run read longest ago, not any run") {
    shardnet::broker::LruMap<int> m(3);
    m.touch("a") = 1;
    m.touch("b") = 2;
    m.touch("c") = 3;
    CHECK(m.touch("a") == 1);   // a read again: b is now the oldest
    m.touch("d") = 4;
    CHECK(m.size() == 3);
    CHECK_FALSE(m.contains("b"));
    CHECK(m.contains("a"));
    CHECK(m.contains("c"));
    m.touch("e");                // c is now the oldest
    CHECK_FALSE(m.contains("c"));
    CHECK(m.touch("a") == 1);
    CHECK(m.touch("d") == 4);
    CHECK(m.touch("e") == 0);    // made, default
}
