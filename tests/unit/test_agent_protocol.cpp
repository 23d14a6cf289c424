#include <doctest/doctest.h>
#include <sstream>

#include "agent_protocol.hpp"

using namespace shardnet;

TEST_CASE("agent config round-trips through the line protocol") {
    AgentConfig c;
    c.url = "http://127.0.0.1:9";
    c.token = "tok";
    c.run = "alpha.12";
    c.attempt = 3;
    c.cluster = "alpha";
    c.node = "alpha1";
    c.job = 12;
    c.step = "batch";
    c.interval = 2;
    c.prelimit_signal = 10;
    c.prelimit_secs = 30;
    c.progress_dir = "/tmp/p";
    c.ranks = {{0, 0}, {5, 1}};
    std::istringstream in(encode_agent_config(c));
    AgentConfig d;
    bool done = false;
    std::string line;
    while (!done && std::getline(in, line)) REQUIRE(parse_agent_config_line(line, d, done) == "");
    CHECK(done);
    CHECK(d.url == c.url);
    CHECK(d.token == "tok");
    CHECK(d.attempt == 3);
    CHECK(d.job == 12);
    CHECK(d.step == "batch");
    CHECK(d.prelimit_signal == 10);
    CHECK(d.prelimit_secs == 30);
    REQUIRE(d.ranks.size() == 2);
    CHECK(d.ranks[1].rank == 5);
    CHECK(d.ranks[1].local_rank == 1);
}

TEST_CASE("agent config rejects what it does not know") {
    AgentConfig c;
    bool done = false;
    CHECK(parse_agent_config_line("colour=blue", c, done).find("unknown config key 'colour'") != std::string::npos);
    CHECK(parse_agent_config_line("interval=0", c, done) == "bad interval");
    CHECK(parse_agent_config_line("rank=1", c, done) == "bad rank");
    CHECK(parse_agent_config_line("noequals", c, done).find("bad config line") != std::string::npos);
    CHECK(parse_agent_config_line("end", c, done).find("lacks url") != std::string::npos);
}

TEST_CASE("events") {
    auto e = parse_agent_event("exit=3:256");
    REQUIRE(e);
    CHECK(e->kind == AgentEvent::exit);
    CHECK(e->rank == 3);
    CHECK(e->value == 256);
    CHECK(parse_agent_event("pid=0:1234")->kind == AgentEvent::pid);
    CHECK_FALSE(parse_agent_event("pid=x:1"));
    CHECK_FALSE(parse_agent_event("kill=1:9"));
    CHECK_FALSE(parse_agent_event("pid=1"));
}
