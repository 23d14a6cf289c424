#include <boost/json.hpp>
#include <cstdio>
#include <doctest/doctest.h>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checkpoint_layout.hpp"
#include "spank/heartbeat.hpp"

using namespace shardnet;

TEST_CASE("progress files: first integer token, nothing else") {
    char tmpl[] = "/tmp/shardnet-progress-XXXXXX";
    int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    std::string path = tmpl;
    auto put = [&](const char *s) {
        REQUIRE(ftruncate(fd, 0) == 0);
        REQUIRE(pwrite(fd, s, strlen(s), 0) == ssize_t(strlen(s)));
    };
    double mt = 0;
    put("1234\n");
    CHECK(read_progress(path, &mt) == 1234);
    CHECK(mt > 0);
    put("  77 loss=0.3\n");
    CHECK(read_progress(path, nullptr) == 77);
    bool ckpt = true;
    CHECK(read_progress(path, nullptr, &ckpt) == 77);
    CHECK_FALSE(ckpt);
    put("78 checkpointing\n");
    CHECK(read_progress(path, nullptr, &ckpt) == 78);
    CHECK(ckpt);
    put("-5");
    CHECK_FALSE(read_progress(path, nullptr));
    put("step");
    CHECK_FALSE(read_progress(path, nullptr));
    put("");
    CHECK_FALSE(read_progress(path, nullptr));
    std::string link = path + ".lnk";
    REQUIRE(symlink(path.c_str(), link.c_str()) == 0);
    put("9");
    CHECK_FALSE(read_progress(link, nullptr));  // never through a symlink
    CHECK_FALSE(read_progress("/nonexistent/x", nullptr));
    close(fd);
    unlink(link.c_str());
    unlink(path.c_str());
}

TEST_CASE("heartbeat body carries run, ranks, steps and exits") {
    AgentConfig c;
    c.run = "r1";
    c.attempt = 2;
    c.cluster = "beta";
    c.node = "beta2";
    c.job = 99;
    c.step = "0";
    c.interval = 5;
    std::vector<RankState> ranks(2);
    ranks[0].rank = 2;
    ranks[0].pid = 100;
    ranks[0].step = 41;
    ranks[0].progress_time = 90;
    ranks[1].rank = 3;
    ranks[1].local_rank = 1;
    ranks[1].wait_status = 9;  // killed by SIGKILL
    auto v = boost::json::parse(heartbeat_json(c, ranks, "running", 7, 100.0, false)).as_object();
    CHECK(v.at("run").as_string() == "r1");
    CHECK(v.at("attempt").to_number<int>() == 2);
    CHECK(v.at("node").as_string() == "beta2");
    CHECK(v.at("seq").to_number<int>() == 7);
    CHECK(v.at("state").as_string() == "running");
    auto &rs = v.at("ranks").as_array();
    REQUIRE(rs.size() == 2);
    CHECK(rs[0].at("step").to_number<int>() == 41);
    CHECK(rs[0].at("progress_age").to_number<double>() == doctest::Approx(10.0));
    CHECK(rs[0].at("exit").is_null());
    CHECK(rs[1].at("step").is_null());
    CHECK(rs[1].at("exit").at("signal").to_number<int>() == 9);
    CHECK(rs[1].at("exit").at("code").is_null());
    ranks[1].wait_status = 3 << 8;  // exit(3)
    auto w = boost::json::parse(heartbeat_json(c, ranks, "ended", 8, 100.0, true)).as_object();
    CHECK(w.at("ranks").as_array()[1].at("exit").at("code").to_number<int>() == 3);
    CHECK(w.at("prelimit_signalled").as_bool());
    CHECK_FALSE(w.contains("fatal_exit"));
    CHECK_FALSE(w.contains("stderr_tail"));
    // A step's own word on which codes are not to be retried, and the
    // batch script's tail, as JSON text (the newline escaped, never raw).
    c.fatal_exit = {3, 42};
    const std::string body = heartbeat_json(c, ranks, "ended", 9, 100.0, false, 0, "Traceback:\nValueError: \"bad\" <b>");
    CHECK(body.find("\"stderr_tail\":\"Traceback:\\nValueError: \\\"bad\\\" <b>\"") != std::string::npos);
    auto x = boost::json::parse(body).as_object();
    CHECK(x.at("fatal_exit") == boost::json::array{3, 42});
    CHECK(x.at("stderr_tail").as_string() == "Traceback:\nValueError: \"bad\" <b>");
}

