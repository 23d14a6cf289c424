#include <doctest/doctest.h>

#include <cmath>

#include "common/ckpt_model.hpp"
#include "common/ckpt_sim.hpp"

using namespace shardnet::ckpt;

TEST_CASE("Daly's and Young's intervals reproduce Daly's worked examples") {
    // Daly (2006): delta = 5 min, R = 10 min; M = 24 h, 6 h and 15 min.
    const double d = 5 * 60;
    CHECK(daly_interval(d, 24 * 3600) / 60 == doctest::Approx(116.7).epsilon(0.0005));
    CHECK(daly_interval(d, 6 * 3600) / 60 == doctest::Approx(56.7).epsilon(0.001));
    CHECK(daly_interval(d, 15 * 60) / 60 == doctest::Approx(9.14).epsilon(0.002));
    CHECK(young_interval(d, 24 * 3600) / 60 == doctest::Approx(120.0));
    CHECK(young_interval(d, 6 * 3600) / 60 == doctest::Approx(60.0));
    CHECK(young_interval(d, 15 * 60) / 60 == doctest::Approx(12.25).epsilon(0.001));
    // delta >= 2M: checkpoint every M.
    CHECK(daly_interval(3600, 1000) == 1000);
    CHECK(daly_interval(2000, 1000) == 1000);
}

TEST_CASE("the complete model: its numeric optimum is near Daly's interval, and waste grows away from it") {
    for (double m : {15 * 60.0, 6 * 3600.0, 24 * 3600.0, 7 * 86400.0}) {
        const double d = 300, r = 600;
        const double daly = daly_interval(d, m), best = numeric_optimum(d, m, r);
        CAPTURE(m);
        CHECK(std::fabs(daly - best) / best < 0.02);
        const double w = expected_waste(best, d, m, r);
        CHECK(w > 0);
        CHECK(w < 1);
        CHECK(expected_waste(best / 2, d, m, r) > w);
        CHECK(expected_waste(best * 2, d, m, r) > w);
        // The waste of Daly's interval is within a hair of the optimum's.
        CHECK(expected_waste(daly, d, m, r) <= w * 1.001 + 1e-12);
    }
    // The restart cost scales the wall time, not the best interval.
    CHECK(numeric_optimum(300, 3600, 0) == doctest::Approx(numeric_optimum(300, 3600, 1800)).epsilon(1e-6));
    // Wall time with no failures left: work + one write per interval.
    CHECK(expected_wall_time(600, 60, 1e12, 0, 6000) == doctest::Approx(6600).epsilon(1e-6));
}

TEST_CASE("durations as people write them") {
    CHECK(*parse_duration("90s") == 90);
    CHECK(*parse_duration("5m") == 300);
    CHECK(*parse_duration("5min") == 300);
    CHECK(*parse_duration("1.5h") == 5400);
    CHECK(*parse_duration("24h") == 86400);
    CHECK(*parse_duration("2d") == 172800);
    CHECK(*parse_duration("300") == 300);
    CHECK(*parse_duration("0") == 0);
    for (const char *bad : {"", "h", "-5m", "5 m", "5x", "5mm", "1.2.3s", ".", "1e3", "99999999999d", "5m junk"}) {
        CAPTURE(bad);
        CHECK_FALSE(parse_duration(bad).has_value());
    }
    CHECK(format_duration(41) == "41.0 s");
    CHECK(format_duration(9.1 * 60) == "9.10 min");
    CHECK(format_duration(6.1 * 3600) == "6.10 h");
    CHECK(format_duration(116.7 * 60) == "117 min");
    CHECK(format_duration(3 * 86400) == "3.00 d");
}

TEST_CASE("an interval in steps is bounded by the site") {
    Bounds b;
    b.min_seconds = 60, b.max_seconds = 3600, b.min_steps = 10;
    CHECK(interval_steps(600, 1.5, b) == 400);     // 600 s of 1.5 s steps
    CHECK(interval_steps(10, 1.0, b) == 60);       // never more often than 60 s
    CHECK(interval_steps(1e6, 1.0, b) == 3600);    // never less often than an hour
    CHECK(interval_steps(600, 120, b) == 10);      // but at least min_steps
    CHECK(interval_steps(600, 0, b) == 10);        // no step time yet
    CHECK(interval_steps(600, -1, b) == 10);
}

TEST_CASE("hysteresis: a new interval replaces the old one only when it differs enough") {
    Bounds b;
    b.hysteresis = 0.2;
    CHECK(should_change(std::nullopt, 500, b));
    CHECK_FALSE(should_change(500, 560, b));   // 12%: noise
    CHECK_FALSE(should_change(500, 420, b));   // 16%
    CHECK(should_change(500, 650, b));         // 30%
    CHECK(should_change(500, 350, b));
    CHECK(should_change(0, 350, b));
}

TEST_CASE("the simulator agrees with the model it checks") {
    // Exponential failures: the simulated waste of an interval is Daly's
    // complete model's expected waste, within the noise of 20000 failures.
    for (double m : {900.0, 21600.0}) {
        SimInputs in{300, m, 600, 1, 0, 7};
        const double tau = daly_interval(300, m);
        CAPTURE(m);
        CHECK(simulated_waste(in, tau) == doctest::Approx(expected_waste(tau, 300, m, 600)).epsilon(0.03));
        // The search finds an optimum no worse than Daly's interval.
        const SimOptimum best = simulated_optimum(in, tau);
        CHECK(best.waste <= simulated_waste(in, tau));
        CHECK(simulated_waste(in, tau) <= best.waste * 1.01);
    }
    // No failures at all: only the checkpoint writes are waste.
    SimInputs none{60, 1e15, 0, 1, 60000, 1};
    CHECK(simulated_waste(none, 600) == doctest::Approx(1 - 60000.0 / 66000).epsilon(1e-6));
    // Weibull with shape < 1 and the same mean (failures cluster just after
    // a restart, when little work is at stake): the best interval is
    // longer than Daly's, which then wastes a little more than it.
    SimInputs wb{300, 21600, 600, 0.5, 0, 7};
    const double tau = daly_interval(300, 21600);
    const SimOptimum wbest = simulated_optimum(wb, tau);
    CHECK(wbest.tau > 1.1 * tau);
    CHECK(simulated_waste(wb, tau) > wbest.waste * 1.005);
}
