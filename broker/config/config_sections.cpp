// The broker config's sections, each a parser of its own (config_read.hpp).
#include <boost/json.hpp>
#include <functional>

#include "broker/config/config_read.hpp"
#include "common/safe_path.hpp"
#include "common/worker_token.hpp"

namespace shardnet::broker::config_read {

// "receipts": {"key_file": PRIVATE.pem, "public_keys": [RETIRED.pem, ...]}.
// The private key is checked like every secret file (load_private_key:
// root or this user's, not group/other readable, no symlink).
std::string parse_receipts(Ctx &c, const json::value &v, ReceiptKeys &out) {
    if (!v.is_object()) return "receipts: expected an object";
    const auto &r = v.as_object();
    if (!only_keys(c, "receipts", r, {"key_file", "public_keys"})) return c.err;
    if (!r.contains("key_file"))
        return "receipts: needs key_file (an Ed25519 private key: openssl genpkey -algorithm ed25519 -out KEY; chmod 600 KEY)";
    if (!get_str(c, "receipts.key_file", r.at("key_file"), out.key_file)) return c.err;
    if (out.key_file[0] != '/') return "receipts.key_file: expected an absolute path";
    if (std::string err = load_private_key(out.key_file, out.key); !err.empty()) return "receipts.key_file: " + err;
    if (auto *pk = r.if_contains("public_keys")) {
        if (!pk->is_array()) return "receipts.public_keys: expected an array of PEM files (the public halves of retired keys)";
        std::size_t i = 0;
        for (const auto &f : pk->as_array()) {
            const std::string path = "receipts.public_keys[" + std::to_string(i++) + "]";
            std::string file;
            if (!get_str(c, path, f, file)) return c.err;
            if (file[0] != '/') return path + ": expected an absolute path";
            if (std::string err = load_public_keys(file, out.retired); !err.empty()) return path + ": " + err;
            out.public_key_files.push_back(file);
        }
    }
    // The current key listed again as retired would show twice at /v1/keys.
    std::erase_if(out.retired, [&](const SigningKey &k) { return k.keyid() == out.key.keyid(); });
    return "";
}


std::string parse_limits(Ctx &c, const json::value *v, BrokerConfig &cfg) {
    [[maybe_unused]] long long n = 0;
    if (!v->is_object()) return "limits: expected an object";
    const auto &l = v->as_object();
    if (!only_keys(c, "limits", l, {"header_bytes", "body_bytes", "read_timeout_ms", "max_connections", "rate_per_token", "rate_burst",
                                   "sse_keepalive_ms", "store_busy_ms", "sse_buffer_bytes", "sse_max_streams", "sse_streams_per_token",
                                   "list_requests_per_token", "requests_per_token", "runs_per_user", "drain_seconds"}))
        return c.err;
    struct F { const char *k; long long lo, hi; std::function<void(long long)> set; };
    for (const F &f : {F{"header_bytes", 1024, 1 << 20, [&](long long x) { cfg.header_bytes = std::size_t(x); }},
                       F{"body_bytes", 1024, 64 << 20, [&](long long x) { cfg.body_bytes = std::size_t(x); }},
                       F{"read_timeout_ms", 100, 600000, [&](long long x) { cfg.read_timeout_ms = int(x); }},
                       F{"max_connections", 1, 1000000, [&](long long x) { cfg.max_connections = int(x); }},
                       F{"rate_per_token", 1, 100000000, [&](long long x) { cfg.rate_per_token = double(x); }},
                       F{"rate_burst", 1, 100000000, [&](long long x) { cfg.rate_burst = double(x); }},
                       F{"sse_keepalive_ms", 100, 3600000, [&](long long x) { cfg.sse_keepalive_ms = int(x); }},
                       F{"store_busy_ms", 10, 60000, [&](long long x) { cfg.store_busy_ms = int(x); }},
                       F{"sse_buffer_bytes", 4096, 1LL << 30, [&](long long x) { cfg.sse_buffer_bytes = std::size_t(x); }},
                       F{"sse_max_streams", 1, 1000000, [&](long long x) { cfg.sse_max_streams = int(x); }},
                       F{"sse_streams_per_token", 1, 100000, [&](long long x) { cfg.sse_streams_per_token = int(x); }},
                       F{"list_requests_per_token", 1, 10000, [&](long long x) { cfg.list_requests_per_token = int(x); }},
                       F{"requests_per_token", 1, 100000, [&](long long x) { cfg.requests_per_token = int(x); }},
                       F{"runs_per_user", 1, 100000000, [&](long long x) { cfg.runs_per_user = int(x); }},
                       F{"drain_seconds", 1, 3600, [&](long long x) { cfg.drain_seconds = int(x); }}})
        if (auto *x = l.if_contains(f.k)) {
            if (!get_int(c, std::string("limits.") + f.k, *x, f.lo, f.hi, n)) return c.err;
            f.set(n);
        }
    if (cfg.sse_max_streams >= cfg.max_connections)
        return "limits.sse_max_streams: must be below limits.max_connections (" + std::to_string(cfg.max_connections) +
               "): streams must leave connections for heartbeats";
    return "";
}

std::string parse_detector(Ctx &c, const json::value *v, BrokerConfig &cfg) {
    [[maybe_unused]] long long n = 0;
    if (!v->is_object()) return "detector: expected an object";
    const auto &d = v->as_object();
    if (!only_keys(c, "detector", d, {"misses", "stall_seconds", "summary_seconds", "quarantine_seconds", "drain_bad_nodes", "drain_faults",
                                      "drain_window_seconds", "straggler_fraction", "straggler_window_seconds", "straggler_windows"}))
        return c.err;
    if (auto *x = d.if_contains("drain_bad_nodes")) {
        if (!x->is_bool()) return "detector.drain_bad_nodes: expected true or false";
        cfg.drain_bad_nodes = x->as_bool();
    }
    if (auto *x = d.if_contains("drain_faults")) {
        if (!get_int(c, "detector.drain_faults", *x, 1, 1000, n)) return c.err;
        cfg.drain_faults = int(n);
    }
    if (auto *x = d.if_contains("drain_window_seconds")) {
        if (!get_int(c, "detector.drain_window_seconds", *x, 60, 86400 * 30, n)) return c.err;
        cfg.drain_window_seconds = int(n);
    }
    if (auto *x = d.if_contains("quarantine_seconds")) {
        if (!get_int(c, "detector.quarantine_seconds", *x, 0, 86400 * 7, n)) return c.err;
        cfg.quarantine_seconds = int(n);
    }
    if (auto *x = d.if_contains("misses")) { if (!get_int(c, "detector.misses", *x, 1, 100, n)) return c.err; cfg.detector_misses = int(n); }
    if (auto *x = d.if_contains("stall_seconds")) { if (!get_int(c, "detector.stall_seconds", *x, 1, 86400 * 7, n)) return c.err; cfg.stall_seconds = int(n); }
    if (auto *x = d.if_contains("straggler_fraction")) {
        if (!get_num(c, "detector.straggler_fraction", *x, 0, 1, cfg.straggler_fraction)) return c.err;
    }
    if (auto *x = d.if_contains("straggler_window_seconds")) {
        if (!get_int(c, "detector.straggler_window_seconds", *x, 1, 86400, n)) return c.err;
        cfg.straggler_window_seconds = int(n);
    }
    if (auto *x = d.if_contains("straggler_windows")) {
        if (!get_int(c, "detector.straggler_windows", *x, 1, 100, n)) return c.err;
        cfg.straggler_windows = int(n);
    }
    if (auto *x = d.if_contains("summary_seconds")) { if (!get_int(c, "detector.summary_seconds", *x, 1, 3600, n)) return c.err; cfg.summary_seconds = int(n); }
    return "";
}

std::string parse_slurm(Ctx &c, const json::value *v, BrokerConfig &cfg) {
    [[maybe_unused]] long long n = 0;
    if (!v->is_object()) return "slurm: expected an object";
    const auto &s = v->as_object();
    if (!only_keys(c, "slurm", s, {"cache_ms", "max_calls_per_second"})) return c.err;
    if (auto *x = s.if_contains("cache_ms")) { if (!get_int(c, "slurm.cache_ms", *x, 0, 60000, n)) return c.err; cfg.slurm_cache_ms = int(n); }
    if (auto *x = s.if_contains("max_calls_per_second")) {
        if (!get_int(c, "slurm.max_calls_per_second", *x, 1, 10000, n)) return c.err;
        cfg.slurm_max_per_second = int(n);
    }
    return "";
}

std::string parse_clusters(Ctx &c, const json::value *v, BrokerConfig &cfg) {
    [[maybe_unused]] long long n = 0;
    if (!v->is_object()) return "clusters: expected an object of NAME: {slurm_conf}";
    for (const auto &kv : v->as_object()) {
        std::string path = "clusters." + std::string(kv.key());
        if (!kv.value().is_object()) return path + ": expected {\"slurm_conf\": PATH}";
        const auto &co = kv.value().as_object();
        if (!only_keys(c, path, co, {"slurm_conf", "region", "ckpt_roots", "names", "containers", "image_roots"})) return c.err;
        if (!co.contains("slurm_conf")) return path + ": needs slurm_conf";
        std::string conf;
        if (!get_str(c, path + ".slurm_conf", co.at("slurm_conf"), conf)) return c.err;
        if (conf[0] != '/') return path + ".slurm_conf: expected an absolute path";
        cfg.clusters[std::string(kv.key())] = conf;
        BrokerConfig::ClusterInfo info;
        if (auto *r = co.if_contains("region"); r && !get_str(c, path + ".region", *r, info.region)) return c.err;
        if (auto *r = co.if_contains("ckpt_roots")) {
            if (!r->is_array()) return path + ".ckpt_roots: expected an array of absolute paths";
            for (const auto &e : r->as_array()) {
                if (!e.is_string() || e.as_string().empty() || e.as_string()[0] != '/')
                    return path + ".ckpt_roots: expected an array of absolute paths";
                info.ckpt_roots.emplace_back(e.as_string());
            }
        }
        // Compared a path component at a time with a layout's path: each
        // plain; an empty list would read as "anywhere", so it is refused.
        if (auto *r = co.if_contains("image_roots")) {
            if (!r->is_array() || r->as_array().empty())
                return path + ".image_roots: expected a non-empty array of absolute paths (leave it out: every path is read there)";
            for (const auto &e : r->as_array()) {
                if (!e.is_string()) return path + ".image_roots: expected a non-empty array of absolute paths";
                if (auto err = check_path_syntax(std::string(e.as_string())); !err.empty()) return path + ".image_roots: " + err;
                info.image_roots.emplace_back(e.as_string());
            }
        }
        if (auto *r = co.if_contains("names"))
            if (std::string bad = parse_name_table(*r, path + ".names", info.names); !bad.empty()) return bad;
        if (auto *r = co.if_contains("containers")) {
            if (!r->is_bool()) return path + ".containers: expected true or false";
            info.containers = r->as_bool();
        }
        cfg.cluster_info[std::string(kv.key())] = std::move(info);
    }
    return "";
}

std::string parse_peers(Ctx &c, const json::value *v, BrokerConfig &cfg) {
    [[maybe_unused]] long long n = 0;
    if (!v->is_array()) return "peers: expected an array";
    std::size_t i = 0;
    for (const auto &p : v->as_array()) {
        std::string path = "peers[" + std::to_string(i++) + "]";
        if (!p.is_object()) return path + ": expected an object";
        const auto &po = p.as_object();
        if (!only_keys(c, path, po, {"name", "url", "token_file", "ca_file"})) return c.err;
        if (!po.contains("name") || !po.contains("url") || !po.contains("token_file"))
            return path + ": needs name, url and token_file";
        BrokerConfig::Peer peer;
        if (!get_str(c, path + ".name", po.at("name"), peer.name) || !get_str(c, path + ".url", po.at("url"), peer.url) ||
            !get_str(c, path + ".token_file", po.at("token_file"), peer.token_file))
            return c.err;
        if (auto *ca = po.if_contains("ca_file"); ca && !get_str(c, path + ".ca_file", *ca, peer.ca_file)) return c.err;
        if (peer.url.rfind("https://", 0) != 0 && !(cfg.plain_http && peer.url.rfind("http://", 0) == 0))
            return path + ".url: expected https:// (plain http only when this broker is plain_http too)";
        while (!peer.url.empty() && peer.url.back() == '/') peer.url.pop_back();
        std::string err;
        peer.token = read_worker_key(peer.token_file, err);  // a file holding one secret, read the same way
        if (!err.empty()) return path + ".token_file: " + err;
        cfg.peers.push_back(std::move(peer));
    }
    return "";
}

std::string parse_worker_keys(Ctx &c, const json::value *v, BrokerConfig &cfg) {
    [[maybe_unused]] long long n = 0;
    if (!v->is_array()) return "worker_keys: expected an array";
    std::size_t i = 0;
    for (const auto &k : v->as_array()) {
        std::string path = "worker_keys[" + std::to_string(i++) + "]";
        if (!k.is_object()) return path + ": expected an object";
        const auto &ko = k.as_object();
        if (!only_keys(c, path, ko, {"name", "key_file"})) return c.err;
        if (!ko.contains("name") || !ko.contains("key_file")) return path + ": needs name and key_file";
        WorkerKey wk;
        if (!get_str(c, path + ".name", ko.at("name"), wk.name) || !get_str(c, path + ".key_file", ko.at("key_file"), wk.key_file))
            return c.err;
        if (wk.key_file[0] != '/') return path + ".key_file: expected an absolute path";
        std::string err;
        wk.key = read_worker_key(wk.key_file, err);
        if (!err.empty()) return path + ".key_file: " + err;
        cfg.worker_keys.push_back(std::move(wk));
    }
    return "";
}

std::string parse_tokens(Ctx &c, const json::value *v, BrokerConfig &cfg) {
    [[maybe_unused]] long long n = 0;
    if (!v->is_array()) return "tokens: expected an array";
    std::size_t i = 0;
    for (const auto &t : v->as_array()) {
        std::string path = "tokens[" + std::to_string(i++) + "]";
        if (!t.is_object()) return path + ": expected an object";
        const auto &to = t.as_object();
        if (!only_keys(c, path, to, {"name", "sha256", "scope", "run", "user", "users"})) return c.err;
        TokenEntry e;
        std::string scope;
        if (!to.contains("name") || !to.contains("sha256") || !to.contains("scope")) return path + ": needs name, sha256 and scope";
        if (!get_str(c, path + ".name", to.at("name"), e.name) || !get_str(c, path + ".sha256", to.at("sha256"), e.sha256) ||
            !get_str(c, path + ".scope", to.at("scope"), scope))
            return c.err;
        if (!is_hex64(e.sha256)) return path + ".sha256: expected 64 lower-case hex digits (sha256sum of the token)";
        if (scope == "worker") e.scope = Scope::worker;
        else if (scope == "user") e.scope = Scope::user;
        else if (scope == "peer") e.scope = Scope::peer;
        else if (scope == "admin") e.scope = Scope::admin;
        else return path + ".scope: expected worker, user, peer or admin";
        if (auto *r = to.if_contains("run"); r && !get_str(c, path + ".run", *r, e.run)) return c.err;
        if (auto *u = to.if_contains("user")) {
            if (e.scope != Scope::user) return path + ".user: only user tokens act for a Unix user";
            if (!get_str(c, path + ".user", *u, e.user)) return c.err;
        }
        if (e.scope == Scope::user && e.user.empty()) e.user = e.name;
        if (auto *us = to.if_contains("users")) {
            if (e.scope != Scope::peer) return path + ".users: only peer tokens name the accounts they may submit for";
            if (!us->is_array()) return path + ".users: expected an array of account names";
            for (const auto &u : us->as_array()) {
                if (!u.is_string() || u.as_string().empty() || u.as_string().size() > 64)
                    return path + ".users: expected account names";
                e.users.emplace_back(u.as_string());
            }
        }
        cfg.tokens.push_back(e);
    }
    return "";
}

std::string parse_requeue(Ctx &c, const json::value *v, BrokerConfig &cfg) {
    [[maybe_unused]] long long n = 0;
    if (!v->is_object()) return "requeue: expected an object";
    const auto &r = v->as_object();
    if (!only_keys(c, "requeue", r, {"min_uid", "environment_drop", "timeout_max_attempts"})) return c.err;
    if (auto *m = r.if_contains("timeout_max_attempts")) {
        if (!get_int(c, "requeue.timeout_max_attempts", *m, 0, 1000, n)) return c.err;
        cfg.timeout_max_attempts = n;
    }
    if (auto *d = r.if_contains("environment_drop")) {
        if (!d->is_array() || d->as_array().size() > 1024) return "requeue.environment_drop: expected a list of NAME or PREFIX* strings";
        cfg.environment_drop.clear();
        for (const auto &x : d->as_array()) {
            const std::string p = x.is_string() ? std::string(x.as_string()) : "";
            const std::string name = !p.empty() && p.back() == '*' ? p.substr(0, p.size() - 1) : p;
            bool ok = !name.empty() && name.size() <= 255;
            for (char ch : name) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
            if (!ok) return "requeue.environment_drop: \"" + p.substr(0, 64) + "\" is not a NAME or PREFIX* of [A-Za-z0-9_]";
            cfg.environment_drop.push_back(p);
        }
    }
    if (auto *m = r.if_contains("min_uid")) {
        if (!get_int(c, "requeue.min_uid", *m, 1, 4294967294LL, n)) return c.err;
        cfg.min_uid = n;
    }
    return "";
}

std::string parse_checkpoint_policy(Ctx &c, const json::value *v, BrokerConfig &cfg) {
    [[maybe_unused]] long long n = 0;
    if (!v->is_object()) return "checkpoint_policy: expected an object";
    const auto &p = v->as_object();
    if (!only_keys(c, "checkpoint_policy", p, {"mtbf_node_hours", "restart_seconds", "min_seconds", "max_seconds", "min_steps", "hysteresis"}))
        return c.err;
    auto &cp = cfg.ckpt_policy;
    struct D { const char *k; double lo, hi; double *out; };
    for (const D &d : {D{"mtbf_node_hours", 1e-3, 1e7, &cp.mtbf_node_hours}, D{"restart_seconds", 0, 7 * 86400.0, &cp.restart_seconds},
                       D{"min_seconds", 0, 30 * 86400.0, &cp.min_seconds}, D{"max_seconds", 1, 30 * 86400.0, &cp.max_seconds},
                       D{"hysteresis", 0, 10, &cp.hysteresis}})
        if (auto *x = p.if_contains(d.k); x && !get_num(c, std::string("checkpoint_policy.") + d.k, *x, d.lo, d.hi, *d.out)) return c.err;
    if (auto *x = p.if_contains("min_steps")) {
        if (!get_int(c, "checkpoint_policy.min_steps", *x, 1, 1LL << 40, n)) return c.err;
        cp.min_steps = n;
    }
    if (cp.min_seconds > cp.max_seconds) return "checkpoint_policy: min_seconds is above max_seconds";
    return "";
}

}  // namespace shardnet::broker::config_read
