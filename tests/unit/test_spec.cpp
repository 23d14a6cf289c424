#include <doctest/doctest.h>
#include <string>

#include "sbatch-wrappers/spec.hpp"
#include "sbatch-wrappers/submit.hpp"

using namespace shardnet::cli;

TEST_CASE("the example specs parse, and the shape follows from gpus and gpus_per_node") {
    JobSpec s;
    REQUIRE(load_spec(std::string(EXAMPLES) + "/h200-finetune.yaml", s) == "");
    CHECK(s.accelerator == "H200-SXM");
    CHECK(s.fabric == "infiniband");
    CHECK(s.ckpt_every == "500");
    CHECK(resolve_shape(s) == "");
    CHECK(s.nodes == 4);
    auto argv = sbatch_argv(s, "llama-ft-abc", "alpha", "", "/tmp/x.sh");
    auto has = [&](const std::string &a) { return std::find(argv.begin(), argv.end(), a) != argv.end(); };
    CHECK(has("--nodes=4"));
    CHECK(has("--shardnet=llama-ft-abc"));
    CHECK(has("--shardnet-ckpt-dir=/scratch/checkpoints/llama-ft-abc"));
    CHECK(has("--shardnet-ckpt-every=500"));
    CHECK(has("--gres=gpu:8"));
    CHECK(has("--clusters=alpha"));   // no SLURM_CONF known for it: Slurm's multi-cluster option
    auto m = manifest_of(s);
    CHECK(m.at("requires").at("accelerator_class").as_string() == "H200-SXM");
    CHECK(m.at("requires").at("nodes").as_int64() == 4);
    JobSpec small;
    REQUIRE(load_spec(std::string(EXAMPLES) + "/small.yaml", small) == "");
    CHECK(resolve_shape(small) == "");
    CHECK(small.nodes == 2);
}

TEST_CASE("bad specs name the file, line, column and what was expected") {
    JobSpec s;
    CHECK(parse_spec("command: x\nfabrik: ib\n", "a.yaml", s) ==
          "a.yaml:2:1: fabrik: unknown key (expected name, command, accelerator, gpus, gpus_per_node, gpu_memory_gb, nodes, "
          "tasks_per_node, fabric, image, checkpoint, heartbeat, requeue, max_attempts, fatal_exit, on_timeout, spares, straggler, clusters, regions, time_limit)");
    s = {};
    CHECK(parse_spec("command: x\ngpus: many\n", "a.yaml", s) == "a.yaml:2:7: gpus: expected an integer");
    s = {};
    CHECK(parse_spec("command: x\naccelerator: h900\n", "a.yaml", s).find("a.yaml:2:14: accelerator: 'h900' is not an accelerator class") == 0);
    s = {};
    CHECK(parse_spec("command: x\nfabric: carrier-pigeon\n", "a.yaml", s).find("a.yaml:2:9: fabric: expected one of nvlink") == 0);
    s = {};
    CHECK(parse_spec("command: x\ncheckpoint:\n  every: often\n", "a.yaml", s) == "a.yaml:3:10: checkpoint.every: expected a number of steps or auto");
    s = {};
    CHECK(parse_spec("command: x\ncheckpoint:\n  root: relative/dir\n", "a.yaml", s) == "a.yaml:3:9: checkpoint.root: expected an absolute path");
    s = {};
    CHECK(parse_spec("gpus: 8\n", "a.yaml", s).find("command: missing") != std::string::npos);
    s = {};
    CHECK(parse_spec("command: [x\n", "a.yaml", s).find("not valid YAML") != std::string::npos);
    s = {};
    CHECK(parse_spec("- a\n- b\n", "a.yaml", s) == "a.yaml:1:1: expected a mapping of spec keys (name, command, gpus, ...)");
    s = {};
    REQUIRE(parse_spec("command: x\ngpus: 12\ngpus_per_node: 8\n", "a.yaml", s) == "");
    CHECK(resolve_shape(s) == "gpus (12) is not a multiple of gpus_per_node (8)");
    CHECK(accelerator_class("H100") == "H100-SXM");
    CHECK(accelerator_class("MI355X") == "MI355X");
    CHECK(accelerator_class("TPU") == "");
}

TEST_CASE("on_timeout: fail (the default) or requeue; submitted as --shardnet-on-timeout=requeue") {
    JobSpec s;
    REQUIRE(parse_spec("command: x\non_timeout: requeue\n", "a.yaml", s) == "");
    auto argv = sbatch_argv(s, "r", "alpha", "", "/tmp/x.sh");
    CHECK(std::find(argv.begin(), argv.end(), "--shardnet-on-timeout=requeue") != argv.end());
    CHECK(manifest_of(s).at("on_timeout").as_string() == "requeue");
    JobSpec d;
    REQUIRE(parse_spec("command: x\n", "a.yaml", d) == "");
    argv = sbatch_argv(d, "r", "alpha", "", "/tmp/x.sh");
    CHECK(std::none_of(argv.begin(), argv.end(), [](const std::string &a) { return a.rfind("--shardnet-on-timeout", 0) == 0; }));
    JobSpec bad;
    CHECK(parse_spec("command: x\non_timeout: retry\n", "a.yaml", bad).find("on_timeout") != std::string::npos);
}

