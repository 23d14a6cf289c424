#include <doctest/doctest.h>
#include <map>
#include <set>

#include "spank/torch_env.hpp"

using namespace shardnet;

TEST_CASE("torchrun's variables from a step's layout") {
    StepLayout l;
    l.rank = 5, l.local_rank = 1, l.world = 6, l.local_world = 2, l.node_index = 2, l.nodes = 3, l.attempt = 2;
    l.run = "run-1", l.master_addr = "10.0.0.7", l.master_port = 12000;
    std::map<std::string, std::string> env;
    for (const auto &[k, v] : torch_env(l)) env[k] = v;
    CHECK(env.at("RANK") == "5");
    CHECK(env.at("LOCAL_RANK") == "1");
    CHECK(env.at("WORLD_SIZE") == "6");
    CHECK(env.at("LOCAL_WORLD_SIZE") == "2");
    CHECK(env.at("GROUP_RANK") == "2");
    CHECK(env.at("GROUP_WORLD_SIZE") == "3");
    CHECK(env.at("ROLE_RANK") == "5");
    CHECK(env.at("ROLE_WORLD_SIZE") == "6");
    CHECK(env.at("ROLE_NAME") == "default");
    CHECK(env.at("MASTER_ADDR") == "10.0.0.7");
    CHECK(env.at("MASTER_PORT") == "12000");
    CHECK(env.at("TORCHELASTIC_RUN_ID") == "run-1");
    CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "1");   // attempt 2: one restart so far
    CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "999999");
    l.restart = 2;   // two in-job restarts (`shard launch`) within attempt 2
    for (const auto &[k, v] : torch_env(l))
        if (std::string(k) == "TORCHELASTIC_RESTART_COUNT") CHECK(v == "3");
    l.requeue = false;
    for (const auto &[k, v] : torch_env(l))
        if (std::string(k) == "TORCHELASTIC_MAX_RESTARTS") CHECK(v == "0");
}

TEST_CASE("MASTER_PORT: Slurm's reserved ports first, else one derived from the step") {
    CHECK(first_reserved_port("12000-12003") == 12000);
    CHECK(first_reserved_port("12005,12007-12008") == 12005);
    CHECK(first_reserved_port("12000") == 12000);
    for (const char *bad : {"", "-12", "abc", "0", "70000", "12x", " 12000"}) CHECK(first_reserved_port(bad) == 0);
    const unsigned p = derived_port("alpha", 17, 0);
    CHECK(p >= kDerivedPortLow);
    CHECK(p < kDerivedPortLow + kDerivedPorts);
    CHECK(derived_port("alpha", 17, 0) == p);   // every node of the step computes the same
    // Clusters on one host number their jobs alike: the cluster tells them apart.
    std::set<unsigned> ports;
    for (const char *c : {"alpha", "beta", "gamma"})
        for (unsigned job = 1; job <= 20; ++job)
            for (unsigned step = 0; step < 3; ++step) ports.insert(derived_port(c, job, step));
    CHECK(ports.size() >= 170);   // of 180: a few collisions at most among 10,000 ports
}

TEST_CASE("MASTER_ADDR: only an address or host name") {
    CHECK(is_host_address("127.0.0.1"));
    CHECK(is_host_address("node-01.cluster"));
    CHECK(is_host_address("fe80::1"));
    for (const char *bad : {"", "a b", "a\nb", "a;b", "$(x)"}) CHECK_FALSE(is_host_address(bad));
    CHECK_FALSE(is_host_address(std::string(256, 'a')));
}
