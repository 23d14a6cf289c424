// SlurmCalls with real commands standing in for scontrol: what matters here
// is which calls reach a process at all.
#include <chrono>
#include <doctest/doctest.h>
#include <unistd.h>

#include "broker/slurm/slurm_calls.hpp"

using namespace shardnet::broker;

TEST_CASE("Slurm queries are reused within cache_ms; changes are not and drop the cache") {
    SlurmCalls calls(60000, 1000, false);
    std::string a, b, c, d;
    REQUIRE(calls.query("/conf/a", {"date", "+%s%N"}, a) == 0);
    REQUIRE(calls.query("/conf/a", {"date", "+%s%N"}, b) == 0);
    CHECK(a == b);
    CHECK(calls.calls() == 1);
    CHECK(calls.cache_hits() == 1);
    REQUIRE(calls.query("/conf/b", {"date", "+%s%N"}, c) == 0);  // another cluster: its own answer
    CHECK(calls.calls() == 2);
    std::string ignored;
    REQUIRE(calls.change("/conf/a", {"true"}, ignored) == 0);
    REQUIRE(calls.query("/conf/a", {"date", "+%s%N"}, d) == 0);
    CHECK(d != a);
    CHECK(calls.calls() == 4);
    CHECK(calls.query("/conf/a", {"false"}, ignored) == 1);  // exit status kept
}

TEST_CASE("a fresh query is always asked, refreshes its answer and leaves the others cached") {
    SlurmCalls calls(60000, 1000, false);
    std::string a, other, b, c, other2;
    REQUIRE(calls.query("/conf/a", {"date", "+%s%N"}, a) == 0);
    REQUIRE(calls.query("/conf/a", {"echo", "other"}, other) == 0);
    REQUIRE(calls.fresh("/conf/a", {"date", "+%s%N"}, b) == 0);
    CHECK(b != a);
    CHECK(calls.calls() == 3);
    REQUIRE(calls.query("/conf/a", {"date", "+%s%N"}, c) == 0);  // the fresh answer, from the cache
    CHECK(c == b);
    REQUIRE(calls.query("/conf/a", {"echo", "other"}, other2) == 0);
    CHECK(calls.calls() == 3);
    CHECK(calls.cache_hits() == 2);
}

TEST_CASE("calls to one cluster are throttled to max_per_second") {
    SlurmCalls calls(0, 3, false);
    std::string out;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i) REQUIRE(calls.change("/conf/a", {"true"}, out) == 0);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(took >= 0.9);  // the fourth waited for the first to leave the one-second window
    CHECK(calls.calls() == 4);
}

TEST_CASE("a cluster whose slurmctld does not answer ping fails calls without running them") {
    // A real Slurm config whose controller port nobody listens on.
    char path[] = "/tmp/shardnet-dead-slurm-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const std::string conf = "ClusterName=dead\nSlurmctldHost=localhost\nSlurmctldPort=1\nAuthType=auth/munge\n"
                             "NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n";
    REQUIRE(write(fd, conf.data(), conf.size()) == ssize_t(conf.size()));
    close(fd);
    SlurmCalls calls(0, 1000);
    std::string out;
    CHECK(calls.change(path, {"touch", std::string(path) + ".ran"}, out) == -1);
    CHECK(out == "slurmctld is down (scontrol ping)");
    CHECK(access((std::string(path) + ".ran").c_str(), F_OK) != 0);   // never run
    CHECK(calls.query(path, {"true"}, out) == -1);  // the ping is remembered
    CHECK(calls.calls() == 1);
    unlink(path);
}

TEST_CASE("run_slurm and run_slurm_as: output, exit status, input larger than a pipe, and the user's own rights") {
    std::string out;
    CHECK(run_slurm("/nonexistent.conf", {"sh", "-c", "echo \"$SLURM_CONF\"; exit 3"}, out) == 3);
    CHECK(out == "/nonexistent.conf\n");
    out.clear();
    CHECK(run_slurm("/c", {"sh", "-c", "echo err >&2"}, out, true) == 0);
    CHECK(out == "err\n");
    if (geteuid() != 0) return;   // dropping to another uid needs root
    // 1 MB on stdin (a pipe holds 64 KB): written and read in turn; the
    // answer is kept up to 64 KB.
    const std::string big(1 << 20, 'x');
    out.clear();
    CHECK(run_slurm_as("/c", {"wc", "-c"}, RunAs{1, 1, big, {}}, out) == 0);
    CHECK(out == "1048576\n");
    out.clear();
    CHECK(run_slurm_as("/c", {"id", "-u"}, RunAs{1, 1, "", {}}, out) == 0);
    CHECK(out == "1\n");
    out.clear();
    CHECK(run_slurm_as("/c", {"cat"}, RunAs{1, 1, big, {}}, out) == 0);
    CHECK(out.size() >= 65536);
    CHECK(out.size() < 65536 + 4096);
    CHECK(run_slurm_as("/c", {"id"}, RunAs{0, 0, "", {}}, out) == -1);   // never as root
    // A third input on descriptor 3 (sbatch --export-file=3), and no other
    // of the broker's descriptors.
    out.clear();
    CHECK(run_slurm_as("/c", {"sh", "-c", "cat <&3; ls /proc/self/fd | wc -l"}, RunAs{1, 1, "", std::string("A=1\0B=2", 7)}, out) == 0);
    CHECK(out == std::string("A=1\0B=2", 7) + "5\n");   // 0, 1, 2, 3 and ls's own directory
}
