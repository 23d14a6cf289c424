#include <doctest/doctest.h>

#include "common/job_options.hpp"

using namespace shardnet;

TEST_CASE("defaults come from the site") {
    PlugstackConfig cfg;
    cfg.heartbeat_default = 7;
    JobOptionsRaw raw;
    raw.enabled = true;
    JobOptions out;
    CHECK(resolve_job_options(raw, cfg, out) == "");
    CHECK(out.heartbeat == 7);
    CHECK(out.ckpt_every == "auto");
    CHECK(out.requeue == Requeue::federated);
    CHECK(out.run.empty());
}

TEST_CASE("every option resolved") {
    PlugstackConfig cfg;
    JobOptionsRaw raw;
    raw[Opt::run] = "llama-7b.r3";
    raw[Opt::ckpt_dir] = "/home/u/ckpt";
    raw[Opt::ckpt_every] = "500";
    raw[Opt::heartbeat] = "30";
    raw[Opt::resume] = "latest";
    raw[Opt::requeue] = "local";
    JobOptions out;
    CHECK(resolve_job_options(raw, cfg, out) == "");
    CHECK(out.run == "llama-7b.r3");
    CHECK(out.ckpt_dir == "/home/u/ckpt");
    CHECK(out.ckpt_every == "500");
    CHECK(out.heartbeat == 30);
    CHECK(out.resume == "latest");
    CHECK(out.requeue == Requeue::local);
}

TEST_CASE("bad values name the option and the reason") {
    PlugstackConfig cfg;
    cfg.heartbeat_min = 5;
    cfg.heartbeat_max = 60;
    JobOptions out;
    auto one = [&](Opt o, const char *v) {
        JobOptionsRaw raw;
        raw[o] = v;
        return resolve_job_options(raw, cfg, out);
    };
    CHECK(one(Opt::ckpt_dir, "../../etc") == "--shardnet-ckpt-dir=../../etc: path '../../etc' is not absolute");
    CHECK(one(Opt::ckpt_dir, "/home/u/../../etc").find("'..' component") != std::string::npos);
    CHECK(one(Opt::heartbeat, "2").find("from 5 to 60 (site bounds)") != std::string::npos);
    CHECK(one(Opt::heartbeat, "ten").find("--shardnet-heartbeat=ten") == 0);
    CHECK(one(Opt::ckpt_every, "0").find("'auto'") != std::string::npos);
    CHECK(one(Opt::requeue, "everywhere").find("federated, local or off") != std::string::npos);
    CHECK(one(Opt::run, "bad/run").find("--shardnet=bad/run") == 0);
    CHECK(one(Opt::resume, "../x").find("expected 'latest'") != std::string::npos);
    CHECK(one(Opt::resume, "a\nb").find("(unprintable)") != std::string::npos);
    CHECK(one(Opt::run, "auto") == "");
    CHECK(one(Opt::run, "") == "");
}

TEST_CASE("option specs carry their env fallbacks") {
    CHECK(std::string(opt_spec(Opt::run).name) == "shardnet");
    CHECK(std::string(opt_spec(Opt::run).env) == "SHARDNET_RUN");
    CHECK(std::string(opt_spec(Opt::requeue).env) == "SHARDNET_REQUEUE");
}
