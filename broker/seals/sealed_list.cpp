#include "broker/seals/sealed_list.hpp"

#include <boost/json.hpp>
#include <stdexcept>

#include "broker/store/store.hpp"

namespace shardnet::broker::sealed_list {

namespace json = boost::json;

void read_commits(Store &store, const std::string &run, long long attempt, const std::string &name, Committed &out) {
    // The commits were read as {path, sha256, bytes} objects when they came
    // in (checkpoints/commit.cpp); anything else here is a damaged row.
    for (const auto &[rank, text] : store.seals().commit_files(run, attempt, name)) {
        json::error_code ec;
        json::value v = json::parse(text, ec);
        if (ec || !v.is_array()) throw std::runtime_error("commit of rank " + std::to_string(rank) + " to " + name + " is not a file list");
        ++out.ranks;
        for (const auto &f : v.as_array()) {
            const auto *o = f.if_object();
            const auto *p = o ? o->if_contains("path") : nullptr, *h = o ? o->if_contains("sha256") : nullptr,
                       *b = o ? o->if_contains("bytes") : nullptr;
            if (!p || !p->is_string() || !h || !h->is_string() || !b || !(b->is_int64() || b->is_uint64()))
                throw std::runtime_error("commit of rank " + std::to_string(rank) + " to " + name + " has a malformed file entry");
            file_list::Entry e{std::string(p->as_string()), std::string(h->as_string()),
                               b->is_int64() ? (unsigned long long)b->as_int64() : b->as_uint64(), rank};
            // A commit taken before this broker signed receipts was not held
            // to a real digest: the seal goes ahead, and says which files it
            // cannot attest (never a seal blocked for good).
            if (!file_list::entry_error(e).empty()) {
                if (out.unattested && out.unattested->size() < 100)
                    out.unattested->push_back(json::object{{"path", e.path.substr(0, 256)}, {"rank", rank}});
                ++out.unattested_count;
                out.others.push_back(std::move(e));
                continue;
            }
            out.entries.push_back(std::move(e));
        }
    }
}

void sort_checked(std::vector<file_list::Entry> &entries) {
    file_list::order(entries);
    if (std::string why = file_list::path_conflict(entries); !why.empty()) throw Conflict(why);
    file_list::sort(entries);   // in order already: drops the repeats
}

json::array rank_files_json(const Built &list, long long rank, std::size_t from, std::size_t limit, std::size_t &total) {
    static const std::vector<uint64_t> none;
    auto it = list.by_rank.find(rank);
    const std::vector<uint64_t> &leaves = it == list.by_rank.end() ? none : it->second;
    std::vector<const file_list::Entry *> other;
    for (const auto &e : list.others)
        if (e.rank == rank) other.push_back(&e);
    total = leaves.size() + other.size();
    json::array out;
    const merkle::NodeSource source = list.tree.source();
    for (std::size_t k = from; k < total && k - from < limit; ++k) {
        if (k >= leaves.size()) {
            const auto &e = *other[k - leaves.size()];
            out.push_back(json::object{{"path", e.path}, {"sha256", e.sha256}, {"bytes", e.bytes}, {"rank", e.rank}});
            continue;
        }
        const uint64_t i = leaves[k];
        const auto &e = list.sorted[i];
        json::array path;
        for (const auto &h : merkle::inclusion_proof(i, list.sorted.size(), source)) path.push_back(json::string(merkle::hex(h)));
        out.push_back(json::object{{"path", e.path}, {"sha256", e.sha256}, {"bytes", e.bytes}, {"rank", rank}, {"index", i},
                                   {"inclusion", std::move(path)}});
    }
    return out;
}

json::array page_json(const std::vector<file_list::Entry> &sorted, std::size_t from, std::size_t limit) {
    json::array out;
    for (std::size_t i = from; i < sorted.size() && i - from < limit; ++i) {
        json::object o{{"path", sorted[i].path}, {"sha256", sorted[i].sha256}, {"bytes", sorted[i].bytes}};
        if (sorted[i].rank >= 0) o["rank"] = sorted[i].rank;
        out.push_back(std::move(o));
    }
    return out;
}

}  // namespace shardnet::broker::sealed_list
