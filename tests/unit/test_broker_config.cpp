#include <doctest/doctest.h>

#include "broker/trust/auth.hpp"
#include "common/worker_token.hpp"
#include "broker/config/config.hpp"

using namespace shardnet::broker;

namespace {
const std::string kHash(64, 'a');
std::string with(const std::string &extra) {
    return R"({"listen": "127.0.0.1:0", "plain_http": true, "database": "/tmp/x.db")" + extra + "}";
}
}  // namespace

TEST_CASE("a minimal config") {
    BrokerConfig c;
    CHECK(parse_broker_config(with(""), c) == "");
    CHECK(c.plain_http);
    CHECK(c.listen_port == 0);
    CHECK(c.body_bytes == 1u << 20);
    CHECK(c.sse_buffer_bytes == 1u << 20);
}

TEST_CASE("limits.drain_seconds: 10 by default, taken, and bounded") {
    BrokerConfig c;
    CHECK(parse_broker_config(with(""), c) == "");
    CHECK(c.drain_seconds == 10);
    CHECK(parse_broker_config(with(R"(, "limits": {"drain_seconds": 2})"), c) == "");
    CHECK(c.drain_seconds == 2);
    CHECK(parse_broker_config(with(R"(, "limits": {"drain_seconds": 0})"), c) == "limits.drain_seconds: expected 1..3600");
    CHECK(parse_broker_config(with(R"(, "limits": {"drain_seconds": 3601})"), c) == "limits.drain_seconds: expected 1..3600");
    CHECK(parse_broker_config(with(R"(, "limits": {"drain_seconds": 1.5})"), c) == "limits.drain_seconds: expected an integer");
}

TEST_CASE("limits.sse_buffer_bytes: taken, and bounded") {
    BrokerConfig c;
    CHECK(parse_broker_config(with(R"(, "limits": {"sse_buffer_bytes": 65536})"), c) == "");
    CHECK(c.sse_buffer_bytes == 65536);
    CHECK(parse_broker_config(with(R"(, "limits": {"sse_buffer_bytes": 100})"), c) == "limits.sse_buffer_bytes: expected 4096..1073741824");
    CHECK(parse_broker_config(with(R"(, "limits": {"sse_buffer_bytes": "1M"})"), c) == "limits.sse_buffer_bytes: expected an integer");
    CHECK(parse_broker_config(with(R"(, "limits": {"max_connections": 100, "sse_max_streams": 100})"), c) ==
          "limits.sse_max_streams: must be below limits.max_connections (100): streams must leave connections for heartbeats");
    CHECK(parse_broker_config(with(R"(, "limits": {"max_connections": 100, "sse_max_streams": 60, "sse_streams_per_token": 4})"), c) == "");
    CHECK(c.sse_max_streams == 60);
    CHECK(c.sse_streams_per_token == 4);
    CHECK(parse_broker_config(with(R"(, "requeue": {"environment_drop": ["SLURM_*", "MY_SECRET"]})"), c) == "");
    CHECK(c.environment_drop == std::vector<std::string>{"SLURM_*", "MY_SECRET"});
    CHECK(parse_broker_config(with(R"(, "requeue": {"environment_drop": ["A B"]})"), c) ==
          "requeue.environment_drop: \"A B\" is not a NAME or PREFIX* of [A-Za-z0-9_]");
    CHECK(parse_broker_config(with(R"(, "detector": {"drain_bad_nodes": "yes"})"), c) == "detector.drain_bad_nodes: expected true or false");
}