TEST_CASE("a finished checkpoint in the progress file, and its manifest as a commit body") {
    char tmpl[] = "/tmp/shardnet-progress-XXXXXX";
    int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    const char *text = "120 committed checkpoint-012\n";
    REQUIRE(write(fd, text, strlen(text)) == ssize_t(strlen(text)));
    close(fd);
    std::string committed;
    bool ckpt = true;
    auto step = read_progress(tmpl, nullptr, &ckpt, &committed);
    REQUIRE(step);
    CHECK(*step == 120);
    CHECK_FALSE(ckpt);
    CHECK(committed == "checkpoint-012");
    FILE *f = fopen(tmpl, "w");
    fputs("121 committed ../../etc\n", f);
    fclose(f);
    committed.clear();
    read_progress(tmpl, nullptr, nullptr, &committed);
    CHECK(committed.empty());   // not a checkpoint name: ignored
    unlink(tmpl);

    std::string err;
    const std::string h(64, 'a');
    auto body = commit_json(h + " 1024 rank-0.pt\n" + h + " 7 rank-0.rng\n", 2, 0, 4, err);
    CHECK(err.empty());
    auto v = boost::json::parse(body).as_object();
    CHECK(v.at("attempt").as_int64() == 2);
    CHECK(v.at("world_size").as_int64() == 4);
    CHECK(v.at("files").as_array().size() == 2);
    CHECK(v.at("files").as_array()[0].at("bytes").as_int64() == 1024);
    CHECK(commit_json("nothash 12 x\n", 1, 0, 1, err).empty());
    CHECK(err == "manifest line 1: expected 'SHA256 BYTES PATH'");
    CHECK(commit_json(h + " 1 ../escape\n", 1, 0, 1, err).empty());
    CHECK(commit_json("", 1, 0, 1, err).empty());
    CHECK(err == "manifest lists no files");
}

// What the Python library (python/shardnet) writes while a save runs after an
// earlier commit, and its manifest line (tests/python/test_shardnet.py pins
// the same strings on its side).
TEST_CASE("the Python library's progress line and manifest") {
    char tmpl[] = "/tmp/shardnet-progress-XXXXXX";
    int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    const char *text = "8 checkpointing committed checkpoint-00000010\n";
    REQUIRE(write(fd, text, strlen(text)) == ssize_t(strlen(text)));
    close(fd);
    std::string committed;
    bool ckpt = false;
    auto step = read_progress(tmpl, nullptr, &ckpt, &committed);
    unlink(tmpl);
    REQUIRE(step);
    CHECK(*step == 8);
    CHECK(ckpt);
    CHECK(committed == "checkpoint-00000010");
    std::string err;
    auto body = commit_json("245b8d90b348d3ea15a54379e63555b7d55c5c949a7488d3b5ea39358df2832a 14243 rank-0.pt\n", 1, 0, 1, err);
    CHECK(err.empty());
    auto files = boost::json::parse(body).as_object().at("files").as_array();
    REQUIRE(files.size() == 1);
    CHECK(files[0].at("path").as_string() == "rank-0.pt");
    CHECK(files[0].at("bytes").as_int64() == 14243);
}

