#include <doctest/doctest.h>
#include <sstream>

#include "common/agent_protocol.hpp"

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
    c.nodelist = "alpha[1-2],beta-3.x_y";
    c.ckpt_every = "auto";
    c.fatal_exit = {3, 42};
    c.requeue_timeout = true;
    c.spares = 2;
    c.replace_stragglers = true;
    std::string text;
    REQUIRE(encode_agent_config(c, text) == "");
    CHECK(text.find("\nfatal_exit=3,42\n") != std::string::npos);
    std::istringstream in(text);
    AgentConfigParser p;
    std::string line;
    while (!p.done() && std::getline(in, line)) REQUIRE(p.feed(line) == "");
    CHECK(p.done());
    const AgentConfig &d = p.config();
    CHECK(d.nodelist == c.nodelist);
    CHECK(d.url == c.url);
    CHECK(d.token == "tok");
    CHECK(d.attempt == 3);
    CHECK(d.job == 12);
    CHECK(d.step == "batch");
    CHECK(d.prelimit_signal == 10);
    CHECK(d.prelimit_secs == 30);
    CHECK(d.ckpt_auto());
    CHECK(d.fatal_exit == std::vector<int>{3, 42});
    CHECK(d.requeue_timeout);
    CHECK(d.spares == 2);
    CHECK(d.replace_stragglers);
    CHECK(agent_config_value_error("straggler", "swap") == "'straggler' is not report or replace");
    CHECK(agent_config_value_error("on_timeout", "always") == "'on_timeout' is not fail or requeue");
    REQUIRE(d.ranks.size() == 2);
    CHECK(d.ranks[1].rank == 5);
    CHECK(d.ranks[1].local_rank == 1);
}

TEST_CASE("agent config rejects what it does not know") {
    AgentConfigParser p;
    CHECK(p.feed("colour=blue").find("unknown config key 'colour'") != std::string::npos);
    CHECK(p.feed("interval=0") == "bad interval");
    CHECK(p.feed("rank=1") == "bad rank");
    CHECK(p.feed("noequals").find("bad config line") != std::string::npos);
    CHECK(p.feed("end").find("lacks url") != std::string::npos);
    CHECK(p.feed("url=http://x").find("after 'end'") != std::string::npos);
}

namespace {
AgentConfig valid_config() {
    AgentConfig c;
    c.url = "http://127.0.0.1:9";
    c.token = "tok";
    c.run = "alpha.12";
    c.cluster = "alpha";
    c.nodelist = "alpha[1-2]";
    c.job = 12;
    c.step = "0";
    c.progress_dir = "/run/shardnet/p";
    return c;
}
}  // namespace

TEST_CASE("encode refuses a value that would add a line of its own") {
    // The job's environment chooses the node list: a newline in it must not
    // become a second url= that receives the agent's token.
    const std::string evil = "alpha1\nurl=http://127.0.0.1:6666";
    std::string out = "stale";
    AgentConfig c = valid_config();
    c.nodelist = evil;
    std::string err = encode_agent_config(c, out);
    CHECK(err.find("'nodelist'") != std::string::npos);
    CHECK(err.find("control characters") != std::string::npos);
    CHECK(err.find("6666") == std::string::npos);  // the error never echoes the value
    CHECK(out.empty());
    for (auto field : {&AgentConfig::cluster, &AgentConfig::run, &AgentConfig::step, &AgentConfig::progress_dir,
                       &AgentConfig::ckpt_dir, &AgentConfig::ca_file, &AgentConfig::token, &AgentConfig::node,
                       &AgentConfig::requeue, &AgentConfig::url}) {
        AgentConfig d = valid_config();
        d.*field = "/x\nurl=http://127.0.0.1:6666";
        CHECK_MESSAGE(encode_agent_config(d, out) != "", "field accepted a newline");
        CHECK(out.empty());
        d.*field = std::string("/x\rurl=a", 9);
        CHECK(encode_agent_config(d, out) != "");
    }
    c = valid_config();
    c.nodelist = "alpha1 url=http://x";
    CHECK(encode_agent_config(c, out).find("not a Slurm host list") != std::string::npos);
    c.nodelist = std::string(kMaxAgentValue + 1, 'a');
    CHECK(encode_agent_config(c, out).find("longer than") != std::string::npos);
    c = valid_config();
    c.token = "two words";
    CHECK(encode_agent_config(c, out).find("'token'") != std::string::npos);
    c = valid_config();
    REQUIRE(encode_agent_config(c, out) == "");
    CHECK(out.rfind("token=tok\n", 0) == 0);
    CHECK(out.size() >= 4);
    CHECK(out.substr(out.size() - 4) == "end\n");
}

