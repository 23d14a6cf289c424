#include <boost/json.hpp>
#include <cstdio>
#include <doctest/doctest.h>
#include <unistd.h>

#include "heartbeat.hpp"

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
}
