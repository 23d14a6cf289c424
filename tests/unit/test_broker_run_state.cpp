#include <doctest/doctest.h>
#include <set>
#include <string>
#include <utility>

#include "broker/runs/run_state.hpp"

using namespace shardnet::broker;
using S = RunState;

TEST_CASE("the run lifecycle: every transition of the table, and no other") {
    // The table of run_state.hpp, written out once more by hand.
    const std::set<std::pair<int, S>> allowed = {
        {-1, S::pending}, {-1, S::running}, {-1, S::recovering},
        {int(S::pending), S::running}, {int(S::pending), S::cancelled},
        {int(S::running), S::running}, {int(S::running), S::degraded}, {int(S::running), S::succeeded},
        {int(S::running), S::failed}, {int(S::running), S::cancelled},
        {int(S::degraded), S::degraded}, {int(S::degraded), S::recovering}, {int(S::degraded), S::running},
        {int(S::degraded), S::succeeded}, {int(S::degraded), S::failed}, {int(S::degraded), S::cancelled},
        {int(S::recovering), S::running}, {int(S::recovering), S::degraded}, {int(S::recovering), S::moved},
        {int(S::recovering), S::cancelled},
        {int(S::moved), S::recovering}, {int(S::moved), S::cancelled},
    };
    int checked = 0;
    for (int from = -1; from < kRunStates; ++from)
        for (int to = 0; to < kRunStates; ++to) {
            const std::optional<S> f = from < 0 ? std::nullopt : std::optional<S>(S(from));
            CAPTURE(from);
            CAPTURE(state_name(S(to)));
            CHECK(transition_allowed(f, S(to)) == (allowed.count({from, S(to)}) == 1));
            ++checked;
        }
    CHECK(checked == (kRunStates + 1) * kRunStates);
}

TEST_CASE("run states: names both ways; the final ones") {
    for (int i = 0; i < kRunStates; ++i) CHECK(state_from_name(state_name(S(i))) == S(i));
    CHECK_FALSE(state_from_name("running"));
    CHECK_FALSE(state_from_name(""));
    CHECK(std::string(state_name(S::moved)) == "MOVED");
    for (S s : {S::succeeded, S::failed, S::cancelled}) CHECK(is_final(s));
    for (S s : {S::pending, S::running, S::degraded, S::recovering, S::moved}) CHECK_FALSE(is_final(s));
}