TEST_CASE("detector.straggler_*: defaults, taken, and bounded") {
    BrokerConfig c;
    CHECK(c.straggler_fraction == 0.5);
    CHECK(c.straggler_window_seconds == 60);
    CHECK(c.straggler_windows == 2);
    CHECK(parse_broker_config(with(R"(, "detector": {"straggler_fraction": 0.3, "straggler_window_seconds": 30, "straggler_windows": 3})"), c) == "");
    CHECK(c.straggler_fraction == 0.3);
    CHECK(c.straggler_window_seconds == 30);
    CHECK(c.straggler_windows == 3);
    CHECK(parse_broker_config(with(R"(, "detector": {"straggler_fraction": 1.5})"), c).find("detector.straggler_fraction: expected 0") == 0);
    CHECK(parse_broker_config(with(R"(, "detector": {"straggler_window_seconds": 0})"), c) == "detector.straggler_window_seconds: expected 1..86400");
    CHECK(parse_broker_config(with(R"(, "detector": {"straggler_windows": "2"})"), c) == "detector.straggler_windows: expected an integer");
}

TEST_CASE("config errors name the field") {
    BrokerConfig c;
    CHECK(parse_broker_config("{", c).find("not valid JSON") != std::string::npos);
    CHECK(parse_broker_config(with(R"(, "listn": 1)"), c) == "listn: unknown key");
    CHECK(parse_broker_config(with(R"(, "limits": {"body_byte": 5})"), c) == "limits.body_byte: unknown key");
    CHECK(parse_broker_config(with(R"(, "limits": {"body_bytes": "big"})"), c) == "limits.body_bytes: expected an integer");
    CHECK(parse_broker_config(with(R"(, "threads": 0)"), c) == "threads: expected 1..256");
    CHECK(parse_broker_config(R"({"listen": "127.0.0.1:0"})", c).find("tls: required") == 0);
    CHECK(parse_broker_config(R"({"listen": "nowhere", "plain_http": true})", c) == "listen: expected HOST:PORT");
    CHECK(parse_broker_config(R"({"listen": "h:99999", "plain_http": true})", c) == "listen: port must be 0..65535");
    CHECK(parse_broker_config(with(R"(, "tokens": [{"name": "a", "scope": "root", "sha256": ")" + kHash + R"("}])"), c) ==
          "tokens[0].scope: expected worker, user, peer or admin");
    CHECK(parse_broker_config(with(R"(, "tokens": [{"name": "a", "scope": "user", "sha256": "abc"}])"), c).find("tokens[0].sha256") == 0);
    CHECK(parse_broker_config(with(R"(, "tokens": [{"name": "a", "scope": "user"}])"), c) == "tokens[0]: needs name, sha256 and scope");
}

TEST_CASE("the printed template is a valid config once plain or with TLS") {
    BrokerConfig c;
    CHECK(parse_broker_config(config_template(), c) == "");
    CHECK_FALSE(c.plain_http);
    CHECK(c.tokens.size() == 3);
    CHECK(c.tokens[1].user == "alice");
    CHECK(c.min_uid == 1000);
}

TEST_CASE("requeue identity and user tokens' accounts") {
    BrokerConfig c;
    const std::string head = R"({"plain_http": true, )";
    const std::string tok = R"("sha256": "0000000000000000000000000000000000000000000000000000000000000000")";
    CHECK(parse_broker_config(head + R"("tokens": [{"name": "a", "scope": "user", )" + tok + "}]}", c) == "");
    CHECK(c.tokens[0].user == "a");   // a user token acts for the account of its name by default
    CHECK(parse_broker_config(head + R"("tokens": [{"name": "a", "scope": "user", "user": "alice", )" + tok + "}]}", c) == "");
    CHECK(c.tokens[0].user == "alice");
    CHECK(parse_broker_config(head + R"("tokens": [{"name": "a", "scope": "worker", "user": "alice", )" + tok + "}]}", c) ==
          "tokens[0].user: only user tokens act for a Unix user");
    CHECK(parse_broker_config(head + R"("tokens": [{"name": "p", "scope": "peer", "users": ["alice", "bob"], )" + tok + "}]}", c) == "");
    CHECK(c.tokens[0].users.size() == 2);
    CHECK(parse_broker_config(head + R"("tokens": [{"name": "p", "scope": "user", "users": ["alice"], )" + tok + "}]}", c)
              .find("only peer tokens") != std::string::npos);
    CHECK(parse_broker_config(head + R"("tokens": [{"name": "p", "scope": "peer", "users": [5], )" + tok + "}]}", c)
              .find("account names") != std::string::npos);
    CHECK(parse_broker_config(head + R"("requeue": {"min_uid": 500}})", c) == "");
    CHECK(c.min_uid == 500);
    CHECK(parse_broker_config(head + R"("requeue": {"min_uid": 0}})", c).find("requeue.min_uid") == 0);
    CHECK(parse_broker_config(head + R"("requeue": {"as": "root"}})", c).find("requeue") == 0);
}

