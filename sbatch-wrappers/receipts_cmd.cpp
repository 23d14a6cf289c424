#include "sbatch-wrappers/receipts_cmd.hpp"

#include <cstdio>
#include <set>

#include "common/dsse.hpp"
#include "common/receipt.hpp"
#include "common/receipt_verify.hpp"
#include "sbatch-wrappers/witness_cmd.hpp"

namespace shardnet::cli {

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxReceipts = std::size_t(256) << 20;   // as shard verify reads a file of them

// The brokers to ask, the configured one first, each URL once.
std::vector<BrokerRef> brokers_of(const CliConfig &cfg) {
    std::vector<BrokerRef> out{cfg.broker};
    std::set<std::string> urls{cfg.broker.url};
    for (const auto &[name, b] : cfg.brokers)
        if (urls.insert(b.url).second) out.push_back(b);
    if (out[0].name.empty())
        for (const auto &[name, b] : cfg.brokers)
            if (b.url == out[0].url) out[0].name = name;
    return out;
}

std::string label(const BrokerRef &b) { return b.name.empty() ? b.url : b.name; }

const json::array *array_at(const json::value &v, const char *k) {
    const auto *o = v.if_object();
    const auto *a = o ? o->if_contains(k) : nullptr;
    return a ? a->if_array() : nullptr;
}

// One broker's part of run: nullopt when it has none (404), else its log
// with a head bundle over the receipts it listed. err: what went wrong.
std::optional<FetchedLog> fetch_one(const BrokerRef &b, const std::string &run, std::string &err) {
    // Page by page, each receipt with its inclusion proof against one signed
    // head (the first page's): a request per thousand receipts, not per receipt.
    FetchedLog log;
    json::array inclusion;
    json::value head;
    long long size = 0;
    std::size_t bytes = 0;   // of every page: a broker that pages on forever is cut off
    for (long long after = 0;;) {
        std::string path = "/v1/runs/" + run + "/receipts?proofs=1";
        if (after > 0) path += "&after=" + std::to_string(after);
        if (size > 0) path += "&size=" + std::to_string(size);
        Answer r = call(b, "GET", path, "", 60000, kMaxReceipts);
        if (r.status == 404 && after == 0) return std::nullopt;
        if (!r.ok()) { err = label(b) + ": " + r.error; return std::nullopt; }
        bytes += r.bytes;
        if (bytes > kMaxReceipts) { err = label(b) + ": the receipts' pages pass " + std::to_string(kMaxReceipts >> 20) + " MiB"; return std::nullopt; }
        const json::array *rs = array_at(r.body, "receipts");
        if (!rs) { err = label(b) + ": the answer lists no receipts"; return std::nullopt; }
        const json::object &page = r.body.as_object();
        if (log.broker.empty())
            log.broker = page.contains("broker") && page.at("broker").is_string() ? std::string(page.at("broker").as_string()) : label(b);
        if (const auto *l = page.if_contains("log"); l && l->is_object() && size == 0) {
            const auto *ts = l->as_object().if_contains("tree_size");
            if (ts && ts->is_int64() && ts->as_int64() > 0 && l->as_object().contains("head")) size = ts->as_int64(), head = l->at("head");
        }
        for (const auto &x : *rs) {
            const auto *o = x.if_object();
            if (!o || !o->contains("envelope") || !o->contains("seq") || !o->at("seq").is_int64() || !o->contains("log_index") ||
                !o->at("log_index").is_int64()) {
                err = label(b) + ": a receipt entry without envelope, seq or log_index";
                return std::nullopt;
            }
            // In chain order, past the page asked for: anything else is a
            // broker that would have us page without end.
            const long long seq = o->at("seq").as_int64();
            if (seq <= (log.seqs.empty() ? after : std::max(after, log.seqs.back()))) {
                err = label(b) + ": receipt seq " + std::to_string(seq) + " listed out of order (after " + std::to_string(after) + ")";
                return std::nullopt;
            }
            log.envelopes.push_back(json::serialize(o->at("envelope")));
            log.seqs.push_back(seq);
            // What the verifier checks against the head's signed root, trusting none of it.
            if (const auto *in = o->if_contains("inclusion"); in && in->is_object() && in->as_object().contains("leaf_hash") &&
                in->as_object().contains("path"))
                inclusion.push_back(json::object{{"leaf_hash", in->at("leaf_hash")}, {"leaf_index", o->at("log_index")}, {"path", in->at("path")}});
        }
        const auto *next = page.if_contains("next_after");
        if (!next || !next->is_int64() || rs->empty()) break;
        if (next->as_int64() != log.seqs.back()) {
            err = label(b) + ": next_after " + std::to_string(next->as_int64()) + " is not the page's last seq " + std::to_string(log.seqs.back());
            return std::nullopt;
        }
        after = next->as_int64();
    }
    // Each receipt not shown in the head (no proof) then fails as such.
    if (size > 0) log.head_bundle = json::serialize(json::object{{"head", head}, {"inclusion", std::move(inclusion)}});
    // The head kept from this broker is filed under the URL the user gave,
    // never under the name the broker gives itself.
    log.url = b.url;
    log.consistency = [b](unsigned long long first, unsigned long long second, std::vector<std::string> &path) -> std::string {
        Answer c = call(b, "GET", "/v1/log/proof/consistency?first=" + std::to_string(first) + "&second=" + std::to_string(second));
        if (!c.ok()) return c.error;
        const json::array *p = array_at(c.body, "path");
        if (!p) return "the answer has no path";
        for (const auto &x : *p) {
            if (!x.is_string()) return "a path entry is not a string";
            path.emplace_back(x.as_string());
        }
        return "";
    };
    // A sealed checkpoint's file list, a page at a time (shard verify --checkpoint-dir).
    log.files_page = [b](const std::string &run, const std::string &checkpoint, unsigned long long from, std::string &body) -> std::string {
        Answer a = call(b, "GET", "/v1/runs/" + run + "/checkpoints/" + checkpoint + "/files?from=" + std::to_string(from), "", 60000,
                        std::size_t(64) << 20);
        if (!a.ok()) return a.error;
        body = json::serialize(a.body);
        return "";
    };
    Answer k = call(b, "GET", "/v1/keys");
    if (const json::array *ks = k.ok() ? array_at(k.body, "keys") : nullptr)
        for (const auto &key : *ks) {
            if (!key.is_object()) continue;
            const auto &o = key.as_object();
            if (o.contains("pem") && o.at("pem").is_string()) log.key_pems.emplace_back(o.at("pem").as_string());
            // A retired key's last day, by this broker's log: nothing it
            // signed later verifies (a keyid listed with another key's pem
            // is not taken).
            SigningKey k;
            const auto *until = o.if_contains("valid_until");
            if (until && until->is_string() && o.contains("pem") && o.at("pem").is_string() &&
                SigningKey::from_public_pem(o.at("pem").as_string(), k).empty() && o.contains("keyid") && o.at("keyid").is_string() &&
                o.at("keyid").as_string() == k.keyid())
                log.valid_until[k.keyid()] = std::string(until->as_string());
        }
    return log;
}

// A broker's string for the terminal: its control characters (an escape
// sequence a hostile broker put in a receipt) shown as '?'.
std::string printable(std::string s) {
    for (char &c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return s;
}

// What a receipt attests, in a few words.
std::string what(const receipt::Receipt &r) {
    auto s = [&](const char *k) {
        const auto *v = r.body.if_contains(k);
        return !v || v->is_null() ? std::string("-") : v->is_string() ? std::string(v->as_string()) : json::serialize(*v);
    };
    switch (r.kind) {
    case receipt::Kind::attempt_started: {
        std::string nodes;
        if (const auto *ns = r.body.if_contains("nodes"); ns && ns->is_array())
            for (const auto &n : ns->as_array())
                if (n.is_object() && n.as_object().contains("name") && n.at("name").is_string()) nodes += (nodes.empty() ? "" : ",") + std::string(n.at("name").as_string());
        std::string cause;
        if (const auto *c = r.body.if_contains("cause"); c && c->is_object() && c->as_object().contains("decision"))
            cause = " (decision " + json::serialize(c->at("decision")) + ")";
        // The ranks reported, and what the first group of them ran with.
        std::string ranks, env;
        if (const auto *rs = r.body.if_contains("ranks"); rs && rs->is_object() && !rs->as_object().empty())
            ranks = ", " + std::to_string(rs->as_object().size()) + " of " + s("world_size") + " rank(s) reported";
        if (const auto *es = r.body.if_contains("environment"); es && es->is_array() && !es->as_array().empty() && es->as_array()[0].is_object())
            for (const char *k : {"torch", "python", "cuda", "nccl", "driver", "image_digest"})
                if (const auto *v = es->as_array()[0].as_object().if_contains(k); v && v->is_string())
                    env += (env.empty() ? "; " : ", ") + std::string(k) + " " + std::string(v->as_string());
        return "job " + s("cluster") + "/" + s("job") + (nodes.empty() ? "" : " on " + nodes) + ranks + env + cause;
    }
    case receipt::Kind::checkpoint_sealed: {
        unsigned long long bytes = 0, count = r.subjects.size();
        for (const auto &sub : r.subjects)
            if (const auto *z = sub.annotations.if_contains("size"); z && z->is_number()) bytes += z->to_number<unsigned long long>();
        // A seal that commits its files as a Merkle root says how many.
        std::string root;
        if (const auto list = receipt::sealed_list(r)) count = list->count, bytes = list->bytes, root = ", root " + merkle::hex(list->root).substr(0, 16) + "...";
        return s("checkpoint") + (r.body.contains("step") ? " at step " + s("step") : "") + " (parent " + s("parent") + "): " + std::to_string(count) + " shard(s), " + std::to_string(bytes) + " bytes" + root;
    }
    case receipt::Kind::attempt_ended: {
        const std::string how = s("how");
        if (how == "moved") return "moved to " + s("moved_to");
        if (how == "fault") return "fault: " + s("cause");
        if (how == "exited") return r.body.contains("exit_codes") ? "exited " + s("exit_codes") : "exited (Slurm: " + s("slurm_job_state") + ")";
        return how;
    }
    case receipt::Kind::run_ended: return s("state");
    case receipt::Kind::attempt_restarted:
        return "in-job restart " + s("restart") + ": " + (r.body.contains("straggler") ? "straggler " + s("straggler") : "dead " + s("dead")) +
               " left out, " + s("took") + " took its place; nodes " + s("nodes");
    }
    return "";
}

}  // namespace

ReceiptFetcher broker_fetcher(const CliConfig &cfg, bool witness) {
    return [cfg, witness](const std::string &run, std::vector<FetchedLog> &logs) -> std::string {
        std::string errors;
        for (const auto &b : brokers_of(cfg)) {
            std::string err;
            if (auto log = fetch_one(b, run, err)) logs.push_back(std::move(*log));
            else if (!err.empty()) errors += (errors.empty() ? "" : "; ") + err;
        }
        if (logs.empty()) return errors.empty() ? "no broker has receipts of run " + run : errors;
        if (witness)
            for (auto &l : logs) fetch_witnesses(cfg, l);
        // A broker that did not answer may hold part of the chain: said, and
        // the chain's check shows what is missing.
        if (!errors.empty()) std::fprintf(stderr, "shard: verify: warning: %s\n", errors.c_str());
        return "";
    };
}

int show_receipts(const CliConfig &cfg, const std::string &run, bool as_json) {
    std::vector<FetchedLog> logs;
    if (std::string err = broker_fetcher(cfg)(run, logs); !err.empty()) {
        std::fprintf(stderr, "shard: receipts: %s\n", err.c_str());
        return err.find("HTTP") != std::string::npos || err.find("://") != std::string::npos ? 3 : 2;
    }
    struct Row { long long seq; std::string broker, text; };
    std::vector<Row> rows;
    for (const auto &l : logs)
        for (std::size_t i = 0; i < l.envelopes.size(); ++i) rows.push_back(Row{l.seqs[i], l.broker, l.envelopes[i]});
    std::stable_sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) { return a.seq < b.seq; });
    if (as_json) {
        json::array out;
        for (const auto &r : rows) out.push_back(json::parse(r.text));
        std::printf("%s\n", json::serialize(out).c_str());
        return 0;
    }
    std::printf("%-4s %-17s %-24s %-14s %-7s %s\n", "SEQ", "KIND", "TIME", "BROKER", "ATTEMPT", "ATTESTS");
    for (const auto &r : rows) {
        dsse::Envelope env;
        receipt::Receipt rc;
        std::string err = dsse::from_json(r.text, env);
        if (err.empty()) err = receipt::parse_statement(env.payload, rc);
        // Shown, not verified: shard verify checks signatures and the chain.
        if (!err.empty()) { std::printf("%-4lld %-17s (unreadable: %s)\n", r.seq, "?", printable(err).c_str()); continue; }
        std::printf("%-4lld %-17s %-24s %-14s %-7lld %s\n", rc.seq, receipt::kind_name(rc.kind), printable(rc.time).c_str(),
                    printable(rc.broker).c_str(), rc.attempt, printable(what(rc)).c_str());
    }
    std::printf("%zu receipt(s) of run %s (not verified: shard verify %s checks them)\n", rows.size(), run.c_str(), run.c_str());
    return 0;
}

}  // namespace shardnet::cli
