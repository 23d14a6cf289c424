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
    raw[Opt::max_attempts] = "4";
    raw[Opt::fatal_exit] = "42,3";
    raw[Opt::on_timeout] = "requeue";
    JobOptions out;
    CHECK(resolve_job_options(raw, cfg, out) == "");
    CHECK(out.requeue_timeout);
    CHECK(out.max_attempts == 4);
    CHECK(out.fatal_exit == std::vector<int>{3, 42});
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
    CHECK(one(Opt::on_timeout, "retry") == "--shardnet-on-timeout=retry: expected fail or requeue");
    CHECK(one(Opt::on_timeout, "fail") == "");
    CHECK(one(Opt::spares, "1") == "");
    CHECK(out.spares == 1);
    CHECK(one(Opt::spares, "65") == "--shardnet-spares=65: expected a number of spare nodes from 0 to 64");
    CHECK(one(Opt::spares, "-1").find("from 0 to 64") != std::string::npos);
    CHECK(one(Opt::spares, "one").find("--shardnet-spares=one") == 0);
    CHECK(one(Opt::straggler, "replace") == "");
    CHECK(one(Opt::straggler, "report") == "");
    CHECK(one(Opt::straggler, "swap") == "--shardnet-straggler=swap: expected report or replace");
    CHECK_FALSE(out.requeue_timeout);
    const std::string fatal_why = ": expected exit codes from 1 to 255, comma-separated, at most 16 (e.g. 3,7)";
    CHECK(one(Opt::fatal_exit, "0") == "--shardnet-fatal-exit=0" + fatal_why);
    CHECK(one(Opt::fatal_exit, "3,256") == "--shardnet-fatal-exit=3,256" + fatal_why);
    CHECK(one(Opt::fatal_exit, "3,,7") == "--shardnet-fatal-exit=3,,7" + fatal_why);
    CHECK(one(Opt::fatal_exit, "").find(fatal_why) != std::string::npos);
    CHECK(one(Opt::fatal_exit, "3, 7").find(fatal_why) != std::string::npos);
    CHECK(one(Opt::fatal_exit, "-3").find(fatal_why) != std::string::npos);
    CHECK(one(Opt::fatal_exit, "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16") == "");
    CHECK(one(Opt::fatal_exit, "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17").find(fatal_why) != std::string::npos);
    CHECK(one(Opt::run, "auto") == "");
    CHECK(one(Opt::run, "") == "");
}

TEST_CASE("option specs carry their env fallbacks") {
    CHECK(std::string(opt_spec(Opt::run).name) == "shardnet");
    CHECK(std::string(opt_spec(Opt::run).env) == "SHARDNET_RUN");
    CHECK(std::string(opt_spec(Opt::requeue).env) == "SHARDNET_REQUEUE");
    CHECK(std::string(opt_spec(Opt::fatal_exit).name) == "shardnet-fatal-exit");
    CHECK(std::string(opt_spec(Opt::fatal_exit).env) == "SHARDNET_FATAL_EXIT");
}

TEST_CASE("fatal exit codes: ascending, without repeats, printed back as given") {
    CHECK(parse_fatal_exit("7,3,7,255,1") == std::vector<int>{1, 3, 7, 255});
    CHECK(fatal_exit_text(*parse_fatal_exit("7,3")) == "3,7");
    CHECK(fatal_exit_text({}) == "");
    // Sixteen entries at most, repeats counted: the list as written is bounded.
    CHECK_FALSE(parse_fatal_exit("3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3"));
    for (const char *bad : {"", ",", "3,", "0", "+3", "03x", "1e2", "99999999999999999999"}) CHECK_FALSE(parse_fatal_exit(bad));
}
