#include "common/safe_path.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/parse_util.hpp"

namespace shardnet {

std::string check_path_syntax(const std::string &p) {
    if (p.empty()) return "path is empty";
    if (p[0] != '/') return "path '" + p + "' is not absolute";
    if (p.size() >= PATH_MAX) return "path is longer than PATH_MAX";
    if (has_control_chars(p)) return "path has control characters";
    for (const auto &c : path_components(p))
        if (c == "." || c == "..") return "path '" + p + "' has a '" + c + "' component";
    return "";
}

std::vector<std::string> path_components(const std::string &p) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < p.size()) {
        while (i < p.size() && p[i] == '/') ++i;
        std::size_t j = p.find('/', i);
        if (j == std::string::npos) j = p.size();
        if (j > i) out.push_back(p.substr(i, j - i));
        i = j;
    }
    return out;
}

bool path_is_under(const std::string &path, const std::string &anchor) {
    auto a = path_components(anchor), p = path_components(path);
    if (p.size() < a.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i] != p[i]) return false;
    return true;
}

namespace {

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() { if (fd >= 0) ::close(fd); }
    int release() { int f = fd; fd = -1; return f; }
};

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

std::string open_dir_below(const std::string &anchor, const std::string &path, uid_t uid,
                           bool create, mode_t mode, int *fd_out) {
    if (auto err = check_path_syntax(path); !err.empty()) return err;
    if (auto err = check_path_syntax(anchor); !err.empty()) return "anchor " + err;
    // The anchor is site- or system-controlled (a checkpoint root, /tmp, a
    // home from passwd) and may legitimately sit behind a symlink.
    char real[PATH_MAX];
    if (!::realpath(anchor.c_str(), real))
        return "cannot resolve '" + anchor + "': " + errno_text(errno);
    std::size_t skip;
    if (path_is_under(path, anchor)) skip = path_components(anchor).size();
    else if (path_is_under(path, real)) skip = path_components(real).size();
    else return "'" + path + "' is not inside '" + anchor + "'";

    Fd dir(::open(real, O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (dir.fd < 0) return "cannot open '" + anchor + "': " + errno_text(errno);
    auto comps = path_components(path);
    std::string walked = real;
    for (std::size_t i = skip; i < comps.size(); ++i) {
        const std::string &c = comps[i];
        walked += "/" + c;
        int fd = ::openat(dir.fd, c.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && create) {
            if (::mkdirat(dir.fd, c.c_str(), mode) != 0 && errno != EEXIST)
                return "cannot create '" + walked + "': " + errno_text(errno);
            fd = ::openat(dir.fd, c.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0 && errno == ENOENT && !create) return "";  // the rest is made later, as the user
        if (fd < 0) {
            int e = errno;
            struct stat st;
            if ((e == ENOTDIR || e == ELOOP) && ::fstatat(dir.fd, c.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(st.st_mode))
                return "'" + walked + "' is a symlink; checkpoint paths may not pass through symlinks";
            return "cannot open '" + walked + "': " + errno_text(e);
        }
        Fd next(fd);
        struct stat st;
        if (::fstat(next.fd, &st) != 0) return "cannot stat '" + walked + "': " + errno_text(errno);
        if (!S_ISDIR(st.st_mode)) return "'" + walked + "' is not a directory";
        if (st.st_uid != uid)
            return "'" + walked + "' belongs to uid " + std::to_string(st.st_uid) + ", not to the job user (uid " +
                   std::to_string(uid) + ")";
        ::close(dir.release());
        dir.fd = next.release();
    }
    if (skip == comps.size()) {
        // The path is the anchor itself: fine only if the user owns it.
        struct stat st;
        if (::fstat(dir.fd, &st) != 0 || st.st_uid != uid)
            return "'" + path + "' is not owned by the job user";
    }
    if (fd_out) *fd_out = dir.release();
    return "";
}

std::string make_user_dir(const std::string &path, const std::string &ckpt_root,
                          const std::string &home, uid_t uid, bool create) {
    if (auto err = check_path_syntax(path); !err.empty()) return err;
    if (!ckpt_root.empty() && path_is_under(path, ckpt_root) && path_components(path).size() > path_components(ckpt_root).size())
        return open_dir_below(ckpt_root, path, uid, create, 0700);
    if (!home.empty() && home != "/" && path_is_under(path, home)) {
        // The home itself must be the user's: "own tree" means owned, not listed in passwd.
        if (auto err = open_dir_below(home, home, uid, false, 0); !err.empty())
            return "home '" + home + "' is not the job user's own: " + err;
        return open_dir_below(home, path, uid, create, 0700);
    }
    std::string where = ckpt_root.empty() ? "your home directory '" + home + "'"
                                          : "the site checkpoint root '" + ckpt_root + "' or your home directory '" + home + "'";
    return "'" + path + "' is outside " + where;
}

namespace {

std::string mode_text(mode_t m) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", unsigned(m & 07777));
    return buf;
}

// A random name part: another user cannot guess it to squat it first.
std::string random_suffix() {
    unsigned char b[8];
    if (::getrandom(b, sizeof b, 0) != ssize_t(sizeof b)) {
        const unsigned long long x = (unsigned long long)(::getpid()) * 2654435761ULL ^ (unsigned long long)(::time(nullptr));
        std::memcpy(b, &x, sizeof b);
    }
    static const char hex[] = "0123456789abcdef";
    std::string s;
    for (unsigned char c : b) { s += hex[c >> 4]; s += hex[c & 15]; }
    return s;
}

// Empties and removes parent_fd/name, a directory, depth-first through fds:
// unlinkat removes a symlink itself, never what it points to.
bool remove_tree_at(int parent_fd, const char *name, int depth) {
    const int fd = ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    DIR *d = ::fdopendir(fd);
    if (!d) { ::close(fd); return false; }
    int entries = 0;
    while (dirent *e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        if (++entries > 100000) break;
        if (::unlinkat(fd, e->d_name, 0) == 0) continue;
        if ((errno == EISDIR || errno == EPERM) && depth < 16) remove_tree_at(fd, e->d_name, depth + 1);
    }
    ::closedir(d);
    return ::unlinkat(parent_fd, name, AT_REMOVEDIR) == 0;
}

}  // namespace

std::string open_step_root(const std::string &root, uid_t owner, bool create, int *fd_out) {
    if (auto err = check_path_syntax(root); !err.empty()) return "progress root " + err;
    Fd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    bool made = false;
    if (fd.fd < 0 && errno == ENOENT && create) {
        if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST)
            return "cannot create '" + root + "': " + errno_text(errno);
        made = true;
        fd.fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd.fd < 0) {
        const int e = errno;
        struct stat st;
        if (::lstat(root.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) return "'" + root + "' is a symlink";
        if (e == ENOTDIR) return "'" + root + "' is not a directory";
        return "cannot open '" + root + "': " + errno_text(e);
    }
    struct stat st;
    if (::fstat(fd.fd, &st) != 0) return "cannot stat '" + root + "': " + errno_text(errno);
    if (st.st_uid != owner)
        return "'" + root + "' belongs to uid " + std::to_string(st.st_uid) + ", not to uid " + std::to_string(owner);
    // The umask may have narrowed what mkdir made.
    if (made && (st.st_mode & 07777) != 0755 && ::fchmod(fd.fd, 0755) == 0) st.st_mode = (st.st_mode & ~07777) | 0755;
    if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
        return "'" + root + "' is writable by group or others without the sticky bit (mode " + mode_text(st.st_mode) + ")";
    if (!(st.st_mode & S_IXOTH))
        return "'" + root + "' is not searchable by others (mode " + mode_text(st.st_mode) + "): job users could not reach their dirs";
    if (fd_out) *fd_out = fd.release();
    return "";
}

std::string make_step_dir(int root_fd, const std::string &prefix, uid_t uid, gid_t gid, StepDir &out) {
    struct stat rst;
    if (::fstat(root_fd, &rst) != 0) return std::string("cannot stat the progress root: ") + errno_text(errno);
    for (int tries = 0; tries < 16; ++tries) {
        const std::string name = prefix + "." + random_suffix();
        if (::mkdirat(root_fd, name.c_str(), 0700) != 0) {
            if (errno == EEXIST) continue;
            return "cannot create '" + name + "': " + errno_text(errno);
        }
        Fd fd(::openat(root_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        struct stat st;
        std::string err;
        if (fd.fd < 0) err = "cannot open '" + name + "' just made: " + errno_text(errno);
        else if (::fchown(fd.fd, uid, gid) != 0) err = "cannot hand '" + name + "' to uid " + std::to_string(uid) + ": " + errno_text(errno);
        else if (::fchmod(fd.fd, 0700) != 0 || ::fstat(fd.fd, &st) != 0) err = "cannot set up '" + name + "': " + errno_text(errno);
        if (!err.empty()) {
            ::unlinkat(root_fd, name.c_str(), AT_REMOVEDIR);
            return err;
        }
        out = StepDir{rst.st_dev, rst.st_ino, st.st_dev, st.st_ino, name};
        return "";
    }
    return "cannot find a free name for '" + prefix + ".*'";
}

std::string remove_step_dir(const std::string &root, const StepDir &dir) {
    if (dir.name.empty() || dir.name.find('/') != std::string::npos || dir.name[0] == '.') return "no step dir";
    Fd rfd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (rfd.fd < 0 || ::fstat(rfd.fd, &st) != 0 || st.st_dev != dir.root_dev || st.st_ino != dir.root_ino)
        return "'" + root + "' is no longer the directory the step's dir was made in";
    if (::fstatat(rfd.fd, dir.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? "" : errno_text(errno);
    if (!S_ISDIR(st.st_mode) || st.st_dev != dir.dev || st.st_ino != dir.ino)
        return "'" + root + "/" + dir.name + "' is no longer the step's dir";
    if (!remove_tree_at(rfd.fd, dir.name.c_str(), 0)) return "cannot remove '" + root + "/" + dir.name + "': " + errno_text(errno);
    return "";
}

std::string read_small_file(const std::string &path, std::size_t max_bytes, std::string &out, struct stat *st_out) {
    out.clear();
    // O_NONBLOCK: opening a FIFO someone left there returns at once.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return "cannot open '" + path + "': " + std::strerror(errno);
    struct stat st;
    std::string err;
    if (fstat(fd, &st) != 0) err = "cannot stat '" + path + "': " + std::strerror(errno);
    else if (!S_ISREG(st.st_mode)) err = "'" + path + "' is not a regular file";
    else if (std::size_t(st.st_size) > max_bytes)
        err = "'" + path + "' is " + std::to_string(st.st_size) + " bytes; at most " + std::to_string(max_bytes) + " are read";
    if (err.empty()) {
        out.resize(std::size_t(st.st_size));
        std::size_t got = 0;
        while (got < out.size()) {
            const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) { err = "cannot read '" + path + "': " + std::strerror(errno); break; }
            if (n == 0) break;  // shrank while read
            got += std::size_t(n);
        }
        out.resize(got);
    }
    ::close(fd);
    if (!err.empty()) out.clear();
    else if (st_out) *st_out = st;
    return err;
}

}  // namespace shardnet
