#include "sbatch-wrappers/kept_heads.hpp"

#include <boost/json.hpp>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest.hpp"
#include "common/receipt.hpp"
#include "common/safe_path.hpp"

namespace shardnet::cli {

namespace json = boost::json;

std::string heads_dir(std::string &err) {
    // The XDG base directory rules: a relative $XDG_STATE_HOME is to be ignored.
    if (const char *x = std::getenv("XDG_STATE_HOME"); x && x[0] == '/') return std::string(x) + "/shardnet/heads";
    if (const char *h = std::getenv("HOME"); h && h[0] == '/') return std::string(h) + "/.local/state/shardnet/heads";
    err = "neither XDG_STATE_HOME nor HOME is an absolute path: no place to keep the brokers' log heads";
    return "";
}

std::string kept_head_path(const std::string &dir, const std::string &url) {
    std::string name;
    for (char c : url.substr(0, 80)) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
    return dir + "/" + name + "-" + sha256_hex(url).substr(0, 16) + ".json";
}

std::optional<KeptHead> read_kept_head(const std::string &path, std::string &err) {
    if (access(path.c_str(), F_OK) != 0) return std::nullopt;
    std::string text;
    if (err = read_small_file(path, 1 << 20, text); !err.empty()) return std::nullopt;
    json::error_code ec;
    const json::value v = json::parse(text, ec);
    const auto *o = v.if_object();
    auto str = [&](const char *k) { const auto *x = o ? o->if_contains(k) : nullptr; return x && x->is_string() ? std::string(x->as_string()) : ""; };
    const auto *size = o ? o->if_contains("tree_size") : nullptr;
    const auto root = merkle::from_hex(str("root_hash"));
    const bool size_ok = size && (size->is_uint64() || (size->is_int64() && size->as_int64() > 0));
    if (ec || !size_ok || !root) {
        err = path + ": not a kept log head ({\"url\", \"tree_size\", \"root_hash\", ...}); shard verify --forget-head starts afresh";
        return std::nullopt;
    }
    const auto *head = o->if_contains("head");
    return KeptHead{str("url"), str("broker"), size->to_number<unsigned long long>(), *root, head ? json::serialize(*head) : "",
                    str("verified_at")};
}

namespace {

// dir and its missing parents, each new one 0700 (the kept heads are the
// user's own record: nobody else writes beside them).
std::string make_dirs(const std::string &dir) {
    for (std::size_t at = 1; at <= dir.size(); ++at) {
        if (at != dir.size() && dir[at] != '/') continue;
        const std::string part = dir.substr(0, at);
        if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return "cannot create " + part + ": " + std::strerror(errno);
    }
    return "";
}

}  // namespace

std::string write_kept_head(const std::string &path, const KeptHead &h) {
    if (std::string err = make_dirs(path.substr(0, path.rfind('/'))); !err.empty()) return err;
    json::error_code ec;
    json::value head = json::parse(h.head, ec);
    const std::string text = json::serialize(json::object{{"url", h.url}, {"broker", h.broker}, {"tree_size", h.size},
                                                          {"root_hash", merkle::hex(h.root)}, {"verified_at", h.verified_at},
                                                          {"head", ec ? json::value(h.head) : head}}) + "\n";
    // Beside the file, so that the rename is one step of one directory; a
    // crash leaves the old head or the new one, never half of either.
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    unlink(tmp.c_str());
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return "cannot write " + tmp + ": " + std::strerror(errno);
    const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size()) && fchmod(fd, 0600) == 0 && fsync(fd) == 0;
    const int saved = errno;
    close(fd);
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(ok ? errno : saved);
        unlink(tmp.c_str());
        return "cannot write " + path + ": " + why;
    }
    return "";
}

std::string check_extends(const KeptHead &kept, unsigned long long size, const merkle::Hash &root,
                          const std::vector<merkle::Hash> &proof, const std::string &where, const std::string &file) {
    const std::string now = "its log head of size " + std::to_string(size) + " (root " + merkle::hex(root) + ")";
    const std::string before = "the head of size " + std::to_string(kept.size) + " (root " + merkle::hex(kept.root) + ") this CLI verified" +
                               (kept.verified_at.empty() ? "" : " at " + kept.verified_at) + " (kept in " + file + ")";
    const std::string reset = ". If you know why (a broker restored from a backup, another broker at this URL), "
                              "shard verify --forget-head keeps the new head instead";
    if (size < kept.size) return where + ": log rolled back: " + now + " is smaller than " + before + reset;
    if (size == kept.size && root != kept.root) return where + ": log forked: " + now + " is not " + before + reset;
    if (size > kept.size && !merkle::verify_consistency(kept.size, size, kept.root, root, proof))
        return where + ": log forked: " + now + " does not extend " + before + " (the consistency proof fails)" + reset;
    return "";
}

}  // namespace shardnet::cli
