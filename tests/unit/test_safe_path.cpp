#include <cstdlib>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checkpoint_layout.hpp"
#include "common/safe_path.hpp"

using namespace shardnet;

namespace {
struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/shardnet-test-XXXXXX";
        path = mkdtemp(tmpl);
    }
    ~TempDir() { if (std::system(("rm -rf '" + path + "'").c_str()) != 0) {} }
};
}  // namespace

TEST_CASE("path syntax") {
    CHECK(check_path_syntax("/a/b") == "");
    CHECK(check_path_syntax("a/b").find("not absolute") != std::string::npos);
    CHECK(check_path_syntax("/a/./b").find("'.'") != std::string::npos);
    CHECK(check_path_syntax("/a/../b").find("'..'") != std::string::npos);
    CHECK(check_path_syntax("").find("empty") != std::string::npos);
    CHECK(check_path_syntax(std::string("/a\nb")).find("control") != std::string::npos);
    CHECK(path_components("//a///b/") == std::vector<std::string>{"a", "b"});
    CHECK(path_is_under("/a/b/c", "/a/b"));
    CHECK(path_is_under("/a/b", "/a/b/"));
    CHECK_FALSE(path_is_under("/a/bc", "/a/b"));
    CHECK_FALSE(path_is_under("/a", "/a/b"));
}

