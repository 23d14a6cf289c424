// shardnet-oci-user USER RUNTIME ARGS...: the front of oci.conf's
// RunTimeQuery, RunTimeKill, RunTimeDelete (which Slurm 22.05 runs as root)
// and RunTimeRun (as the job's user), e.g.
//   RunTimeKill="/usr/libexec/shardnet/shardnet-oci-user %u crun --rootless=true --root=/run/crun-slurm/%u kill -a ID SIGTERM"
// As root: the runtime's state dir (--root=PARENT/USER) checked, made and
// given to USER when missing (PARENT root's, mode 0755), then the runtime
// runs as USER (its groups, gid and uid; no way back to root). A root crun
// reading a state dir its user could write would kill whatever pid that user
// wrote there (slurmd, another user's task); as the user it can signal only
// the user's own processes. As USER itself: the state dir checked, then the
// runtime. As anyone else: refused.
//
// shardnet-oci-user --prepare PARENT USER: as root, PARENT/USER made ready
// for USER's runtime (from the Prolog: RunTimeRun runs as the user, who
// cannot make a dir in a root-owned PARENT; doc/containers.md).
//
// Exit 125 with the reason on stderr when refused; else the runtime's.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <grp.h>
#include <pwd.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "spank/oci_state.hpp"

namespace {

int refuse(const std::string &why) {
    std::fprintf(stderr, "shardnet-oci-user: error: %s\n", why.c_str());
    return 125;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc >= 2 && std::string(argv[1]) == "--prepare") {
        if (argc != 4) return refuse("usage: shardnet-oci-user --prepare PARENT USER");
        struct passwd pw, *r = nullptr;
        char buf[4096];
        if (getpwnam_r(argv[3], &pw, buf, sizeof buf, &r) != 0 || !r) return refuse(std::string("no such user ") + argv[3]);
        if (::geteuid() != 0) return refuse("--prepare is root's (the Prolog)");
        const std::string err = shardnet::oci::prepare_state_dir(std::string(argv[2]) + "/" + argv[3], argv[3], pw.pw_uid, pw.pw_gid, true);
        return err.empty() ? 0 : refuse(err);
    }
    if (argc < 3) return refuse("usage: shardnet-oci-user USER RUNTIME ARGS... (oci.conf's RunTime*; see doc/containers.md)");
    const std::string user = argv[1];
    std::vector<std::string> args(argv + 2, argv + argc);
    struct passwd pw, *r = nullptr;
    char buf[4096];
    if (getpwnam_r(user.c_str(), &pw, buf, sizeof buf, &r) != 0 || !r) return refuse("no such user " + user);
    const uid_t uid = pw.pw_uid;
    const gid_t gid = pw.pw_gid;
    const bool root = ::geteuid() == 0;
    if (!root && ::getuid() != uid) return refuse("run as uid " + std::to_string(::getuid()) + ", not as root or " + user);
    if (const std::string state = shardnet::oci::state_root_arg(args); !state.empty()) {
        if (auto err = shardnet::oci::prepare_state_dir(state, user, uid, gid, root); !err.empty()) return refuse(err);
    } else {
        return refuse("the runtime's arguments name no --root=PARENT/%u (each user's own state dir)");
    }
    if (root && uid != 0) {
        if (::initgroups(user.c_str(), gid) != 0) return refuse("initgroups(" + user + "): " + std::strerror(errno));
        if (::setresgid(gid, gid, gid) != 0) return refuse("setresgid: " + std::string(std::strerror(errno)));
        if (::setresuid(uid, uid, uid) != 0) return refuse("setresuid: " + std::string(std::strerror(errno)));
        if (::geteuid() != uid || ::setuid(0) == 0) return refuse("could not drop root for " + user);
    }
    std::vector<char *> av;
    for (auto &a : args) av.push_back(a.data());
    av.push_back(nullptr);
    ::execvp(av[0], av.data());
    std::fprintf(stderr, "shardnet-oci-user: cannot run %s: %s\n", av[0], std::strerror(errno));
    return 127;
}