TEST_CASE("the broker's checkpoint list: every listed name is sealed, with its marker line") {
    std::string err;
    auto list = sealed_checkpoints(R"({"checkpoints":[{"name":"checkpoint-00000100","attempt":1,"ranks":2,"parent":null,"sealed_at":5.5},
                                                       {"name":"checkpoint-00000200","attempt":2,"ranks":2,"parent":"checkpoint-00000100","sealed_at":9}]})",
                                   err);
    CHECK(err.empty());
    REQUIRE(list.size() == 2);
    CHECK(list[1].name == "checkpoint-00000200");
    auto m = boost::json::parse(list[1].marker).as_object();
    CHECK(m.at("sealed_by").as_string() == "broker");
    CHECK(m.at("attempt").as_int64() == 2);
    CHECK(m.at("parent").as_string() == "checkpoint-00000100");
    for (const char *bad : {"", "[]", R"({"checkpoints":{}})", R"({"checkpoints":[{"name":7}]})", R"({"checkpoints":[1]})"}) {
        err.clear();
        CHECK(sealed_checkpoints(bad, err).empty());
        CHECK_FALSE(err.empty());
    }
}

TEST_CASE("SEALED markers: only in a checkpoint directory of the run's dir, never through a symlink, never twice") {
    char tmpl[] = "/tmp/shardnet-seal-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    REQUIRE(mkdir((dir + "/checkpoint-1").c_str(), 0700) == 0);
    REQUIRE(mkdir((dir + "/elsewhere").c_str(), 0700) == 0);
    REQUIRE(symlink((dir + "/elsewhere").c_str(), (dir + "/checkpoint-2").c_str()) == 0);
    CHECK(latest_sealed_checkpoint(dir).empty());
    CHECK(mark_sealed(dir, "checkpoint-1", "{\"sealed_by\":\"broker\"}\n").empty());
    CHECK(latest_sealed_checkpoint(dir) == dir + "/checkpoint-1");
    CHECK(mark_sealed(dir, "checkpoint-1", "again").empty());   // there already: kept as it was
    char buf[64] = {};
    FILE *f = fopen((dir + "/checkpoint-1/SEALED").c_str(), "r");
    REQUIRE(f);
    CHECK(fread(buf, 1, sizeof buf - 1, f) > 0);
    fclose(f);
    CHECK(std::string(buf) == "{\"sealed_by\":\"broker\"}\n");
    CHECK_FALSE(mark_sealed(dir, "checkpoint-2", "x").empty());   // a symlink: refused
    CHECK(access((dir + "/elsewhere/SEALED").c_str(), F_OK) != 0);
    CHECK(mark_sealed(dir, "checkpoint-9", "x").empty());        // not on this node: nothing to do
    CHECK_FALSE(mark_sealed(dir, "../etc", "x").empty());
    CHECK_FALSE(mark_sealed(dir, "checkpoint-1/../../x", "x").empty());
    CHECK(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
}

TEST_CASE("checkpoint policy: the trainer's write time, the version sent, the broker's answer, the file's line") {
    char tmpl[] = "/tmp/shardnet-progress-XXXXXX";
    int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    const std::string path = tmpl;
    auto put = [&](const char *s) {
        REQUIRE(ftruncate(fd, 0) == 0);
        REQUIRE(pwrite(fd, s, strlen(s), 0) == ssize_t(strlen(s)));
    };
    std::string committed;
    double took = 0;
    put("20 committed checkpoint-000020 took 0.012345\n");   // what python/shardnet writes
    CHECK(read_progress(path, nullptr, nullptr, &committed, &took) == 20);
    CHECK(committed == "checkpoint-000020");
    CHECK(took == doctest::Approx(0.012345));
    put("21 committed checkpoint-000020\n");
    CHECK(read_progress(path, nullptr, nullptr, &committed, &took) == 21);
    CHECK(took == -1);   // not said: the agent times it itself
    for (const char *bad : {"22 committed c took -1\n", "22 committed c took lots\n", "22 committed c took 1e99\n", "22 committed c took \n"}) {
        put(bad);
        CHECK(read_progress(path, nullptr, nullptr, &committed, &took) == 22);
        CHECK(took == -1);
    }
    close(fd);
    unlink(path.c_str());

    AgentConfig c;
    c.run = "r";
    c.step = "0";
    c.ckpt_every = "auto";
    auto hb = boost::json::parse(heartbeat_json(c, {}, "running", 1, 0, false, 3)).as_object();
    CHECK(hb.at("policy").as_int64() == 3);
    CHECK(hb.at("ckpt_every").as_string() == "auto");
    c.ckpt_every = "50";
    hb = boost::json::parse(heartbeat_json(c, {}, "running", 1, 0, false, 3)).as_object();
    CHECK_FALSE(hb.contains("policy"));   // a fixed interval asks for none
    CHECK(hb.at("ckpt_every").as_string() == "50");

    std::string err;
    auto p = parse_policy_answer(R"({"policy":{"version":2,"every_steps":480,"seconds":96.5,"model":"daly"}})", err);
    REQUIRE(p);
    CHECK(p->version == 2);
    CHECK(p->every_steps == 480);
    CHECK(policy_file_text(*p) == "every_steps=480 version=2 seconds=96.500\n");
    for (const char *bad : {"", "{}", R"({"policy":{"version":0,"every_steps":4,"seconds":1}})", R"({"policy":{"version":1,"every_steps":0,"seconds":1}})",
                            R"({"policy":{"version":1,"every_steps":"4","seconds":1}})", R"({"policy":[]})"}) {
        err.clear();
        CHECK_FALSE(parse_policy_answer(bad, err));
        CHECK_FALSE(err.empty());
    }
}

namespace {
void write_file(const std::string &path, const std::string &text) {
    FILE *f = fopen(path.c_str(), "w");
    REQUIRE(f);
    fwrite(text.data(), 1, text.size(), f);
    fclose(f);
}
}  // namespace

TEST_CASE("the trainer's environment report: read field by field, never through a symlink; the ranks' report body") {
    char tmpl[] = "/tmp/shardnet-env-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    std::string err;
    CHECK_FALSE(read_environment_file(dir + "/rank-0.env", err));   // not written yet: ask again later
    CHECK(err.empty());
    // As python/shardnet/environment.py writes it (null: not known, left out).
    write_file(dir + "/rank-0.env", R"({"cuda": null, "python": "3.11.2", "torch": "1.13.0"})" "\n");
    auto env = read_environment_file(dir + "/rank-0.env", err);
    REQUIRE(env);
    CHECK(err.empty());
    CHECK(boost::json::parse(*env) == boost::json::parse(R"({"python":"3.11.2","torch":"1.13.0"})"));
    const std::pair<std::string, std::string> bad[] = {
        {"not json", "not JSON"},
        {R"({"torch":"1.13","LD_PRELOAD":"/tmp/x.so"})", ".LD_PRELOAD: unknown field"},
        {R"({"torch":"1.13\u0007"})", ".torch: expected 1-128 printable"},
        {R"({"torch":[1]})", ".torch: expected a string or null"},
        {std::string(5000, ' ') + "{}", "bytes"},
    };
    for (const auto &[text, why] : bad) {
        write_file(dir + "/rank-1.env", text);
        auto got = read_environment_file(dir + "/rank-1.env", err);
        INFO(text.substr(0, 60) << " -> " << err);
        REQUIRE(got);
        CHECK(*got == "null");   // the rank is reported without one
        CHECK(err.find(why) != std::string::npos);
    }
    REQUIRE(symlink((dir + "/rank-0.env").c_str(), (dir + "/rank-2.env").c_str()) == 0);
    auto linked = read_environment_file(dir + "/rank-2.env", err);
    REQUIRE(linked);
    CHECK(*linked == "null");
    CHECK_FALSE(err.empty());
    AgentConfig c;
    c.run = "r1";
    c.attempt = 2;
    c.world = 4;
    c.node = "b1";
    std::vector<RankState> ranks(2);
    ranks[0].rank = 2;
    ranks[0].environment = *env;
    ranks[1].rank = 3;
    ranks[1].environment = "null";
    CHECK(boost::json::parse(ranks_report_json(c, ranks)) ==
          boost::json::parse(R"({"attempt":2,"world_size":4,"node":"b1","ranks":[{"rank":2,"environment":{"python":"3.11.2","torch":"1.13.0"}},)"
                             R"({"rank":3,"environment":null}]})"));
    CHECK(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
}