TEST_CASE("fatal_exit: a list, one code or the option's own text; submitted as --shardnet-fatal-exit") {
    for (const char *yaml : {"command: x\nfatal_exit: [7, 3]\n", "command: x\nfatal_exit: \"3,7\"\n", "command: x\nfatal_exit:\n  - 3\n  - 7\n  - 3\n"}) {
        JobSpec s;
        CAPTURE(yaml);
        REQUIRE(parse_spec(yaml, "a.yaml", s) == "");
        CHECK(s.fatal_exit == "3,7");
        const auto argv = sbatch_argv(s, "r", "alpha", "", "/tmp/x.sh");
        CHECK(std::find(argv.begin(), argv.end(), "--shardnet-fatal-exit=3,7") != argv.end());
        CHECK(manifest_of(s).at("fatal_exit").as_string() == "3,7");
    }
    JobSpec one;
    REQUIRE(parse_spec("command: x\nfatal_exit: 42\n", "a.yaml", one) == "");
    CHECK(one.fatal_exit == "42");
    JobSpec none;
    REQUIRE(parse_spec("command: x\n", "a.yaml", none) == "");
    const auto argv = sbatch_argv(none, "r", "alpha", "", "/tmp/x.sh");
    CHECK(std::none_of(argv.begin(), argv.end(), [](const std::string &a) { return a.rfind("--shardnet-fatal-exit", 0) == 0; }));
    for (const char *bad : {"[0]", "[256]", "[3, x]", "[[3]]", "\"\"", "{a: 3}", "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]"}) {
        JobSpec s;
        CAPTURE(bad);
        CHECK(parse_spec(std::string("command: x\nfatal_exit: ") + bad + "\n", "a.yaml", s) ==
              "a.yaml:2:13: fatal_exit: expected exit codes from 1 to 255, at most 16 (e.g. [3, 7])");
    }
}

TEST_CASE("spares: the job holds them beside its ranks' nodes, with no-kill, and runs the step through shard launch") {
    JobSpec s;
    REQUIRE(parse_spec("command: train.py\nnodes: 2\nspares: 1\n", "a.yaml", s) == "");
    REQUIRE(resolve_shape(s) == "");
    const auto argv = sbatch_argv(s, "r", "alpha", "", "/tmp/x.sh");
    auto has = [&](const std::string &a) { return std::find(argv.begin(), argv.end(), a) != argv.end(); };
    CHECK(has("--nodes=3"));
    CHECK(has("--no-kill"));
    CHECK(has("--shardnet-spares=1"));
    CHECK(batch_script(s, "/usr/bin/shard").find("exec '/usr/bin/shard' launch -- train.py\n") != std::string::npos);
    // The path of shard is one word whatever it holds.
    CHECK(batch_script(s, "/opt/my tools/it's/shard").find("exec '/opt/my tools/it'\\''s/shard' launch -- train.py\n") != std::string::npos);
    CHECK(manifest_of(s).at("spares").as_int64() == 1);
    JobSpec none;
    REQUIRE(parse_spec("command: train.py\nnodes: 2\n", "a.yaml", none) == "");
    REQUIRE(resolve_shape(none) == "");
    CHECK(batch_script(none, "/usr/bin/shard").find("exec srun train.py\n") != std::string::npos);
    const auto plain = sbatch_argv(none, "r", "alpha", "", "/tmp/x.sh");
    CHECK(std::find(plain.begin(), plain.end(), "--no-kill") == plain.end());
    JobSpec bad;
    CHECK(parse_spec("command: x\nspares: 65\n", "a.yaml", bad).find("spares") != std::string::npos);
}

TEST_CASE("straggler: replace swaps a named straggler for a spare (--shardnet-straggler=replace); it needs spares") {
    JobSpec s;
    REQUIRE(parse_spec("command: train.py\nnodes: 3\nspares: 1\nstraggler: replace\n", "a.yaml", s) == "");
    REQUIRE(resolve_shape(s) == "");
    const auto argv = sbatch_argv(s, "r", "alpha", "", "/tmp/x.sh");
    CHECK(std::find(argv.begin(), argv.end(), "--shardnet-straggler=replace") != argv.end());
    CHECK(manifest_of(s).at("straggler").as_string() == "replace");
    JobSpec report;
    REQUIRE(parse_spec("command: train.py\nspares: 1\nstraggler: report\n", "a.yaml", report) == "");
    const auto plain = sbatch_argv(report, "r", "alpha", "", "/tmp/x.sh");
    CHECK(std::none_of(plain.begin(), plain.end(), [](const std::string &a) { return a.rfind("--shardnet-straggler", 0) == 0; }));
    CHECK_FALSE(manifest_of(report).contains("straggler"));
    JobSpec bad;
    CHECK(parse_spec("command: x\nstraggler: replace\n", "a.yaml", bad) ==
          "a.yaml:2:12: straggler: replace needs spares (a spare takes the slow node's place)");
    bad = {};
    CHECK(parse_spec("command: x\nspares: 1\nstraggler: swap\n", "a.yaml", bad).find("a.yaml:3:12: straggler: expected one of") == 0);
}
