#include "sbatch-wrappers/verify_cmd.hpp"

#include <boost/json.hpp>
#include <cstdio>
#include <ctime>
#include <deque>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json_fields.hpp"
#include "common/parse_util.hpp"
#include "common/receipt_verify.hpp"
#include "common/safe_path.hpp"
#include "common/tree_head.hpp"
#include "sbatch-wrappers/kept_heads.hpp"
#include "sbatch-wrappers/witness_cmd.hpp"

namespace shardnet::cli {

namespace json = boost::json;
using namespace shardnet::receipt;

namespace {

constexpr int kOk = 0, kFailed = 1, kUsage = 2;
constexpr std::size_t kMaxInput = 256u << 20;   // a run's receipts, or a log bundle

int usage_error(const std::string &cmd, const std::string &msg) {
    std::fprintf(stderr, "shard: %s: %s\n", cmd.c_str(), msg.c_str());
    return kUsage;
}

struct Input {
    std::vector<dsse::Envelope> envs;
    std::vector<std::string> origins;
    std::vector<std::string> bad;   // envelopes that could not be read, one line each
};

// A file holds one envelope, a JSON array of them, or JSON lines.
void read_envelopes(const std::string &name, const std::string &text, Input &in) {
    auto add = [&](const json::value &v, const std::string &origin) {
        dsse::Envelope e;
        if (std::string err = dsse::from_json_value(v, e); !err.empty()) in.bad.push_back(origin + ": not a DSSE envelope: " + err);
        else in.envs.push_back(std::move(e)), in.origins.push_back(origin);
    };
    json::error_code ec;
    json::value whole = json::parse(text, ec);
    if (!ec && whole.is_array()) {
        for (std::size_t i = 0; i < whole.as_array().size(); ++i) add(whole.as_array()[i], name + "[" + std::to_string(i) + "]");
        return;
    }
    if (!ec) return add(whole, name);
    std::size_t pos = 0, line = 0;
    while (pos < text.size()) {
        const std::size_t nl = std::min(text.find('\n', pos), text.size());
        const std::string_view l = std::string_view(text).substr(pos, nl - pos);
        pos = nl + 1, ++line;
        if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        json::value v = json::parse(l, ec);
        const std::string origin = name + ":" + std::to_string(line);
        if (ec) in.bad.push_back(origin + ": not JSON: " + ec.message());
        else add(v, origin);
    }
}

bool read_file(const std::string &path, std::string &text, std::string &err) {
    err = read_small_file(path, kMaxInput, text);
    return err.empty();
}

std::vector<merkle::Hash> hashes(const json::array &a, std::string &err, const std::string &at) {
    std::vector<merkle::Hash> out;
    for (std::size_t i = 0; i < a.size(); ++i) {
        auto h = a[i].is_string() ? merkle::from_hex(a[i].as_string()) : std::nullopt;
        if (!h) { err = at + "[" + std::to_string(i) + "]: expected 64 lower-case hex digits"; return {}; }
        out.push_back(*h);
    }
    return out;
}

json::array hex_array(const std::vector<merkle::Hash> &hs) {
    json::array a;
    for (const auto &h : hs) a.push_back(json::string(merkle::hex(h)));
    return a;
}

// --head: the signed head, each receipt's inclusion in it, and (when the
// file has one) that it extends an earlier signed head. Failures are lines.
// only: the positions of the envelopes this head is about (a fetched run:
// those its broker listed); null: every one.
// The key of keys that signed a verified head.
std::string head_signer(const dsse::Envelope &env, const std::vector<SigningKey> &keys) {
    TreeHead h;
    for (const auto &k : keys)
        if (verify_tree_head(env, {k}, h).empty()) return k.keyid();
    return "";
}

void check_head(const std::string &file, const std::string &text, const Input &in, const ChainResult &res,
                const std::vector<SigningKey> &keys, const KeyRetirements &retired, const PinnedKeys &pinned, std::vector<std::string> &lines,
                json::object &report, const std::set<std::size_t> *only = nullptr) {
    std::string err;
    json::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec || !v.is_object()) { lines.push_back("log head " + file + ": not a JSON object"); return; }
    // A bundle {"head", "inclusion", "consistency"} or a bare head envelope.
    const bool bundle = v.as_object().contains("head");
    JsonFields f(v.as_object(), "");
    if (bundle && !f.only({"head", "inclusion", "consistency"})) { lines.push_back("log head " + file + ": " + f.error()); return; }
    dsse::Envelope env;
    TreeHead head;
    if (err = dsse::from_json_value(bundle ? v.as_object().at("head") : v, env); err.empty()) err = verify_tree_head_in_time(env, keys, retired, head);
    if (!err.empty()) { lines.push_back("log head " + file + ": " + err); return; }
    report["tree_size"] = head.tree_size;
    report["root_hash"] = merkle::hex(head.root_hash);
    // A head names no broker: with pinned keys, the one it shows receipts
    // of must have signed it (another broker's key cannot vouch that
    // nothing of this one's log was dropped).
    std::set<std::string> pinned_brokers;
    for (const auto &[keyid, broker] : pinned) pinned_brokers.insert(broker);
    const std::string signer = pinned.empty() ? "" : head_signer(env, keys);
    const auto signer_broker = pinned.find(signer);
    std::map<std::string, std::pair<uint64_t, std::vector<merkle::Hash>>> proofs;   // by leaf hash
    const json::array *inc = bundle ? f.array("inclusion", false) : nullptr;
    for (std::size_t i = 0; inc && i < inc->size(); ++i) {
        const std::string at = "inclusion[" + std::to_string(i) + "]";
        if (!(*inc)[i].is_object()) { lines.push_back("log head " + file + ": " + at + ": expected an object"); return; }
        JsonFields p((*inc)[i].as_object(), at);
        std::string leaf;
        long long index = 0;
        const json::array *path = nullptr;
        if (!p.only({"leaf_hash", "leaf_index", "path"}) || !p.str("leaf_hash", leaf) || !p.integer("leaf_index", 0, 1LL << 62, index) ||
            !(path = p.array("path"))) { lines.push_back("log head " + file + ": " + p.error()); return; }
        auto hs = hashes(*path, err, at + ".path");
        if (!err.empty()) { lines.push_back("log head " + file + ": " + err); return; }
        proofs[leaf] = {uint64_t(index), std::move(hs)};
    }
    // Without proofs, receipts that are the whole log show their inclusion
    // by making its root.
    merkle::MemoryTree all;
    for (const auto &e : in.envs) all.append(dsse::to_json(e));
    const bool whole_log = in.bad.empty() && all.size() == head.tree_size && merkle::root(all.size(), all.source()) == head.root_hash;
    for (const auto &r : res.receipts) {
        if (only && !only->count(r.position)) continue;
        const std::string bytes = dsse::to_json(in.envs[r.position]);
        const merkle::Hash leaf = merkle::leaf_hash(bytes);
        Failure fl{r.position, r.receipt.run, r.receipt.seq, ""};
        auto it = proofs.find(merkle::hex(leaf));
        if (it == proofs.end()) {
            if (!whole_log) fl.what = "not shown to be in the log head of size " + std::to_string(head.tree_size) + " (no inclusion proof)";
        } else if (!merkle::verify_inclusion(it->second.first, head.tree_size, leaf, it->second.second, head.root_hash)) {
            fl.what = "not in the log: its inclusion proof (leaf " + std::to_string(it->second.first) + ") fails against the head of size " +
                     std::to_string(head.tree_size);
        }
        if (fl.what.empty() && pinned_brokers.count(r.receipt.broker) &&
            (signer_broker == pinned.end() || signer_broker->second != r.receipt.broker))
            fl.what = "log head " + file + " is signed by key " + signer + ", not by a key pinned to broker " + r.receipt.broker +
                      ", whose receipt it is";
        if (!fl.what.empty()) lines.push_back(fl.text(in.origins[r.position]));
    }
    const json::object *cons = bundle ? f.object("consistency", false) : nullptr;
    if (!cons) return;
    JsonFields c(*cons, "consistency");
    const json::array *path = nullptr;
    if (!c.only({"head", "path"}) || !c.get("head", true) || !(path = c.array("path"))) { lines.push_back("log head " + file + ": " + c.error()); return; }
    dsse::Envelope old_env;
    TreeHead old;
    if (err = dsse::from_json_value(cons->at("head"), old_env); err.empty()) err = verify_tree_head_in_time(old_env, keys, retired, old);
    auto hs = err.empty() ? hashes(*path, err, "consistency.path") : std::vector<merkle::Hash>{};
    if (!err.empty()) { lines.push_back("log head " + file + ": earlier head: " + err); return; }
    if (!merkle::verify_consistency(old.tree_size, head.tree_size, old.root_hash, head.root_hash, hs))
        lines.push_back("log head " + file + ": the head of size " + std::to_string(head.tree_size) +
                        " does not extend the earlier head of size " + std::to_string(old.tree_size) + " (consistency proof fails)");
    report["extends_tree_size"] = old.tree_size;
}

// A --key file: PEM public keys, or a broker's GET /v1/keys answer saved
// ({"keys": [{"keyid", "pem", "valid_until"}]}), whose valid_until of a
// retired key is kept: that key signs nothing later.
std::string load_key_file(const std::string &path, std::vector<SigningKey> &keys, KeyRetirements &retired) {
    std::string text;
    if (std::string why = read_small_file(path, 1 << 20, text); !why.empty()) return "public key file: " + why;
    if (text.find_first_not_of(" \t\r\n") == std::string::npos || text[text.find_first_not_of(" \t\r\n")] != '{')
        return load_public_keys(path, keys);
    json::error_code ec;
    const json::value v = json::parse(text, ec);
    const auto *list = !ec && v.is_object() ? v.as_object().if_contains("keys") : nullptr;
    if (!list || !list->is_array()) return "key file '" + path + "': not PEM, nor a GET /v1/keys answer ({\"keys\": [...]})";
    for (std::size_t i = 0; i < list->as_array().size(); ++i) {
        const std::string at = "key file '" + path + "', keys[" + std::to_string(i) + "]";
        const auto *k = list->as_array()[i].if_object();
        const auto *pem = k ? k->if_contains("pem") : nullptr;
        if (!pem || !pem->is_string()) return at + ": no pem";
        SigningKey key;
        if (std::string why = SigningKey::from_public_pem(pem->as_string(), key); !why.empty()) return at + ": " + why;
        // A listed keyid that is not the key's own would file its
        // valid_until under another key: refused, not trusted.
        if (const auto *id = k->if_contains("keyid"); id && !(id->is_string() && id->as_string() == key.keyid()))
            return at + ": keyid is not the SHA-256 of its key (" + key.keyid() + ")";
        if (const auto *until = k->if_contains("valid_until"); until && !until->is_null()) {
            if (!until->is_string() || !is_utc_time(until->as_string())) return at + ": valid_until: expected RFC 3339 UTC or null";
            retired[key.keyid()] = std::string(until->as_string());
        }
        keys.push_back(std::move(key));
    }
    if (keys.empty()) return "key file '" + path + "' lists no keys";
    return "";
}

// The earlier of two valid_untils of one key: whoever says a key retired
// sooner only narrows what verifies.
void retire(KeyRetirements &retired, const std::string &keyid, const std::string &until) {
    auto [it, fresh] = retired.emplace(keyid, until);
    if (!fresh && is_utc_time(until) && (!is_utc_time(it->second) || compare_utc_times(until, it->second) < 0)) it->second = until;
}

// The sealed receipt DIR is checked against: the one naming DIR's last
// component, and no other. Another checkpoint's digests would only say the
// files are not that checkpoint, or worse, pass a directory the user did
// not mean. err: what was sealed instead.
const Verified *sealed_for(const std::string &dir, const ChainResult &res, std::string &err) {
    std::string base = dir;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    base = base.substr(base.rfind('/') == std::string::npos ? 0 : base.rfind('/') + 1);
    const Verified *named = nullptr;
    std::vector<std::string> sealed;
    for (const auto &r : res.receipts) {
        if (r.receipt.kind != Kind::checkpoint_sealed) continue;
        const auto *c = r.receipt.body.if_contains("checkpoint");
        if (!c || !c->is_string()) continue;
        sealed.emplace_back(c->as_string());
        if (c->as_string() == base) named = &r;
    }
    if (named) return named;
    // The newest few by name, so that a wrong directory shows what to give.
    std::string names;
    const std::size_t from = sealed.size() > 5 ? sealed.size() - 5 : 0;
    for (std::size_t i = from; i < sealed.size(); ++i) names += (names.empty() ? "" : ", ") + sealed[i];
    err = "checkpoint " + dir + ": no verified checkpoint-sealed receipt names '" + base + "' (" +
          (sealed.empty() ? std::string("none was sealed")
                          : "sealed: " + std::string(from ? "... " : "") + names + "; " + std::to_string(sealed.size()) + " in all") +
          "); its files were not checked";
    return nullptr;
}

// Where a root-sealed checkpoint's list comes from: --files, else the
// fetched broker that signed the receipt; null when neither.
ListPages list_source(const VerifyArgs &a, const std::deque<std::vector<FetchedLog>> &fetched, const Receipt &r, const std::string &name) {
    if (!a.files_file.empty()) return pages_from_file(a.files_file);
    for (const auto &logs : fetched)
        for (const auto &l : logs)
            if (l.broker == r.broker && l.files_page) return pages_from_broker(l.files_page, r.run, name, r.broker);
    return nullptr;
}

}  // namespace

