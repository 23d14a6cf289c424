#include "broker/receipts/head_pin.hpp"

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "broker/receipts/receipts.hpp"
#include "broker/store/store.hpp"
#include "common/safe_path.hpp"

namespace shardnet::broker {

namespace json = boost::json;

std::string head_pin_path(const std::string &key_file) { return key_file + ".head"; }

std::string write_head_pin(const std::string &path, const HeadPin &pin) {
    const std::string text = json::serialize(json::object{{"tree_size", pin.size}, {"root_hash", pin.root_hex}}) + "\n";
    const std::string tmp = path + ".tmp";
    unlink(tmp.c_str());
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return "cannot write " + tmp + ": " + std::strerror(errno);
    const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size()) && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        unlink(tmp.c_str());
        return "cannot write " + path + ": " + why;
    }
    // The rename itself outlives a crash only once its directory is synced.
    const std::size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (const int d = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
        const bool synced = fsync(d) == 0;
        const std::string why = std::strerror(errno);
        close(d);
        if (!synced) return "cannot sync " + dir + " after writing " + path + ": " + why;
    }
    return "";
}

std::string head_pin_writable(const std::string &path) {
    const std::string probe = path + ".tmp";
    unlink(probe.c_str());
    const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return "cannot write " + probe + " (" + std::strerror(errno) +
               "): the broker keeps the last log head it signed beside its receipts key (KEY_FILE.head) and serves no head it cannot "
               "keep there; make that directory writable for the broker";
    close(fd);
    unlink(probe.c_str());
    return "";
}

std::optional<HeadPin> read_head_pin(const std::string &path, std::string &err) {
    if (access(path.c_str(), F_OK) != 0) return std::nullopt;
    std::string text;
    if (err = read_small_file(path, 4096, text); !err.empty()) return std::nullopt;
    json::error_code ec;
    const json::value v = json::parse(text, ec);
    const auto *o = v.if_object();
    const auto *size = o ? o->if_contains("tree_size") : nullptr;
    const auto *root = o ? o->if_contains("root_hash") : nullptr;
    if (ec || !size || !size->is_int64() || size->as_int64() < 0 || !root || !root->is_string() || root->as_string().size() != 64) {
        err = path + ": not a log head ({\"tree_size\": N, \"root_hash\": HEX})";
        return std::nullopt;
    }
    return HeadPin{size->as_int64(), std::string(root->as_string())};
}

std::string check_head_pin(Store &store, const std::string &path) {
    std::string err;
    const auto pin = read_head_pin(path, err);
    if (!err.empty()) return err;
    if (!pin || pin->size == 0) return "";
    const long long size = store.receipts().log_size();
    if (size < pin->size)
        return "the receipt log in the database holds " + std::to_string(size) + " receipts, fewer than the " + std::to_string(pin->size) +
               " of the last head this broker signed (" + path + "): the database was rolled back or replaced. Refusing to start: "
               "restore the database that holds them (or, knowing what you do, move " + path + " away)";
    const std::string root = merkle::hex(merkle::root(uint64_t(pin->size), receipts::log_source(store)));
    if (root != pin->root_hex)
        return "the receipt log in the database has root " + root.substr(0, 16) + "... at size " + std::to_string(pin->size) +
               ", the last head this broker signed (" + path + ") has " + pin->root_hex.substr(0, 16) +
               "...: the log was rewritten. Refusing to start";
    return "";
}

}  // namespace shardnet::broker
