#include <doctest/doctest.h>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>
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

namespace {

// A table cell's states: "(new)" is -1, "any but the final ones" every
// state not final, else names separated by commas.
std::vector<int> cell_states(std::string cell) {
    std::vector<int> out;
    while (!cell.empty() && cell.front() == ' ') cell.erase(0, 1);
    while (!cell.empty() && cell.back() == ' ') cell.pop_back();
    if (cell == "(new)") return {-1};
    if (cell == "any but the final ones") {
        for (int i = 0; i < kRunStates; ++i)
            if (!is_final(S(i))) out.push_back(i);
        return out;
    }
    std::istringstream is(cell);
    for (std::string name; std::getline(is, name, ',');) {
        while (!name.empty() && name.front() == ' ') name.erase(0, 1);
        const auto st = state_from_name(name);
        REQUIRE_MESSAGE(st, "doc/run-lifecycle.md names no state '" << name << "'");
        out.push_back(int(*st));
    }
    return out;
}

}  // namespace

TEST_CASE("doc/run-lifecycle.md's table is the lifecycle's: each row a transition of run_state.hpp, each transition a row") {
    std::ifstream in(LIFECYCLE_DOC);
    REQUIRE(in);
    std::set<std::pair<int, int>> doc;
    bool in_table = false;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("| from | to |", 0) == 0) { in_table = true; continue; }
        if (!in_table || line.rfind("|---", 0) == 0) continue;
        if (line.rfind("| ", 0) != 0) break;   // the table's end
        std::vector<std::string> cells;
        std::istringstream is(line.substr(1));
        for (std::string c; std::getline(is, c, '|');) cells.push_back(c);
        REQUIRE(cells.size() >= 2);
        for (int from : cell_states(cells[0]))
            for (int to : cell_states(cells[1])) {
                CAPTURE(line);
                REQUIRE(to >= 0);
                const std::optional<S> f = from < 0 ? std::nullopt : std::optional<S>(S(from));
                CHECK_MESSAGE(transition_allowed(f, S(to)), "the doc lists a transition the table lacks");
                doc.insert({from, to});
            }
    }
    REQUIRE(in_table);
    for (int from = -1; from < kRunStates; ++from)
        for (int to = 0; to < kRunStates; ++to) {
            const std::optional<S> f = from < 0 ? std::nullopt : std::optional<S>(S(from));
            if (!transition_allowed(f, S(to))) continue;
            CAPTURE(from < 0 ? "(new)" : state_name(S(from)));
            CAPTURE(state_name(S(to)));
            CHECK_MESSAGE(doc.count({from, to}) == 1, "the table has a transition doc/run-lifecycle.md does not list");
        }
}

TEST_CASE("run states: names both ways; the final ones") {
    for (int i = 0; i < kRunStates; ++i) CHECK(state_from_name(state_name(S(i))) == S(i));
    CHECK_FALSE(state_from_name("running"));
    CHECK_FALSE(state_from_name(""));
    CHECK(std::string(state_name(S::moved)) == "MOVED");
    for (S s : {S::succeeded, S::failed, S::cancelled}) CHECK(is_final(s));
    for (S s : {S::pending, S::running, S::degraded, S::recovering, S::moved}) CHECK_FALSE(is_final(s));
}
