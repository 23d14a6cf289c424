#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "spank/oci_mounts.hpp"

namespace fs = std::filesystem;
using shardnet::oci::make_mount_points;
using shardnet::oci::mount_points;

namespace {
struct TempDir {
    fs::path p;
    TempDir() {
        char t[] = "/tmp/shardnet-mounts.XXXXXX";
        p = ::mkdtemp(t);
    }
    ~TempDir() { fs::remove_all(p); }
};
}  // namespace

TEST_CASE("mount points: each destination no earlier mount covers, relative to the absolute root") {
    TempDir host;
    fs::create_directories(host.p / "work");
    std::ofstream(host.p / "afile") << "x";
    const std::string cfg = R"({"root":{"path":"/b/rootfs","readonly":true},"mounts":[
        {"destination":"/tmp","type":"tmpfs","source":"tmpfs"},
        {"destination":"/proc","type":"proc","source":"proc"},
        {"destination":"/dev","type":"tmpfs","source":"tmpfs"},
        {"destination":"/dev/pts","type":"devpts","source":"devpts"},
        {"destination":"/tmp/slurm","type":"bind","source":"/tmp","options":["rbind"]},
        {"destination":"/home/alice/work","type":"bind","source":")" + (host.p / "work").string() + R"(","options":["rbind","rw"]},
        {"destination":"/etc/hosts","type":"bind","source":")" + (host.p / "afile").string() + R"(","options":["rbind"]},
        {"destination":"/x/../etc","type":"tmpfs","source":"tmpfs"},
        {"destination":"/proc/","type":"proc","source":"proc"},
        {"destination":"//var/./tmp","type":"tmpfs","source":"tmpfs"}]})";
    std::string rootfs;
    const auto dirs = mount_points(cfg, rootfs);
    CHECK(rootfs == "/b/rootfs");
    // /tmp/slurm lies in the task's tmpfs, /dev/pts in its /dev; /etc/hosts is a file's bind.
    const std::vector<std::string> want{"tmp", "proc", "dev", "home/alice/work", "var/tmp"};
    CHECK(dirs == want);

    CHECK(mount_points(R"({"root":{"path":"rootfs"},"mounts":[{"destination":"/proc"}]})", rootfs).empty());
    CHECK(rootfs.empty());
    CHECK(mount_points("not json", rootfs).empty());
    CHECK(mount_points(R"({"root":{"path":"/r"}})", rootfs).empty());
    CHECK(rootfs == "/r");
}

TEST_CASE("mount points are made in the rootfs; a symlink is not followed; tasks racing for them all succeed") {
    TempDir root, outside;
    fs::create_directories(root.p / "dev");
    fs::create_directory_symlink(outside.p, root.p / "escape");
    std::ofstream(root.p / "content") << "x";
    auto failed = make_mount_points(root.p.string(), {"proc", "dev", "home/alice/work", "escape/owned", "content/sub"});
    CHECK(fs::is_directory(root.p / "proc"));
    CHECK(fs::is_directory(root.p / "home/alice/work"));
    CHECK(fs::is_empty(outside.p));
    REQUIRE(failed.size() == 2);
    CHECK(failed[0].find("escape/owned: escape is no directory") == 0);
    CHECK(failed[1].find("content/sub: content is no directory") == 0);

    // Eight tasks of one digest starting at once: each finds every dir made.
    TempDir shared;
    const std::vector<std::string> dirs{"proc", "sys", "dev", "tmp", "var/tmp", "home/u/a/b/c/work"};
    std::vector<std::vector<std::string>> results(8);
    std::vector<std::thread> ts;
    for (size_t i = 0; i < results.size(); ++i) ts.emplace_back([&, i] { results[i] = make_mount_points(shared.p.string(), dirs); });
    for (auto &t : ts) t.join();
    for (const auto &r : results) CHECK(r.empty());
    for (const auto &d : dirs) CHECK(fs::is_directory(shared.p / d));

    const auto gone = make_mount_points("/nonexistent-rootfs", {"proc"});
    REQUIRE(gone.size() == 1);
    CHECK(gone[0].find("proc: cannot open the rootfs /nonexistent-rootfs") == 0);
}