TEST_CASE("directories are made below the anchor, owned by the caller") {
    TempDir t;
    uid_t me = getuid();
    std::string home = t.path + "/home";
    mkdir(home.c_str(), 0700);
    CHECK(make_user_dir(home + "/ckpt/run1", "", home, me, true) == "");
    struct stat st;
    REQUIRE(stat((home + "/ckpt/run1").c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK(st.st_uid == me);
    CHECK((st.st_mode & 0777) == 0700);
    // Idempotent: Slurm may run us twice.
    CHECK(make_user_dir(home + "/ckpt/run1", "", home, me, true) == "");
}

TEST_CASE("a symlink anywhere below the anchor is refused") {
    TempDir t;
    uid_t me = getuid();
    std::string home = t.path + "/home", other = t.path + "/other";
    mkdir(home.c_str(), 0700);
    mkdir(other.c_str(), 0700);
    REQUIRE(symlink(other.c_str(), (home + "/link").c_str()) == 0);
    auto err = make_user_dir(home + "/link/run", "", home, me, true);
    CHECK(err.find("is a symlink") != std::string::npos);
    struct stat st;
    CHECK(stat((other + "/run").c_str(), &st) != 0);  // nothing was created through it
    // Checking without creating refuses it too.
    CHECK(make_user_dir(home + "/link/run", "", home, me, false).find("symlink") != std::string::npos);
}

TEST_CASE("outside the root and the home is refused; so is another owner") {
    TempDir t;
    uid_t me = getuid();
    std::string home = t.path + "/home", root = t.path + "/scratch";
    mkdir(home.c_str(), 0700);
    mkdir(root.c_str(), 0777);
    CHECK(make_user_dir("/etc/shardnet", root, home, me, true).find("is outside the site checkpoint root") !=
          std::string::npos);
    CHECK(make_user_dir(root + "/u/run", root, home, me, true) == "");
    // A directory owned by someone else, below the root: refused by owner check.
    CHECK(make_user_dir(root + "/u/run", root, home, me + 1, true).find("not to the job user") != std::string::npos);
    // The home must be the user's own.
    CHECK(make_user_dir(home + "/x", "", home, me + 1, true).find("not the job user's own") != std::string::npos);
    // The root itself is not a checkpoint dir.
    CHECK(make_user_dir(root, root, home, me, true).find("outside") != std::string::npos);
}

TEST_CASE("latest sealed checkpoint") {
    TempDir t;
    std::string d = t.path;
    for (const char *c : {"checkpoint-001", "checkpoint-002", "checkpoint-003"}) mkdir((d + "/" + c).c_str(), 0700);
    close(open((d + "/checkpoint-001/SEALED").c_str(), O_CREAT | O_WRONLY, 0600));
    close(open((d + "/checkpoint-002/SEALED").c_str(), O_CREAT | O_WRONLY, 0600));
    // 003 is not sealed; a symlinked "checkpoint-009" must not count.
    REQUIRE(symlink((d + "/checkpoint-002").c_str(), (d + "/checkpoint-009").c_str()) == 0);
    CHECK(latest_sealed_checkpoint(d) == d + "/checkpoint-002");
    CHECK(resolve_resume("latest", d) == d + "/checkpoint-002");
    CHECK(resolve_resume("checkpoint-001", d) == d + "/checkpoint-001");
    CHECK(resolve_resume("/abs/ckpt", d) == "/abs/ckpt");
    CHECK(resolve_resume("", d) == "");
    CHECK(latest_sealed_checkpoint(d + "/missing") == "");
}

TEST_CASE("read_small_file reads regular files only, whole and bounded") {
    TempDir t;
    const std::string f = t.path + "/m";
    { FILE *fp = fopen(f.c_str(), "w"); fputs("{\"files\":[]}", fp); fclose(fp); }
    std::string out;
    CHECK(read_small_file(f, 1024, out) == "");
    CHECK(out == "{\"files\":[]}");
    std::string err = read_small_file(f, 4, out);
    CHECK(err.find("is 12 bytes; at most 4") != std::string::npos);
    CHECK(out.empty());
    REQUIRE(symlink(f.c_str(), (t.path + "/link").c_str()) == 0);
    CHECK(read_small_file(t.path + "/link", 1024, out).find("cannot open") != std::string::npos);
    REQUIRE(mkfifo((t.path + "/fifo").c_str(), 0600) == 0);
    CHECK(read_small_file(t.path + "/fifo", 1024, out).find("not a regular file") != std::string::npos);  // and no hang
    CHECK(read_small_file(t.path, 1024, out).find("not a regular file") != std::string::npos);
    CHECK(read_small_file(t.path + "/none", 1024, out).find("'" + t.path + "/none'") != std::string::npos);
}

TEST_CASE("the step root: made when missing, refused when a symlink, foreign or open to all") {
    TempDir t;
    const uid_t me = geteuid();
    const std::string root = t.path + "/run-shardnet";
    int fd = -1;
    REQUIRE(open_step_root(root, me, true, &fd) == "");
    CHECK(fd >= 0);
    close(fd);
    struct stat st;
    REQUIRE(stat(root.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
    CHECK(open_step_root(t.path + "/missing", me, false, nullptr).find("cannot open") != std::string::npos);

    REQUIRE(symlink(root.c_str(), (t.path + "/link").c_str()) == 0);
    CHECK(open_step_root(t.path + "/link", me, true, nullptr).find("is a symlink") != std::string::npos);
    CHECK(open_step_root(root, me + 1, true, nullptr).find("belongs to uid") != std::string::npos);
    REQUIRE(chmod(root.c_str(), 0777) == 0);
    CHECK(open_step_root(root, me, true, nullptr).find("without the sticky bit") != std::string::npos);
    REQUIRE(chmod(root.c_str(), 01777) == 0);  // like /tmp: fine, names are made exclusively
    CHECK(open_step_root(root, me, true, nullptr) == "");
    REQUIRE(chmod(root.c_str(), 0700) == 0);
    CHECK(open_step_root(root, me, true, nullptr).find("not searchable") != std::string::npos);
    REQUIRE(mkfifo((t.path + "/fifo").c_str(), 0644) == 0);
    CHECK(open_step_root(t.path + "/fifo", me, true, nullptr) != "");
}

TEST_CASE("step dirs are fresh, private, handed to the user, and removed without following symlinks") {
    TempDir t;
    const uid_t me = geteuid();
    const std::string root = t.path + "/r";
    int fd = -1;
    REQUIRE(open_step_root(root, me, true, &fd) == "");
    StepDir a, b;
    REQUIRE(make_step_dir(fd, "alpha.7.0.n0", me, getegid(), a) == "");
    REQUIRE(make_step_dir(fd, "alpha.7.0.n0", me, getegid(), b) == "");
    CHECK(a.name != b.name);  // the same step's prefix twice: two dirs, never a shared one
    CHECK(a.name.rfind("alpha.7.0.n0.", 0) == 0);
    struct stat st;
    REQUIRE(stat((root + "/" + a.name).c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
    CHECK(st.st_uid == me);

    // What the user leaves: files, a subdir, a symlink to something that must survive.
    const std::string keep = t.path + "/keep";
    REQUIRE(mkdir(keep.c_str(), 0755) == 0);
    REQUIRE(close(open((keep + "/precious").c_str(), O_CREAT | O_WRONLY, 0644)) == 0);
    const std::string d = root + "/" + a.name;
    REQUIRE(close(open((d + "/rank-0").c_str(), O_CREAT | O_WRONLY, 0644)) == 0);
    REQUIRE(mkdir((d + "/sub").c_str(), 0755) == 0);
    REQUIRE(close(open((d + "/sub/f").c_str(), O_CREAT | O_WRONLY, 0644)) == 0);
    REQUIRE(symlink(keep.c_str(), (d + "/link").c_str()) == 0);
    REQUIRE(symlink(keep.c_str(), (d + "/sub/link").c_str()) == 0);
    CHECK(remove_step_dir(root, a) == "");
    CHECK(access(d.c_str(), F_OK) != 0);
    CHECK(access((keep + "/precious").c_str(), F_OK) == 0);

    // Replaced by something else (a symlink to keep): left alone.
    REQUIRE(rmdir((root + "/" + b.name).c_str()) == 0);
    REQUIRE(symlink(keep.c_str(), (root + "/" + b.name).c_str()) == 0);
    CHECK(remove_step_dir(root, b).find("no longer the step's dir") != std::string::npos);
    CHECK(access((keep + "/precious").c_str(), F_OK) == 0);
    StepDir bad = b;
    bad.name = "../keep";
    CHECK(remove_step_dir(root, bad) == "no step dir");
    close(fd);
}
