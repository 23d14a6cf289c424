#include <csignal>
#include <doctest/doctest.h>
#include <vector>

#include "common/plugstack_config.hpp"

using namespace shardnet;

namespace {
std::string parse(std::vector<const char *> args, PlugstackConfig &c) {
    return parse_plugstack_args(int(args.size()), args.data(), c);
}
}  // namespace

TEST_CASE("no arguments gives the defaults") {
    PlugstackConfig c;
    CHECK(parse({}, c) == "");
    CHECK(c.broker_url.empty());
    CHECK(c.heartbeat_default == 10);
    CHECK(c.mode == BrokerMode::optional);
}

TEST_CASE("a full site line") {
    PlugstackConfig c;
    CHECK(parse({"broker=https://broker.example:8443/", "token_file=/etc/shardnet/token", "ckpt_root=/scratch/ckpt",
                 "heartbeat_min=2", "heartbeat_max=60", "heartbeat_default=5", "mode=required", "prelimit=USR1@120",
                 "timeout_ms=1500", "agent=/opt/sn/agent", "progress_root=/var/tmp", "exit_wait_ms=100", "start_grace_ms=0"},
                c) == "");
    CHECK(c.broker_url == "https://broker.example:8443");
    CHECK(c.ckpt_root == "/scratch/ckpt");
    CHECK(c.heartbeat_min == 2);
    CHECK(c.heartbeat_max == 60);
    CHECK(c.heartbeat_default == 5);
    CHECK(c.mode == BrokerMode::required);
    CHECK(c.prelimit_signal == SIGUSR1);
    CHECK(c.prelimit_secs == 120);
    CHECK(c.timeout_ms == 1500);
    CHECK(c.exit_wait_ms == 100);
    CHECK(c.start_grace_ms == 0);
    CHECK(c.agent_path == "/opt/sn/agent");
}

TEST_CASE("bad arguments are named") {
    PlugstackConfig c;
    CHECK(parse({"brokr=http://x"}, c) == "unknown plugstack argument 'brokr'");
    CHECK(parse({"broker"}, c) == "plugstack argument 'broker' is not key=value");
    CHECK(parse({"broker=ftp://x"}, c).find("'broker=ftp://x'") != std::string::npos);
    // Found by tests/fuzz (plugstack): "https://" was taken, as the URL "https:".
    CHECK(parse({"broker=https://"}, c) == "plugstack argument 'broker=https://': expected a host after http:// or https://");
    CHECK(parse({"broker=http:///v1"}, c).find("expected a host") != std::string::npos);
    CHECK(parse({"heartbeat_min=abc"}, c).find("heartbeat_min=abc") != std::string::npos);
    CHECK(parse({"ckpt_root=relative/dir"}, c).find("not absolute") != std::string::npos);
    CHECK(parse({"ckpt_root=/a/../etc"}, c).find("'..'") != std::string::npos);
    CHECK(parse({"mode=sometimes"}, c).find("'optional' or 'required'") != std::string::npos);
    CHECK(parse({"prelimit=KILL@10"}, c).find("disallowed signal") != std::string::npos);
    CHECK(parse({"prelimit=USR1"}, c).find("SIGNAL@SECONDS") != std::string::npos);
    CHECK(parse({"mode=required"}, c).find("needs broker") != std::string::npos);
    CHECK(parse({"heartbeat_min=10", "heartbeat_max=5"}, c).find("heartbeat_min (10) is above heartbeat_max (5)") !=
          std::string::npos);
    CHECK(parse({"heartbeat_default=1000"}, c).find("heartbeat_default (1000)") != std::string::npos);
    CHECK(parse({"timeout_ms=10", }, c).find("from 50 to 60000") != std::string::npos);
    CHECK(parse({"broker=http://a", "broker=http://b"}, c).find("given twice") != std::string::npos);
    CHECK(parse({"token_file="}, c).find("empty value") != std::string::npos);
}

TEST_CASE("plugstack_keys lists every key the parser takes") {
    auto keys = plugstack_keys();
    CHECK(keys.size() == 16);
    for (const auto &k : keys) {
        PlugstackConfig c;
        std::string arg = k + "=";
        auto err = parse({arg.c_str()}, c);
        CHECK(err.find("unknown") == std::string::npos);
    }
}