TEST_CASE("tokens: hashed lookup, scopes, rate limit") {
    TokenEntry admin{"ops", sha256_hex("s3cret"), Scope::admin, ""};
    Auth auth({admin}, 20, 20);  // 2 per 100 ms window
    const TokenEntry *who = nullptr;
    CHECK(auth.check("", who, 1.0) == Auth::Verdict::missing);
    CHECK(auth.check("wrong", who, 1.0) == Auth::Verdict::invalid);
    CHECK(auth.check("s3cret", who, 1.0) == Auth::Verdict::ok);
    REQUIRE(who);
    CHECK(who->name == "ops");
    CHECK(auth.check("s3cret", who, 1.0) == Auth::Verdict::ok);
    CHECK(auth.check("s3cret", who, 1.0) == Auth::Verdict::rate_limited);
    CHECK(auth.check("s3cret", who, 1.2) == Auth::Verdict::ok);  // next window
    ConnCache cache;
    CHECK(auth.check("s3cret", who, 2.0, &cache) == Auth::Verdict::ok);
    CHECK(auth.check("s3cre7", who, 2.0, &cache) == Auth::Verdict::invalid);  // the cache never vouches for another token
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("rate limit: a connection that makes one request is charged one") {
    TokenEntry admin{"ops", sha256_hex("s3cret"), Scope::admin, ""};
    Auth auth({admin}, 10000, 10000);   // 1000 per 100 ms window: batches of 15 for busy connections
    const TokenEntry *who = nullptr;
    // 1000 connections of one request each, in one window: all answered.
    int ok = 0;
    for (int i = 0; i < 1000; ++i) {
        ConnCache fresh;
        ok += auth.check("s3cret", who, 5.0, &fresh) == Auth::Verdict::ok;
    }
    CHECK(ok == 1000);
    CHECK(auth.check("s3cret", who, 5.0) == Auth::Verdict::rate_limited);
    // A busy connection takes batches, and still within the limit.
    ConnCache busy;
    int taken = 0;
    for (int i = 0; i < 2000; ++i) taken += auth.check("s3cret", who, 6.0, &busy) == Auth::Verdict::ok;
    CHECK(taken >= 985);
    CHECK(taken <= 1000);
}

TEST_CASE("derived worker tokens: one job's run and attempt, signed by a configured key") {
    WorkerKey k{"site", "/k", std::string(48, 'q')};
    Auth auth({}, 1000, 1000, {k});
    const TokenEntry *who = nullptr;
    const shardnet::WorkerClaim claim{"beta.7", 2, 4, 1001, 7, "beta"};
    const std::string tok = shardnet::derive_worker_token(k.key, claim);
    REQUIRE(auth.check(tok, who, 1.0) == Auth::Verdict::ok);
    CHECK(who->scope == Scope::worker);
    CHECK(who->run == "beta.7");
    CHECK(who->attempt == 2);
    CHECK(who->bound);
    CHECK(who->world == 4);
    CHECK(who->uid == 1001);
    CHECK(who->job == 7);
    CHECK(who->cluster == "beta");
    CHECK(who->name == "site/beta/7");
    ConnCache cache;
    CHECK(auth.check(tok, who, 1.0, &cache) == Auth::Verdict::ok);
    CHECK(auth.check(tok, who, 1.0, &cache) == Auth::Verdict::ok);  // from the connection's cache
    CHECK(auth.check(shardnet::derive_worker_token(std::string(48, 'z'), claim), who, 1.0) == Auth::Verdict::invalid);
    // Idle job tokens are forgotten once many are known; a connection that
    // cached one looks it up again, and it still verifies.
    for (unsigned long long job = 100; job < 120; ++job)
        CHECK(auth.check(shardnet::derive_worker_token(k.key, shardnet::WorkerClaim{"r", 1, 1, 1001, job, "beta"}), who, 1.0) ==
              Auth::Verdict::ok);
    CHECK(auth.derived_tokens() == 21);
    auth.sweep(2000.0, 10, 600);
    CHECK(auth.derived_tokens() == 0);
    CHECK(auth.check(tok, who, 2000.0, &cache) == Auth::Verdict::ok);   // re-verified, not from a freed bucket
    CHECK(who->job == 7);
    CHECK(auth.derived_tokens() == 1);
    auth.sweep(2010.0, 0, 600);   // a minute has not passed: nothing happens
    CHECK(auth.derived_tokens() == 1);
    Auth no_keys({}, 1000, 1000);
    CHECK(no_keys.check(tok, who, 1.0) == Auth::Verdict::invalid);
}

TEST_CASE("clusters.NAME.names: the site's partition/account/QOS names as the cluster calls them") {
    BrokerConfig c;
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf",
        "names": {"partition": {"gpu": "gpu-a100", "debug": null}, "qos": {"high": "normal"}}}})"), c) == "");
    const auto &names = c.cluster_info.at("beta").names;
    CHECK(names.at("partition").at("gpu") == std::optional<std::string>("gpu-a100"));
    CHECK(!names.at("partition").at("debug"));
    CHECK(names.at("qos").at("high") == std::optional<std::string>("normal"));
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "names": {"gres": {}}}})"), c) ==
          "clusters.beta.names.gres: unknown key (expected partition, account, qos or gpu_type)");
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "names": {"partition": {"gpu": "a b"}}}})"), c) ==
          "clusters.beta.names.partition.gpu: expected this cluster's name (1-64 of [A-Za-z0-9._-]) or null");
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "names": {"partition": ["gpu"]}}})"), c) ==
          "clusters.beta.names.partition: expected an object of SITE_NAME: NAME_HERE (or null: none here)");
}