TEST_CASE("the agent refuses a key given twice") {
    AgentConfigParser p;
    REQUIRE(p.feed("url=http://127.0.0.1:1") == "");
    CHECK(p.feed("url=http://127.0.0.1:6666") == "config key 'url' given twice");
    CHECK(p.config().url == "http://127.0.0.1:1");
    REQUIRE(p.feed("token=a") == "");
    CHECK(p.feed("token=b").find("given twice") != std::string::npos);
    CHECK(p.config().token == "a");
    // rank lines are the one key that repeats.
    CHECK(p.feed("rank=0:0") == "");
    CHECK(p.feed("rank=1:1") == "");
    CHECK(p.config().ranks.size() == 2);
}

TEST_CASE("the agent applies the value rules too") {
    AgentConfigParser p;
    CHECK(p.feed(std::string("nodelist=a\rb")).find("control characters") != std::string::npos);
    CHECK(p.feed("nodelist=a;b").find("not a Slurm host list") != std::string::npos);
    CHECK(p.feed("url=file:///etc/passwd").find("not an http(s) URL") != std::string::npos);
    CHECK(p.feed("progress_dir=../x").find("not absolute") != std::string::npos);
    CHECK(p.feed("run=../x").find("not a run id") != std::string::npos);
    CHECK(p.feed("bad\x01key=1").find("bad config line") != std::string::npos);
    CHECK(p.feed("nodelist=" + std::string(kMaxAgentValue + 1, 'a')).find("longer than") != std::string::npos);
    CHECK(p.feed("nodelist=alpha[1-3,5],beta7") == "");
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

TEST_CASE("the job's checkpoint interval: auto or a number of steps, nothing else") {
    for (const char *ok : {"auto", "1", "500"}) CHECK(agent_config_value_error("ckpt_every", ok) == "");
    for (const char *bad : {"", "0", "-3", "AUTO", "10x", "99999999999"})
        CHECK(agent_config_value_error("ckpt_every", bad) == "'ckpt_every' is not 'auto' or a number of steps");
    AgentConfig c;
    CHECK_FALSE(c.ckpt_auto());
    c.ckpt_every = "10";
    CHECK_FALSE(c.ckpt_auto());
}

TEST_CASE("the job's fatal exit codes: 1-255, at most 16, nothing else") {
    for (const char *ok : {"3", "1,255", "3,3,7"}) CHECK(agent_config_value_error("fatal_exit", ok) == "");
    for (const char *bad : {"", "0", "256", "3,", ",3", "3;7", "3 7", "x", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"})
        CHECK(agent_config_value_error("fatal_exit", bad) == "'fatal_exit' is not a list of exit codes 1-255");
    AgentConfigParser p;
    CHECK(p.feed("fatal_exit=7,3,7") == "");
    CHECK(p.config().fatal_exit == std::vector<int>{3, 7});
    CHECK(p.feed("fatal_exit=4").find("given twice") != std::string::npos);
    AgentConfig none = valid_config();
    std::string text;
    REQUIRE(encode_agent_config(none, text) == "");
    CHECK(text.find("fatal_exit") == std::string::npos);   // no line without codes
}
