#include "sbatch-wrappers/witness_cmd.hpp"

#include <algorithm>
#include <set>

#include "common/dsse.hpp"
#include "common/merkle.hpp"
#include "common/tree_head.hpp"

namespace shardnet::cli {

namespace json = boost::json;

namespace {

// A broker's word for the terminal: control characters shown as '?'.
std::string shown(std::string s) {
    for (char &c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return s.substr(0, 200);
}

}  // namespace

void fetch_witnesses(const CliConfig &cfg, FetchedLog &log) {
    // Every broker of the config but this one, each URL once, by its name
    // where the config gives one.
    std::vector<BrokerRef> others;
    std::set<std::string> urls{log.url};
    for (const auto &[name, b] : cfg.brokers)
        if (urls.insert(b.url).second) others.push_back(b), others.back().name = name;
    if (urls.insert(cfg.broker.url).second) others.push_back(cfg.broker);
    for (const auto &w : others) {
        const std::string by = w.name.empty() ? w.url : w.name;
        Answer r = call(w, "GET", "/v1/witness");
        const json::value *heads = r.ok() && r.body.is_object() ? r.body.as_object().if_contains("heads") : nullptr;
        if (!heads || !heads->is_array()) {
            log.witness_errors.push_back("broker " + shown(by) + ": " + (r.ok() ? "the answer lists no heads" : r.error));
            continue;
        }
        for (const auto &h : heads->as_array()) {
            const json::object *o = h.if_object();
            const json::value *peer = o ? o->if_contains("peer") : nullptr;
            if (!peer || !peer->is_string() || peer->as_string() != log.broker || !o->contains("head")) continue;
            std::string conflict;
            if (const json::value *c = o->if_contains("conflict"); c && c->is_object()) {
                const json::value *why = c->as_object().if_contains("why");
                conflict = why && why->is_string() ? std::string(why->as_string()) : "a conflict";
            }
            log.witnessed.push_back(FetchedLog::Witnessed{by, json::serialize(o->at("head")), conflict});
        }
    }
}

std::vector<std::string> check_witnesses(const FetchedLog &log, const json::object &head_report, const std::vector<SigningKey> &keys,
                                         const receipt::KeyRetirements &retired,
                                         json::object &report) {
    std::vector<std::string> lines;
    const std::string who = "broker " + shown(log.broker);
    if (log.witnessed.empty()) {
        std::string asked;
        for (const auto &e : log.witness_errors) asked += "; " + e;
        lines.push_back(who + ": no other broker witnessed its log (--witness asks the config's other brokers, GET /v1/witness)" + asked);
        return lines;
    }
    const auto n = head_report.at("tree_size").to_number<unsigned long long>();
    const merkle::Hash root = *merkle::from_hex(head_report.at("root_hash").as_string());
    json::array agreed;
    for (const auto &w : log.witnessed) {
        const std::string by = "broker " + shown(w.by);
        if (!w.conflict.empty()) {
            lines.push_back(by + " saw " + who + " show another history: " + shown(w.conflict));
            continue;
        }
        dsse::Envelope env;
        receipt::TreeHead seen;
        std::string err = dsse::from_json(w.head, env);
        if (err.empty()) err = receipt::verify_tree_head_in_time(env, keys, retired, seen);
        if (!err.empty()) {
            lines.push_back(by + "'s witnessed head of " + who + " does not verify with its keys: " + shown(err));
            continue;
        }
        // One history: the smaller head is a prefix of the larger one, as
        // the broker's own consistency proof shows (a witness may have seen
        // a newer head than the one fetched here: the log grows meanwhile).
        const unsigned long long m = seen.tree_size;
        if (m == n && seen.root_hash != root) {
            lines.push_back(who + " showed " + by + " another root for size " + std::to_string(n) + ": a second history");
            continue;
        }
        const unsigned long long lo = std::min(m, n), hi = std::max(m, n);
        if (lo > 0 && lo < hi) {
            const merkle::Hash &lo_root = m < n ? seen.root_hash : root, &hi_root = m < n ? root : seen.root_hash;
            std::vector<std::string> path;
            err = log.consistency ? log.consistency(lo, hi, path) : "no broker to ask for it";
            std::vector<merkle::Hash> proof;
            for (const auto &x : path) {
                auto h = merkle::from_hex(x);
                if (!h) { err = "a proof hash that is not 64 hex digits"; break; }
                proof.push_back(*h);
            }
            if (!err.empty()) {
                lines.push_back(who + ": the head of size " + std::to_string(m) + " " + by + " witnessed and the one of size " + std::to_string(n) +
                                " it shows you are not shown to be one history: no consistency proof: " + shown(err));
                continue;
            }
            if (!merkle::verify_consistency(lo, hi, lo_root, hi_root, proof)) {
                lines.push_back(who + " showed " + by + " a log of size " + std::to_string(m) + " and you one of size " + std::to_string(n) +
                                " that are not one history (the consistency proof fails): a second history");
                continue;
            }
        }
        agreed.push_back(json::object{{"by", w.by}, {"tree_size", m}});
    }
    report["witnessed"] = std::move(agreed);
    return lines;
}

}  // namespace shardnet::cli