TEST_CASE("clusters.NAME.containers: whether Slurm there runs OCI containers (true unless said)") {
    BrokerConfig c;
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf"}, "gamma": {"slurm_conf": "/etc/g.conf", "containers": false}})"), c) == "");
    CHECK(c.cluster_info.at("beta").containers);
    CHECK_FALSE(c.cluster_info.at("gamma").containers);
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "containers": "no"}})"), c) ==
          "clusters.beta.containers: expected true or false");
}

TEST_CASE("clusters.NAME.image_roots: plain absolute paths, each bad one named; ckpt_roots as before") {
    BrokerConfig c;
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "image_roots": ["/shared/images", "/home"], "ckpt_roots": ["/scratch"]}})"), c) == "");
    CHECK(c.cluster_info.at("beta").image_roots == std::vector<std::string>{"/shared/images", "/home"});
    CHECK(c.cluster_info.at("beta").ckpt_roots == std::vector<std::string>{"/scratch"});
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf"}})"), c) == "");
    CHECK(c.cluster_info.at("beta").image_roots.empty());
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "image_roots": "/shared"}})"), c).find(
              "clusters.beta.image_roots: expected a non-empty array of absolute paths") == 0);
    // [] would read as "anywhere": refused, saying to leave the key out.
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "image_roots": []}})"), c) ==
          "clusters.beta.image_roots: expected a non-empty array of absolute paths (leave it out: every path is read there)");
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "image_roots": ["images"]}})"), c) ==
          "clusters.beta.image_roots: path 'images' is not absolute");
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "image_roots": ["/a/../b"]}})"), c) ==
          "clusters.beta.image_roots: path '/a/../b' has a '..' component");
    CHECK(parse_broker_config(with(R"(, "clusters": {"beta": {"slurm_conf": "/etc/b.conf", "ckpt_roots": [""]}})"), c) ==
          "clusters.beta.ckpt_roots: expected an array of absolute paths");
}
