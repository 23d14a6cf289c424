#include "spank/oci_mounts.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace json = boost::json;

namespace shardnet::oci {

namespace {

// "/a//b/./c/" as {"a","b","c"}; false for "..".
bool components(const std::string &path, std::vector<std::string> &out) {
    out.clear();
    size_t i = 0;
    while (i < path.size()) {
        size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        const std::string c = path.substr(i, j - i);
        if (c == "..") return false;
        if (!c.empty() && c != ".") out.push_back(c);
        i = j + 1;
    }
    return true;
}

bool below(const std::vector<std::string> &path, const std::vector<std::string> &dir) {
    if (dir.size() > path.size()) return false;
    for (size_t i = 0; i < dir.size(); ++i)
        if (path[i] != dir[i]) return false;
    return true;
}

std::string joined(const std::vector<std::string> &c) {
    std::string s;
    for (const auto &x : c) s += (s.empty() ? "" : "/") + x;
    return s;
}

bool is_bind(const json::object &m) {
    if (const auto *t = m.if_contains("type"); t && t->is_string() && *t == "bind") return true;
    if (const auto *o = m.if_contains("options"); o && o->is_array())
        for (const auto &x : o->as_array())
            if (x.is_string() && (x == "bind" || x == "rbind")) return true;
    return false;
}

bool source_is_dir(const json::object &m) {
    const auto *s = m.if_contains("source");
    struct stat st;
    return s && s->is_string() && ::stat(std::string(s->as_string()).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::vector<std::string> mount_points(const std::string &config, std::string &rootfs) {
    rootfs.clear();
    boost::system::error_code ec;
    const json::value v = json::parse(config, ec);
    if (ec || !v.is_object()) return {};
    const auto *root = v.as_object().if_contains("root");
    const auto *path = root && root->is_object() ? root->as_object().if_contains("path") : nullptr;
    if (!path || !path->is_string() || !path->as_string().starts_with("/")) return {};
    rootfs = std::string(path->as_string());
    std::vector<std::vector<std::string>> earlier;
    std::vector<std::string> out;
    const auto *mounts = v.as_object().if_contains("mounts");
    if (!mounts || !mounts->is_array()) return out;
    for (const auto &m : mounts->as_array()) {
        const auto *dst = m.is_object() ? m.as_object().if_contains("destination") : nullptr;
        std::vector<std::string> c;
        if (!dst || !dst->is_string() || !components(std::string(dst->as_string()), c) || c.empty()) continue;
        // A bind of a file has a file for its mount point: not ours to make.
        if (is_bind(m.as_object()) && !source_is_dir(m.as_object())) continue;
        bool covered = false;
        for (const auto &e : earlier) covered = covered || below(c, e);
        earlier.push_back(c);
        const std::string rel = joined(c);
        if (!covered && std::find(out.begin(), out.end(), rel) == out.end()) out.push_back(rel);
    }
    return out;
}

std::vector<std::string> make_mount_points(const std::string &rootfs, const std::vector<std::string> &dirs) {
    std::vector<std::string> failed;
    const int top = ::open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0) {
        for (const auto &d : dirs) failed.push_back(d + ": cannot open the rootfs " + rootfs + ": " + std::strerror(errno));
        return failed;
    }
    for (const auto &d : dirs) {
        std::vector<std::string> c;
        if (!components(d, c)) {
            failed.push_back(d + ": has a .. component");
            continue;
        }
        int at = ::dup(top);
        for (size_t i = 0; at >= 0 && i < c.size(); ++i) {
            if (::mkdirat(at, c[i].c_str(), 0755) != 0 && errno != EEXIST) {
                failed.push_back(d + ": mkdir " + joined({c.begin(), c.begin() + long(i) + 1}) + ": " + std::strerror(errno));
                ::close(at);
                at = -1;
                break;
            }
            const int next = ::openat(at, c[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            const int why = errno;
            ::close(at);
            at = next;
            if (at < 0) failed.push_back(d + ": " + joined({c.begin(), c.begin() + long(i) + 1}) + " is no directory: " + std::strerror(why));
        }
        if (at >= 0) ::close(at);
    }
    ::close(top);
    return failed;
}

}  // namespace shardnet::oci