namespace {

// A run fetched from its brokers: the envelopes in chain order (by the seq
// each broker listed them under: a wrong one shows as out of order), and
// which broker's head bundle covers which of them.
struct FetchedHead {
    std::string name, bundle;
    std::set<std::size_t> positions;
    const FetchedLog *log = nullptr;   // whose head: where to keep it, how to ask for a proof
};

// This broker's head against the one kept from it before (kept_heads.hpp):
// it must extend it, else a line says how it does not; kept when it does
// (or when none was). report: the head's, verified (tree_size, root_hash).
// forgotten: the files --forget-head dropped already (two runs of one broker).
void keep_head(const VerifyArgs &a, const FetchedHead &h, json::object &report, std::vector<std::string> &lines,
               std::set<std::string> &forgotten) {
    const std::string file = kept_head_path(a.heads_dir, h.log->url);
    std::string where = "broker " + h.log->broker + " (" + h.log->url + ")";
    for (char &c : where)   // the broker names itself: no escape sequence of its reaches the terminal
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    if (a.forget_head && forgotten.insert(file).second && unlink(file.c_str()) == 0)
        std::fprintf(stderr, "shard: verify: --forget-head: the log head kept for %s is forgotten (%s)\n", where.c_str(), file.c_str());
    std::string err;
    const auto kept = read_kept_head(file, err);
    if (!err.empty()) { lines.push_back(where + ": the log head kept for it: " + err); return; }
    const auto size = report.at("tree_size").to_number<unsigned long long>();
    const merkle::Hash root = *merkle::from_hex(report.at("root_hash").as_string());
    if (kept) {
        std::vector<merkle::Hash> proof;
        if (size > kept->size) {
            std::vector<std::string> path;
            err = h.log->consistency ? h.log->consistency(kept->size, size, path) : "no broker to ask for it";
            if (err.empty()) proof = hashes(json::value_from(path).as_array(), err, "consistency.path");
            if (!err.empty()) {
                lines.push_back(where + ": its log head of size " + std::to_string(size) + " is not shown to extend the head of size " +
                                std::to_string(kept->size) + " this CLI verified before (kept in " + file + "): no consistency proof: " + err);
                return;
            }
        }
        if (std::string why = check_extends(*kept, size, root, proof, where, file); !why.empty()) { lines.push_back(why); return; }
        report["extends_kept_tree_size"] = kept->size;
        if (size == kept->size) return;   // nothing new to keep
    }
    json::error_code ec;
    const json::value bundle = json::parse(h.bundle, ec);
    const json::value *head = !ec && bundle.is_object() ? bundle.as_object().if_contains("head") : nullptr;
    const KeptHead now{h.log->url, h.log->broker, size, root, head ? json::serialize(*head) : "", utc_time(double(std::time(nullptr)))};
    // Not being able to keep it weakens the next check, not this one.
    if (err = write_kept_head(file, now); !err.empty())
        std::fprintf(stderr, "shard: verify: warning: %s: the verified log head is not kept: %s\n", where.c_str(), err.c_str());
}

void add_fetched(const std::string &run, std::vector<FetchedLog> &logs, Input &in, std::vector<FetchedHead> &heads) {
    struct One { long long seq; std::size_t log, i; };
    std::vector<One> all;
    for (std::size_t l = 0; l < logs.size(); ++l)
        for (std::size_t i = 0; i < logs[l].envelopes.size(); ++i) all.push_back(One{i < logs[l].seqs.size() ? logs[l].seqs[i] : 0, l, i});
    std::stable_sort(all.begin(), all.end(), [](const One &x, const One &y) { return x.seq < y.seq; });
    heads.resize(heads.size() + logs.size());
    const std::size_t first = heads.size() - logs.size();
    for (std::size_t l = 0; l < logs.size(); ++l)
        heads[first + l] = FetchedHead{"broker " + logs[l].broker + "'s log head", logs[l].head_bundle, {}, &logs[l]};
    for (const auto &o : all) {
        const std::size_t before = in.envs.size();
        read_envelopes(run + "@" + logs[o.log].broker + "[seq " + std::to_string(o.seq) + "]", logs[o.log].envelopes[o.i], in);
        if (in.envs.size() > before) heads[first + o.log].positions.insert(before);
    }
}

}  // namespace

