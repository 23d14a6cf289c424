#include "spank/oci_state.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shardnet::oci {

std::string state_root_arg(const std::vector<std::string> &args) {
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--root" && i + 1 < args.size()) return args[i + 1];
        if (args[i].rfind("--root=", 0) == 0) return args[i].substr(7);
    }
    return "";
}

namespace {

std::string mode_of(mode_t m) {
    char b[8];
    std::snprintf(b, sizeof b, "%04o", unsigned(m & 07777));
    return b;
}

}  // namespace

std::string prepare_state_dir(const std::string &dir_in, const std::string &user, uid_t uid, gid_t gid, bool create) {
    std::string dir = dir_in;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const auto slash = dir.rfind('/');
    if (dir.empty() || dir[0] != '/' || slash == 0 || slash == std::string::npos || dir.find("/../") != std::string::npos ||
        dir.find("/./") != std::string::npos)
        return "the runtime's state dir '" + dir_in + "' is not an absolute PARENT/USER path";
    const std::string parent = dir.substr(0, slash), name = dir.substr(slash + 1);
    if (name != user)
        return "the runtime's state dir " + dir + " is not named after the job's user " + user +
               " (oci.conf: --root=PARENT/%u, each user's own)";
    struct stat st;
    if (::lstat(parent.c_str(), &st) != 0 && errno == ENOENT && create) {
        if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) return "cannot make " + parent + ": " + std::strerror(errno);
        ::chmod(parent.c_str(), 0755);   // whatever the umask
    }
    if (::lstat(parent.c_str(), &st) != 0) return "cannot stat " + parent + ": " + std::strerror(errno);
    if (!S_ISDIR(st.st_mode)) return parent + " (the runtime's state parent) is not a directory";
    if (st.st_uid != 0) return parent + " (the runtime's state parent) is not root's (uid " + std::to_string(st.st_uid) + ")";
    if (st.st_mode & 022)
        return parent + " (the runtime's state parent) is writable by group or others (mode " + mode_of(st.st_mode) +
               "): any user could make or replace another's state dir there; make it root's, mode 0755 (doc/containers.md)";
    if (::lstat(dir.c_str(), &st) != 0 && errno == ENOENT && create) {
        if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return "cannot make " + dir + ": " + std::strerror(errno);
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return "cannot open " + dir + ": " + std::strerror(errno);
        const bool ok = ::fchown(fd, uid, gid) == 0 && ::fchmod(fd, 0700) == 0;
        const int e = errno;
        ::close(fd);
        if (!ok) return "cannot give " + dir + " to uid " + std::to_string(uid) + ": " + std::strerror(e);
    }
    if (::lstat(dir.c_str(), &st) != 0)
        return "no state dir " + dir + " for " + user + " (" + std::strerror(errno) +
               "): root makes it, before the step (the Prolog, doc/containers.md)";
    if (S_ISLNK(st.st_mode)) return dir + " (the runtime's state dir) is a symlink";
    if (!S_ISDIR(st.st_mode)) return dir + " (the runtime's state dir) is not a directory";
    if (st.st_uid != uid)
        return dir + " (the runtime's state dir) belongs to uid " + std::to_string(st.st_uid) + ", not to " + user + " (uid " +
               std::to_string(uid) + ")";
    if (st.st_mode & 022) return dir + " (the runtime's state dir) is writable by group or others (mode " + mode_of(st.st_mode) + ")";
    return "";
}

}  // namespace shardnet::oci
