#include "safe_path.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parse_util.hpp"

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
