#include "broker/seals/carried.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <set>

#include "broker/seals/sealed_list.hpp"
#include "common/json_fields.hpp"
#include "common/parse_util.hpp"

namespace shardnet::broker::carried {

namespace json = boost::json;

namespace {

json::array files_json(const Seal &s) { return sealed_list::page_json(s.files, 0, s.files.size()); }

json::object seal_json(const Seal &s) {
    json::array files = files_json(s);
    return json::object{{"name", s.name}, {"attempt", s.attempt}, {"ranks", s.ranks},
                        {"parent", s.parent.empty() ? json::value(nullptr) : json::value(s.parent)}, {"sealed_by", s.sealed_by},
                        {"list", file_list::summary_json(s.list)},
                        {"receipt", s.receipt_seq <= 0 ? json::value(nullptr)
                                                       : json::value(json::object{{"seq", s.receipt_seq}, {"digest", s.receipt_digest}})},
                        {"files", std::move(files)}};
}

// A seal of this broker's own, from its commits and the list its seal recorded.
std::optional<Seal> local_seal(Store &store, const CheckpointRow &c, const std::string &broker_name) {
    Seal s{c.name, c.parent, broker_name, c.attempt, c.ranks, {}, 0, "", {}};
    sealed_list::Committed committed;
    sealed_list::read_commits(store, c.run, c.attempt, c.name, committed);
    // Each rank's files, a leaf two ranks committed once per rank (so
    // that the receiver lists it in both ranks' files); the root is the
    // leaves'.
    s.files = std::move(committed.entries);
    file_list::order(s.files);
    std::vector<file_list::Entry> leaves = s.files;
    file_list::sort(leaves);
    s.list = file_list::summarize(leaves);
    if (auto l = store.seals().sealed_list(c.run, c.name)) {
        // The commits must still make the root the seal recorded (and its
        // receipt signed): a store changed since is not passed on as sealed.
        if (l->root != merkle::hex(s.list.root)) return std::nullopt;
        if (l->receipt_seq > 0) s.receipt_seq = l->receipt_seq, s.receipt_digest = l->receipt_digest;
    }
    return s;
}

std::optional<Seal> carried_seal(const Store::CarriedSealRow &r) {
    json::error_code ec;
    json::value files = json::parse(r.files, ec);
    if (ec || !files.is_array()) return std::nullopt;
    Seal s{r.name, r.parent, r.sealed_by, r.attempt, r.ranks, {}, 0, "", {}};
    for (const auto &f : files.as_array()) {
        file_list::Entry e;
        if (!file_list::read_entry(f, "", e).empty()) return std::nullopt;
        s.files.push_back(std::move(e));
    }
    file_list::order(s.files);
    std::vector<file_list::Entry> leaves = s.files;
    file_list::sort(leaves);
    s.list = file_list::summarize(leaves);
    if (r.list.receipt_seq > 0) s.receipt_seq = r.list.receipt_seq, s.receipt_digest = r.list.receipt_digest;
    return s;
}

// The seal's receipt as {"seq": N, "digest": HEX}: named, not vouched for
// (the receipt is the sealer's; a verifier holds the list to its root).
std::string read_receipt(const json::value &v, const std::string &at, Seal &s) {
    if (!v.is_object()) return at + ": expected {\"seq\": N, \"digest\": HEX} or null";
    JsonFields f(v.as_object(), at);
    if (!f.only({"seq", "digest"}) || !f.integer("seq", 1, 1LL << 31, s.receipt_seq) || !f.str("digest", s.receipt_digest)) return f.error();
    if (!is_lower_hex(s.receipt_digest, 64)) return at + ".digest: expected 64 lower-case hex digits";
    return "";
}

std::string read_one(const json::value &v, const std::string &at, std::size_t &files_left, Seal &s) {
    if (!v.is_object()) return at + ": expected an object";
    JsonFields f(v.as_object(), at);
    const json::array *files = nullptr;
    if (!f.only({"name", "attempt", "ranks", "parent", "sealed_by", "list", "receipt", "files"}) || !f.str("name", s.name) ||
        !f.integer("attempt", 1, 1000000, s.attempt) || !f.integer("ranks", 1, 1 << 24, s.ranks) || !f.str("sealed_by", s.sealed_by) ||
        !(files = f.array("files")))
        return f.error();
    if (!is_safe_name(s.name, 128)) return at + ".name: 1-128 of [A-Za-z0-9._-]";
    if (!is_safe_name(s.sealed_by, 128)) return at + ".sealed_by: a broker id, 1-128 of [A-Za-z0-9._-]";
    const json::value *parent = f.get("parent", true);
    if (!parent) return f.error();
    if (parent->is_string() && is_safe_name(parent->as_string(), 128)) s.parent = std::string(parent->as_string());
    else if (!parent->is_null()) return at + ".parent: expected a checkpoint name or null";
    const json::value *list = f.get("list", true);
    if (!list) return f.error();
    if (std::string err = file_list::read_summary(*list, at + ".list", s.list); !err.empty()) return err;
    if (const json::value *r = v.as_object().if_contains("receipt"); r && !r->is_null())
        if (std::string err = read_receipt(*r, at + ".receipt", s); !err.empty()) return err;
    if (files->empty()) return at + ".files: empty (a seal names its files)";
    if (files->size() > files_left) return at + ".files: more than " + std::to_string(kMaxFiles) + " files in all the seals carried";
    files_left -= files->size();
    for (std::size_t i = 0; i < files->size(); ++i) {
        const std::string here = at + ".files[" + std::to_string(i) + "]";
        file_list::Entry e;
        if (std::string err = file_list::read_entry((*files)[i], here, e); !err.empty()) return err;
        if (e.rank < 0 || e.rank >= s.ranks) return here + ".rank: expected 0.." + std::to_string(s.ranks - 1) + " (the seal's ranks)";
        s.files.push_back(std::move(e));
    }
    // The list must be the root it claims: nothing the sender did not seal
    // is served here as sealed.
    file_list::order(s.files);   // a leaf two ranks committed comes once per rank
    if (std::string why = file_list::path_conflict(s.files); !why.empty()) return at + ".files: " + why + " (one path is one file)";
    std::vector<file_list::Entry> sorted = s.files;
    file_list::sort(sorted);
    const file_list::Summary got = file_list::summarize(sorted);
    if (got.root != s.list.root || got.count != s.list.count || got.bytes != s.list.bytes)
        return at + ".list: its files make " + std::to_string(got.count) + " file(s), " + std::to_string(got.bytes) + " bytes, root " +
               merkle::hex(got.root) + ", not the " + std::to_string(s.list.count) + " file(s), " + std::to_string(s.list.bytes) +
               " bytes, root " + merkle::hex(s.list.root) + " it claims";
    return "";
}

}  // namespace

json::array outgoing(Store &store, const std::string &run, const std::string &broker_name, std::vector<std::string> &left_out) {
    struct Candidate { double when; std::optional<CheckpointRow> local; std::optional<Store::CarriedSealRow> carried; };
    std::vector<Candidate> all;
    // Newest first, ties too (a run's seals are listed oldest first).
    auto local = store.seals().list_checkpoints(run);
    for (auto it = local.rbegin(); it != local.rend(); ++it) all.push_back(Candidate{it->sealed_at, std::move(*it), std::nullopt});
    for (auto &c : store.seals().carried_seals(run, int(kMaxSent))) all.push_back(Candidate{c.received, std::nullopt, std::move(c)});
    std::stable_sort(all.begin(), all.end(), [](const Candidate &a, const Candidate &b) { return a.when > b.when; });
    json::array out;
    std::size_t files = 0, bytes = 0;
    std::set<std::string> names;
    auto too_many = [&](const std::string &name, std::size_t n) {
        left_out.push_back(name + ": " + std::to_string(n) + " files would pass the " + std::to_string(kMaxSentFiles) + " a decision carries");
    };
    for (const auto &c : all) {
        if (out.size() >= kMaxSent) break;
        const std::string name = c.local ? c.local->name : c.carried->name;
        if (!names.insert(name).second) continue;   // each name once, the newer record
        // A seal too big to go is known from its record, before its commits are read.
        const long long recorded = c.local ? (store.seals().sealed_list(run, name) ? store.seals().sealed_list(run, name)->count : 0) : c.carried->list.count;
        if (files + std::size_t(recorded) > kMaxSentFiles) { too_many(name, std::size_t(recorded)); continue; }
        std::optional<Seal> s = c.local ? local_seal(store, *c.local, broker_name) : carried_seal(*c.carried);
        if (!s) {
            left_out.push_back(name + (c.local ? ": its commits no longer make the root its seal recorded" : ": its carried record is not readable"));
            continue;
        }
        if (s->files.empty()) { left_out.push_back(name + ": no file with a real digest"); continue; }
        if (files + s->files.size() > kMaxSentFiles) { too_many(name, s->files.size()); continue; }
        json::object j = seal_json(*s);
        const std::size_t size = json::serialize(j).size();
        if (bytes + size > kMaxSentBytes) {
            left_out.push_back(name + ": its list (" + std::to_string(size) + " bytes) would pass the " + std::to_string(kMaxSentBytes) +
                               " bytes a decision carries");
            continue;
        }
        files += s->files.size(), bytes += size;
        out.push_back(std::move(j));
    }
    return out;
}

std::string read(const json::value &v, std::vector<Seal> &out) {
    if (!v.is_array()) return "sealed: expected an array of sealed checkpoints";
    const json::array &a = v.as_array();
    if (a.size() > kMaxReceived) return "sealed: at most " + std::to_string(kMaxReceived) + " sealed checkpoints, not " + std::to_string(a.size());
    std::size_t files_left = kMaxFiles;
    std::set<std::string> names;
    std::vector<Seal> seals;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const std::string at = "sealed[" + std::to_string(i) + "]";
        Seal s;
        if (std::string err = read_one(a[i], at, files_left, s); !err.empty()) return err;
        if (!names.insert(s.name).second) return at + ".name: " + s.name + " is carried twice";
        seals.push_back(std::move(s));
    }
    out = std::move(seals);
    return "";
}

Store::CarriedSealRow row_of(const Seal &s, const std::string &run, double received) {
    const json::array files = files_json(s);
    return Store::CarriedSealRow{run, s.name, s.attempt, s.ranks, s.parent, s.sealed_by,
                                 Store::SealedListRow{merkle::hex(s.list.root), (long long)s.list.count, (long long)s.list.bytes,
                                                      s.receipt_seq, s.receipt_digest},
                                 json::serialize(files), received};
}

}  // namespace shardnet::broker::carried
