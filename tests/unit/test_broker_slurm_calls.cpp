// SlurmCalls with real commands standing in for scontrol: what matters here
// is which calls reach a process at all.
#include <chrono>
#include <doctest/doctest.h>

#include "slurm_calls.hpp"

using namespace shardnet::broker;

TEST_CASE("Slurm queries are reused within cache_ms; changes are not and drop the cache") {
    SlurmCalls calls(60000, 1000);
    std::string a, b, c, d;
    REQUIRE(calls.query("/conf/a", {"date", "+%s%N"}, a) == 0);
    REQUIRE(calls.query("/conf/a", {"date", "+%s%N"}, b) == 0);
    CHECK(a == b);
    CHECK(calls.calls() == 1);
    CHECK(calls.cache_hits() == 1);
    REQUIRE(calls.query("/conf/b", {"date", "+%s%N"}, c) == 0);  // another cluster: its own answer
    CHECK(calls.calls() == 2);
    std::string ignored;
    REQUIRE(calls.change("/conf/a", {"true"}, ignored) == 0);
    REQUIRE(calls.query("/conf/a", {"date", "+%s%N"}, d) == 0);
    CHECK(d != a);
    CHECK(calls.calls() == 4);
    CHECK(calls.query("/conf/a", {"false"}, ignored) == 1);  // exit status kept
}

TEST_CASE("calls to one cluster are throttled to max_per_second") {
    SlurmCalls calls(0, 3);
    std::string out;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i) REQUIRE(calls.change("/conf/a", {"true"}, out) == 0);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(took >= 0.9);  // the fourth waited for the first to leave the one-second window
    CHECK(calls.calls() == 4);
}
