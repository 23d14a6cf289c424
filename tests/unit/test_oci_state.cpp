#include <doctest/doctest.h>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "spank/oci_state.hpp"

using namespace shardnet::oci;

TEST_CASE("the runtime's state dir in oci.conf's command: --root=DIR or --root DIR") {
    CHECK(state_root_arg({"crun", "--rootless=true", "--root=/run/crun-slurm/alice", "state", "id"}) == "/run/crun-slurm/alice");
    CHECK(state_root_arg({"/x/shardnet-oci-run", "crun", "--root", "/s/bob", "run", "--bundle", "/b", "id"}) == "/s/bob");
    CHECK(state_root_arg({"crun", "state", "id"}) == "");
}

TEST_CASE("a user's runtime state dir: PARENT root's and nobody else's to write, USER's dir made by root and given to USER") {
    char t[] = "/tmp/test-oci-state-XXXXXX";
    const std::string top = mkdtemp(t), parent = top + "/crun", dir = parent + "/alice";
    const uid_t me = ::getuid();
    const gid_t mg = ::getgid();
    // Someone else's name, a relative path: refused before anything is made.
    CHECK(prepare_state_dir(parent + "/bob", "alice", me, mg, true).find("not named after the job's user alice") != std::string::npos);
    CHECK(prepare_state_dir("crun/alice", "alice", me, mg, true).find("not an absolute") != std::string::npos);
    if (me == 0) {
        // As root (Prolog, RunTimeQuery/Kill/Delete): made, the parent 0755, the user's 0700 and the user's.
        const uid_t alice = 4242;
        REQUIRE(prepare_state_dir(dir, "alice", alice, alice, true) == "");
        struct stat st;
        REQUIRE(::lstat(parent.c_str(), &st) == 0);
        CHECK((st.st_mode & 07777) == 0755);
        CHECK(st.st_uid == 0);
        REQUIRE(::lstat(dir.c_str(), &st) == 0);
        CHECK((st.st_mode & 07777) == 0700);
        CHECK(st.st_uid == alice);
        CHECK(prepare_state_dir(dir, "alice", alice, alice, true) == "");   // again: as it is
        // Another user's dir where alice's should be (a 1777 parent let them make it first): refused.
        CHECK(prepare_state_dir(dir, "alice", 4343, 4343, true).find("belongs to uid 4242, not to alice (uid 4343)") != std::string::npos);
        // The parent as the old setup had it, 1777: refused, whatever is in it.
        ::chmod(parent.c_str(), 01777);
        CHECK(prepare_state_dir(dir, "alice", alice, alice, true).find("writable by group or others (mode 1777)") != std::string::npos);
        ::chmod(parent.c_str(), 0755);
        // A symlink planted as the user's dir.
        ::rmdir(dir.c_str());
        CHECK(::symlink("/etc", dir.c_str()) == 0);
        CHECK(prepare_state_dir(dir, "alice", alice, alice, true).find("is a symlink") != std::string::npos);
        ::unlink(dir.c_str());
        // A parent that is not root's.
        (void)!::chown(parent.c_str(), alice, alice);
        CHECK(prepare_state_dir(dir, "alice", alice, alice, true).find("is not root's (uid 4242)") != std::string::npos);
        (void)!::chown(parent.c_str(), 0, 0);
        // Without create (the user's own RunTimeRun): a missing dir is said, not made.
        CHECK(prepare_state_dir(dir, "alice", alice, alice, false).find("no state dir " + dir + " for alice") == 0);
    }
    (void)!std::system(("rm -rf " + top).c_str());
}
