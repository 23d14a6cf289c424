#include "common/file_list.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <string_view>

#include "common/json_fields.hpp"
#include "common/parse_util.hpp"

namespace shardnet::file_list {

namespace json = boost::json;

std::string leaf_data(const Entry &e) { return e.sha256 + " " + std::to_string(e.bytes) + " " + e.path; }

merkle::Hash leaf(const Entry &e) { return merkle::leaf_hash(leaf_data(e)); }

bool before(const Entry &a, const Entry &b) {
    if (const int c = a.path.compare(b.path); c != 0) return c < 0;
    return leaf_data(a) < leaf_data(b);
}

void order(std::vector<Entry> &entries) { std::stable_sort(entries.begin(), entries.end(), before); }

std::string path_conflict(const std::vector<Entry> &ordered) {
    for (std::size_t i = 1; i < ordered.size(); ++i) {
        const Entry &a = ordered[i - 1], &b = ordered[i];
        if (a.path != b.path || (a.sha256 == b.sha256 && a.bytes == b.bytes)) continue;
        auto who = [](const Entry &e) {
            return (e.rank >= 0 ? "rank " + std::to_string(e.rank) : std::string("a rank")) + " committed sha256 " + e.sha256 + " (" +
                   std::to_string(e.bytes) + " bytes)";
        };
        const bool swap = b.rank >= 0 && (a.rank < 0 || b.rank < a.rank);   // the lower rank first
        return "path " + a.path.substr(0, 200) + ": " + who(swap ? b : a) + ", " + who(swap ? a : b);
    }
    return "";
}

void sort(std::vector<Entry> &entries) {
    order(entries);
    // The same file committed by two ranks is one leaf.
    entries.erase(std::unique(entries.begin(), entries.end(),
                              [](const Entry &a, const Entry &b) { return a.path == b.path && a.sha256 == b.sha256 && a.bytes == b.bytes; }),
                  entries.end());
}

std::optional<uint64_t> index_of(const std::vector<Entry> &sorted, const Entry &e) {
    auto it = std::lower_bound(sorted.begin(), sorted.end(), e, before);
    if (it == sorted.end() || leaf_data(*it) != leaf_data(e)) return std::nullopt;
    return uint64_t(it - sorted.begin());
}

std::string path_error(const std::string &path) {
    if (path.empty() || path.size() > kMaxPath || has_control_chars(path)) return "path: 1-4096 bytes without control characters";
    const std::string shown = path.substr(0, 200);
    if (path[0] == '/') return "path: " + shown + " is absolute (a path inside the checkpoint directory is relative)";
    for (std::size_t at = 0; at <= path.size();) {
        const std::size_t slash = std::min(path.find('/', at), path.size());
        const std::string_view part = std::string_view(path).substr(at, slash - at);
        if (part == "..") return "path: " + shown + " leaves the checkpoint directory (..)";
        if (part.empty() || part == ".")
            return "path: " + shown + " is not in canonical form (an empty or \".\" component: \"a//b\", \"./a\", a trailing \"/\"); "
                   "name each file one way";
        at = slash + 1;
    }
    return "";
}

std::string entry_error(const Entry &e) {
    if (std::string err = path_error(e.path); !err.empty()) return err;
    if (!is_lower_hex(e.sha256, 64)) return "sha256: expected 64 lower-case hex digits";
    if (e.bytes > kMaxBytes) return "bytes: expected 0..2^50";
    return "";
}

Summary summarize(const std::vector<Entry> &sorted) {
    Folder f;
    for (const auto &e : sorted) f.add(e, "");
    return f.summary();
}

merkle::MemoryTree tree_of(const std::vector<Entry> &sorted) {
    merkle::MemoryTree t;
    for (const auto &e : sorted) t.append_leaf_hash(leaf(e));
    return t;
}

std::string read_entry(const json::value &v, const std::string &at, Entry &out) {
    if (!v.is_object()) return at + ": expected an object {path, sha256, bytes}";
    JsonFields f(v.as_object(), at);
    Entry e;
    long long bytes = 0, rank = -1;
    if (!f.only({"path", "sha256", "bytes", "rank", "index", "inclusion"}) || !f.str("path", e.path) || !f.str("sha256", e.sha256) ||
        !f.integer("bytes", 0, (long long)kMaxBytes, bytes) || !f.integer("rank", 0, (1 << 24) - 1, rank, false))
        return f.error();
    e.bytes = (unsigned long long)bytes;
    e.rank = rank;
    if (std::string err = entry_error(e); !err.empty()) return at + "." + err;
    out = std::move(e);
    return "";
}

std::string Folder::add(const Entry &e, const std::string &at) {
    if (std::string err = entry_error(e); !err.empty()) return at + "." + err;
    if (tree_.size() > 0 && !before(last_, e))
        return at + ": " + e.path.substr(0, 200) + " is not after " + last_.path.substr(0, 200) + " (the list is in path order, each file once)";
    tree_.add(leaf_data(e));
    bytes_ += e.bytes;
    last_ = e;
    return "";
}

Summary Folder::summary() const { return Summary{tree_.root(), tree_.size(), bytes_}; }

json::object summary_json(const Summary &s) {
    return json::object{{"merkle_root", merkle::hex(s.root)}, {"count", s.count}, {"bytes", s.bytes}};
}

std::string read_summary(const json::value &v, const std::string &at, Summary &out) {
    if (!v.is_object()) return at + ": expected an object {merkle_root, count, bytes}";
    JsonFields f(v.as_object(), at);
    std::string root;
    long long count = 0, bytes = 0;
    if (!f.only({"merkle_root", "count", "bytes"}) || !f.str("merkle_root", root) || !f.integer("count", 0, 1LL << 40, count) ||
        !f.integer("bytes", 0, 1LL << 62, bytes))
        return f.error();
    auto h = is_lower_hex(root, 64) ? merkle::from_hex(root) : std::nullopt;
    if (!h) return at + ".merkle_root: expected 64 lower-case hex digits";
    out = Summary{*h, uint64_t(count), (unsigned long long)bytes};
    return "";
}

}  // namespace shardnet::file_list
