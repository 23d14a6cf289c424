// shard launch's decisions (sbatch-wrappers/launch_plan.hpp).
#include <boost/json.hpp>
#include <doctest/doctest.h>

#include "sbatch-wrappers/launch_plan.hpp"

using namespace shardnet::cli;
namespace json = boost::json;

TEST_CASE("the batch host is the spare while another node can run ranks") {
    auto p = place({"a1", "a2", "a3"}, "a1", 2, {});
    REQUIRE(p);
    CHECK(p->active == std::vector<std::string>{"a2", "a3"});
    CHECK(p->spares == std::vector<std::string>{"a1"});
    // Every node runs ranks: the batch host too.
    p = place({"a1", "a2"}, "a1", 2, {});
    REQUIRE(p);
    CHECK(p->active == std::vector<std::string>{"a2", "a1"});
    CHECK(p->spares.empty());
    CHECK_FALSE(place({"a1", "a2"}, "a1", 3, {}));
    CHECK_FALSE(place({"a1", "a2", "a3"}, "a1", 2, {"a2", "a3"}));
}

TEST_CASE("a dead node's place goes to a spare; the survivors keep theirs") {
    Placement p{{"a2", "a3"}, {"a1", "a4"}};
    std::vector<std::string> took;
    auto n = replace(p, {"a2"}, took);
    REQUIRE(n);
    CHECK(n->active == std::vector<std::string>{"a1", "a3"});   // rank 0's node died: its place, and MASTER_ADDR, move
    CHECK(n->spares == std::vector<std::string>{"a4"});
    CHECK(took == std::vector<std::string>{"a1"});
    CHECK_FALSE(replace(Placement{{"a2", "a3"}, {"a1"}}, {"a2", "a3"}, took));   // two dead, one spare
    CHECK_FALSE(replace(Placement{{"a2", "a3"}, {}}, {"a3"}, took));               // no spare left
    n = replace(Placement{{"a2", "a3"}, {"a1", "a4"}}, {"a3", "a1"}, took);         // a spare died with it
    REQUIRE(n);
    CHECK(n->active == std::vector<std::string>{"a2", "a4"});
}

TEST_CASE("only a FAULT of this attempt that Slurm confirmed names a dead node") {
    auto ev = [](const char *s) { return json::parse(s); };
    CHECK(dead_node_of(ev(R"({"kind":"FAULT","evidence":{"node_failure":true,"attempt":1,"node":"a2/0"}})"), 1) == "a2");
    CHECK(dead_node_of(ev(R"({"kind":"FAULT","evidence":{"node_failure":true,"attempt":1,"node":"a2/0"}})"), 2) == "");   // an older attempt's
    CHECK(dead_node_of(ev(R"({"kind":"FAULT","evidence":{"attempt":1,"node":"a2/0"}})"), 1) == "");   // a hang, a silence: no node death
    CHECK(dead_node_of(ev(R"({"kind":"FAULT","evidence":{"node_failure":"yes","attempt":1,"node":"a2"}})"), 1) == "");
    CHECK(dead_node_of(ev(R"({"kind":"FAULT","evidence":{"node_failure":true,"attempt":1,"node":"a2;rm -rf"}})"), 1) == "");
    CHECK(dead_node_of(ev(R"({"kind":"FAILED","evidence":{"node_failure":true,"attempt":1,"node":"a2"}})"), 1) == "");
    CHECK(dead_node_of(ev(R"([1,2])"), 1) == "");
    CHECK(sealed_of(ev(R"({"kind":"SEALED","evidence":{"checkpoint":"checkpoint-000010"}})")) == "checkpoint-000010");
    CHECK(sealed_of(ev(R"({"kind":"SEALED","evidence":{"checkpoint":"../x"}})")) == "");
}

TEST_CASE("a STRAGGLER event of this attempt names its node") {
    auto ev = [](const char *s) { return json::parse(s); };
    CHECK(straggler_of(ev(R"({"kind":"STRAGGLER","evidence":{"attempt":2,"node":"a3","worker":"a3/0"}})"), 2) == "a3");
    CHECK(straggler_of(ev(R"({"kind":"STRAGGLER","evidence":{"attempt":1,"node":"a3"}})"), 2) == "");   // an older attempt's
    CHECK(straggler_of(ev(R"({"kind":"STRAGGLER","evidence":{"attempt":2,"node":"a3 a4"}})"), 2) == "");
    CHECK(straggler_of(ev(R"({"kind":"FAULT","evidence":{"attempt":2,"node":"a3","node_failure":true}})"), 2) == "");
    CHECK(straggler_of(ev(R"({"kind":"STRAGGLER","evidence":"a3"})"), 2) == "");
    // The slow node leaves; a spare takes its place, the slow one is no spare.
    std::vector<std::string> took;
    auto n = replace(Placement{{"a1", "a2", "a3"}, {"a4"}}, {"a3"}, took);
    REQUIRE(n);
    CHECK(n->active == std::vector<std::string>{"a1", "a2", "a4"});
    CHECK(n->spares.empty());
    CHECK(took == std::vector<std::string>{"a4"});
}

TEST_CASE("a restart storm: restarts without a new sealed checkpoint between them") {
    StormGuard g;
    g.max_stalled = 1;
    CHECK(g.admit("c10") == "");
    CHECK(g.admit("c20") == "");   // progress
    CHECK(g.admit("c20") == "");   // one restart without a new seal: allowed
    const std::string why = g.admit("c20");
    CHECK(why.find("restart storm: 3 restarts in a row without a new sealed checkpoint (last: c20)") == 0);
    StormGuard none;
    none.max_stalled = 0;
    CHECK(none.admit("") == "");
    CHECK(none.admit("").find("(last: none)") != std::string::npos);
}