int verify_receipts(const VerifyArgs &a, const ReceiptFetcher &fetch) {
    if (a.inputs.empty()) return usage_error("verify", "give envelope FILE... (or a RUN)");
    std::vector<SigningKey> keys;
    PinnedKeys pinned;
    KeyRetirements retired;
    for (const auto &k : a.key_files) {
        // --key BROKER=PUB.pem pins the key(s) to the broker id its receipts
        // name whenever the part before '=' is a broker id (a file whose
        // name has one is given as ./NAME).
        std::string path = k, broker;
        if (const auto eq = k.find('='); eq != std::string::npos && k.find('/') > eq) {
            broker = k.substr(0, eq), path = k.substr(eq + 1);
            if (!is_safe_name(broker, 128)) return usage_error("verify", "--key " + k + ": '" + broker + "' is not a broker id");
        }
        const std::size_t before = keys.size();
        if (std::string err = load_key_file(path, keys, retired); !err.empty()) return usage_error("verify", err);
        for (std::size_t i = before; i < keys.size() && !broker.empty(); ++i) {
            auto [it, fresh] = pinned.emplace(keys[i].keyid(), broker);
            if (!fresh && it->second != broker)
                return usage_error("verify", "--key " + k + ": key " + keys[i].keyid() + " is pinned to broker " + it->second + " already");
        }
    }
    Input in;
    std::deque<std::vector<FetchedLog>> fetched;
    std::vector<FetchedHead> heads;
    std::vector<std::string> fetched_pems;   // the brokers' own word for their keys (no --key)
    for (const auto &arg : a.inputs) {
        struct stat st;
        std::string text, err;
        if (::stat(arg.c_str(), &st) != 0 && is_safe_name(arg, 128)) {
            if (!fetch) return usage_error("verify", arg + ": no such file, and no broker to ask for a run of that name");
            auto &logs = fetched.emplace_back();   // heads point into it: a deque keeps it in place
            if (err = fetch(arg, logs); !err.empty()) return usage_error("verify", arg + ": " + err);
            for (const auto &l : logs) {
                fetched_pems.insert(fetched_pems.end(), l.key_pems.begin(), l.key_pems.end());
                for (const auto &[keyid, until] : l.valid_until) retire(retired, keyid, until);
            }
            add_fetched(arg, logs, in, heads);
            continue;
        }
        if (!read_file(arg, text, err)) return usage_error("verify", err);
        read_envelopes(arg, text, in);
    }
    if (keys.empty() && !fetched_pems.empty()) {
        for (const auto &pem : fetched_pems) {
            SigningKey k;
            if (std::string err = SigningKey::from_public_pem(pem, k); !err.empty()) return usage_error("verify", "a broker's key (GET /v1/keys): " + err);
            keys.push_back(std::move(k));
        }
        std::fprintf(stderr, "shard: verify: warning: no --key: using the %zu key(s) the brokers list themselves (GET /v1/keys). "
                             "That shows the receipts are the brokers' and unaltered since, not that the brokers are the ones you "
                             "trust: pin their keys with --key PUB.pem\n", keys.size());
    }
    if (keys.empty()) return usage_error("verify", "give the brokers' public keys: --key PUB.pem (one or more)");
    const ChainResult res = verify_chain(in.envs, keys, pinned, retired);
    std::vector<std::string> lines = in.bad;
    for (const auto &f : res.failures) lines.push_back(f.text(in.origins[f.position]));
    json::object head_report, ckpt_report;
    if (!a.head_file.empty()) {
        std::string text, err;
        if (!read_file(a.head_file, text, err)) lines.push_back("log head: " + err);
        else check_head(a.head_file, text, in, res, keys, retired, pinned, lines, head_report);
    }
    // A fetched run: each broker's head, over the receipts it listed.
    json::array head_reports;
    std::set<std::string> forgotten;
    for (const auto &h : heads) {
        if (h.positions.empty()) continue;
        if (h.bundle.empty()) { lines.push_back(h.name + ": none given, so no receipt is shown to be in a log"); continue; }
        json::object r;
        check_head(h.name, h.bundle, in, res, keys, retired, pinned, lines, r, &h.positions);
        // A head whose signature verified (r has its size and root) is held
        // to the one kept from that broker, whatever else failed.
        if (!r.empty() && !a.heads_dir.empty() && h.log) keep_head(a, h, r, lines, forgotten);
        // --witness: the history the other brokers saw of this one.
        if (!r.empty() && a.witness && h.log) {
            const json::object shown = r;
            for (auto &l : check_witnesses(*h.log, shown, keys, retired, r)) lines.push_back(std::move(l));
        }
        if (!r.empty()) head_reports.push_back(std::move(r));
    }
    if (head_report.empty() && head_reports.size() == 1) head_report = head_reports[0].as_object();
    if (!a.checkpoint_dir.empty()) {
        std::string why;
        const Verified *s = sealed_for(a.checkpoint_dir, res, why);
        if (!s) {
            lines.push_back(why);
        } else {
            ckpt_report = json::object{{"dir", a.checkpoint_dir}, {"run", s->receipt.run}, {"seq", s->receipt.seq},
                                       {"checkpoint", s->receipt.body.at("checkpoint")}, {"shards", s->receipt.subjects.size()}};
            if (const auto list = sealed_list(s->receipt)) {
                // The receipt commits the files as a Merkle root: the list,
                // from --files or the broker that signed it, must make it.
                ckpt_report["shards"] = list->count;
                ckpt_report["merkle_root"] = merkle::hex(list->root);
                const std::string name(s->receipt.body.at("checkpoint").as_string());
                ListPages pages = list_source(a, fetched, s->receipt, name);
                if (!pages) lines.push_back(in.origins[s->position] + ": checkpoint " + name + " commits its " + std::to_string(list->count) +
                                            " file(s) as a Merkle root: give the list with --files FILE (GET /v1/runs/" + s->receipt.run +
                                            "/checkpoints/" + name + "/files), or verify the run by name");
                else
                    for (const auto &f : verify_checkpoint_list(*s, a.checkpoint_dir, pages)) lines.push_back(f.text(in.origins[f.position]));
            } else {
                for (const auto &f : verify_checkpoint_files(*s, a.checkpoint_dir)) lines.push_back(f.text(in.origins[f.position]));
            }
        }
    }
    std::map<std::string, std::pair<long long, std::string>> runs;   // run -> last seq, its kind
    for (const auto &r : res.receipts) {
        auto &last = runs[r.receipt.run];
        if (r.receipt.seq > last.first) last = {r.receipt.seq, kind_name(r.receipt.kind)};
    }
    if (a.json) {
        json::array rs, fs;
        for (const auto &r : res.receipts)
            rs.push_back(json::object{{"run", r.receipt.run}, {"seq", r.receipt.seq}, {"kind", kind_name(r.receipt.kind)},
                                      {"attempt", r.receipt.attempt}, {"broker", r.receipt.broker}, {"origin", in.origins[r.position]},
                                      {"digest", r.digest}, {"keyid", r.keyid}});
        for (const auto &l : lines) fs.push_back(json::string(l));
        json::object out{{"ok", lines.empty()}, {"receipts", std::move(rs)}, {"failures", std::move(fs)}};
        if (!head_report.empty()) out["log_head"] = std::move(head_report);
        if (head_reports.size() > 1) out["log_heads"] = head_reports;
        if (!ckpt_report.empty()) out["checkpoint"] = std::move(ckpt_report);
        std::printf("%s\n", json::serialize(out).c_str());
        return lines.empty() ? kOk : kFailed;
    }
    for (const auto &l : lines) std::printf("FAIL %s\n", l.c_str());
    for (const auto &[run, last] : runs)
        std::printf("run %s: receipts 1..%lld, last %s\n", run.c_str(), last.first, last.second.c_str());
    if (!ckpt_report.empty())
        std::printf("checkpoint %s: %zu shard(s) against run %s seq %lld\n", a.checkpoint_dir.c_str(),
                    std::size_t(ckpt_report.at("shards").as_uint64()), ckpt_report.at("run").as_string().c_str(),
                    (long long)ckpt_report.at("seq").as_int64());
    if (head_reports.size() > 1) head_report = {};
    auto print_head = [](const json::object &h) {
        std::printf("log head: tree size %s, root %s\n", json::serialize(h.at("tree_size")).c_str(), h.at("root_hash").as_string().c_str());
        if (const auto *k = h.if_contains("extends_kept_tree_size"))
            std::printf("log head: extends the head of size %s this CLI verified before\n", json::serialize(*k).c_str());
        if (const auto *w = h.if_contains("witnessed"); w && w->is_array())
            for (const auto &x : w->as_array()) {
                std::string by(x.at("by").as_string());
                for (char &c : by)
                    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
                std::printf("log head: broker %s witnessed it at size %s: the same history\n", by.c_str(), json::serialize(x.at("tree_size")).c_str());
            }
    };
    for (const auto &h : head_reports.size() > 1 ? head_reports : json::array{}) print_head(h.as_object());
    if (!head_report.empty()) print_head(head_report);
    if (lines.empty())
        std::printf("ok: %zu receipt(s) verified with %zu key(s)\n", res.receipts.size(), keys.size());
    else
        std::printf("FAILED: %zu problem(s) in %zu envelope(s)\n", lines.size(), in.envs.size() + in.bad.size());
    return lines.empty() ? kOk : kFailed;
}

int receipt_sign(const std::map<std::string, std::string> &opt) {
    auto get = [&](const char *k) { auto it = opt.find(k); return it == opt.end() ? std::string() : it->second; };
    if (get("key").empty() || get("statement").empty()) return usage_error("receipt-sign", "give --key PRIV.pem --statement FILE");
    SigningKey key;
    if (std::string err = load_private_key(get("key"), key); !err.empty()) return usage_error("receipt-sign", err);
    std::string text, err;
    if (!read_file(get("statement"), text, err)) return usage_error("receipt-sign", err);
    dsse::Envelope env{opt.count("payload-type") ? get("payload-type") : dsse::kInTotoPayloadType, text, {}};
    // A receipt is checked before it is signed: a tool that signs what the
    // verifier refuses would only make confusing test material.
    if (env.payload_type == dsse::kInTotoPayloadType) {
        Receipt r;
        if (err = parse_statement(text, r); !err.empty()) return usage_error("receipt-sign", get("statement") + ": " + err);
    }
    if (err = dsse::sign(key, env); !err.empty()) return usage_error("receipt-sign", err);
    std::printf("%s\n", dsse::to_json(env).c_str());
    return kOk;
}

int log_head(const std::map<std::string, std::string> &opt, const std::vector<std::string> &files) {
    auto it = opt.find("key");
    if (it == opt.end() || files.empty()) return usage_error("log-head", "give --key PRIV.pem [--from N] FILE...");
    SigningKey key;
    if (std::string err = load_private_key(it->second, key); !err.empty()) return usage_error("log-head", err);
    Input in;
    for (const auto &f : files) {
        std::string text, err;
        if (!read_file(f, text, err)) return usage_error("log-head", err);
        read_envelopes(f, text, in);
    }
    if (!in.bad.empty()) return usage_error("log-head", in.bad.front());
    merkle::MemoryTree tree;
    for (const auto &e : in.envs) tree.append(dsse::to_json(e));
    const uint64_t n = tree.size();
    const std::string now = utc_time(double(std::time(nullptr)));
    auto head = [&](uint64_t size, json::value &out) {
        dsse::Envelope env;
        std::string err = sign_tree_head(key, TreeHead{size, merkle::root(size, tree.source()), now}, env);
        out = dsse::to_json_object(env);
        return err;
    };
    json::object bundle;
    if (std::string err = head(n, bundle["head"]); !err.empty()) return usage_error("log-head", err);
    json::array inc;
    for (uint64_t i = 0; i < n; ++i)
        inc.push_back(json::object{{"leaf_hash", merkle::hex(merkle::leaf_hash(dsse::to_json(in.envs[i])))}, {"leaf_index", i},
                                   {"path", hex_array(merkle::inclusion_proof(i, n, tree.source()))}});
    bundle["inclusion"] = std::move(inc);
    if (opt.count("from")) {
        auto m = parse_int(opt.at("from"), 0, (long long)n);
        if (!m) return usage_error("log-head", "--from " + opt.at("from") + ": expected 0.." + std::to_string(n));
        json::object c;
        if (std::string err = head(uint64_t(*m), c["head"]); !err.empty()) return usage_error("log-head", err);
        c["path"] = hex_array(merkle::consistency_proof(uint64_t(*m), n, tree.source()));
        bundle["consistency"] = std::move(c);
    }
    std::printf("%s\n", json::serialize(bundle).c_str());
    return kOk;
}

}  // namespace shardnet::cli
