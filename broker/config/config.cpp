#include "broker/config/config.hpp"

#include <boost/json.hpp>
#include <functional>
#include <map>
#include <set>

#include "broker/config/config_read.hpp"
#include "common/worker_token.hpp"

namespace shardnet::broker {

std::vector<std::string> default_environment_drop() {
    return {"SLURM_*", "SLURMD_*", "SBATCH_*", "SALLOC_*", "SRUN_*", "SPANK_*", "SHARDNET_*", "TORCHELASTIC_*",
            // the step's rendezvous, set anew for every step
            "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
            // the host's and the session's
            "HOSTNAME", "HOST", "PWD", "OLDPWD", "SHLVL", "_", "SSH_*", "DISPLAY", "XDG_RUNTIME_DIR", "XDG_SESSION_*", "TMUX",
            "TMUX_PANE", "KRB5CCNAME", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"};
}


namespace json = boost::json;
using namespace config_read;

const char *scope_name(Scope s) {
    switch (s) {
    case Scope::worker: return "worker";
    case Scope::user: return "user";
    case Scope::peer: return "peer";
    case Scope::admin: return "admin";
    }
    return "worker";
}

std::string parse_broker_config(const std::string &text, BrokerConfig &cfg) {
    cfg = BrokerConfig{};
    json::error_code ec;
    json::value root = json::parse(text, ec);
    if (ec) return "config is not valid JSON: " + ec.message();
    if (!root.is_object()) return "config: expected a JSON object";
    Ctx c;
    const auto &o = root.as_object();
    if (!only_keys(c, "", o, {"listen", "plain_http", "tls", "database", "cluster", "threads", "limits", "detector", "tokens", "clusters",
                            "worker_keys", "slurm", "broker_name", "peers", "requeue", "checkpoint_policy", "receipts",
                            "witness_seconds"}))
        return c.err;
    long long n = 0;
    if (auto *v = o.if_contains("listen")) {
        std::string l;
        if (!get_str(c, "listen", *v, l)) return c.err;
        auto colon = l.rfind(':');
        if (colon == std::string::npos || colon == 0) return "listen: expected HOST:PORT";
        cfg.listen_host = l.substr(0, colon);
        if (cfg.listen_host.front() == '[' && cfg.listen_host.back() == ']') cfg.listen_host = cfg.listen_host.substr(1, cfg.listen_host.size() - 2);
        try {
            std::size_t used = 0;
            long p = std::stol(l.substr(colon + 1), &used);
            if (used != l.size() - colon - 1 || p < 0 || p > 65535) throw std::out_of_range("port");
            cfg.listen_port = static_cast<unsigned short>(p);
        } catch (...) {
            return "listen: port must be 0..65535";
        }
    }
    if (auto *v = o.if_contains("plain_http")) {
        if (!v->is_bool()) return "plain_http: expected true or false";
        cfg.plain_http = v->as_bool();
    }
    if (auto *v = o.if_contains("tls")) {
        if (!v->is_object()) return "tls: expected an object";
        const auto &t = v->as_object();
        if (!only_keys(c, "tls", t, {"cert", "key"})) return c.err;
        if (!t.contains("cert") || !t.contains("key")) return "tls: needs cert and key";
        if (!get_str(c, "tls.cert", t.at("cert"), cfg.tls_cert) || !get_str(c, "tls.key", t.at("key"), cfg.tls_key)) return c.err;
    }
    if (!cfg.plain_http && cfg.tls_cert.empty()) return "tls: required (or say \"plain_http\": true, for tests on loopback)";
    if (cfg.plain_http && !cfg.tls_cert.empty()) return "plain_http: true together with tls: choose one";
    if (auto *v = o.if_contains("database"); v && !get_str(c, "database", *v, cfg.database)) return c.err;
    if (auto *v = o.if_contains("cluster"); v && !get_str(c, "cluster", *v, cfg.cluster)) return c.err;
    if (auto *v = o.if_contains("threads")) {
        if (!get_int(c, "threads", *v, 1, 256, n)) return c.err;
        cfg.threads = int(n);
    }
    if (auto *v = o.if_contains("limits"))
        if (std::string err = parse_limits(c, v, cfg); !err.empty()) return err;
    if (auto *v = o.if_contains("detector"))
        if (std::string err = parse_detector(c, v, cfg); !err.empty()) return err;
    if (auto *v = o.if_contains("slurm"))
        if (std::string err = parse_slurm(c, v, cfg); !err.empty()) return err;
    if (auto *v = o.if_contains("clusters"))
        if (std::string err = parse_clusters(c, v, cfg); !err.empty()) return err;
    if (auto *v = o.if_contains("broker_name"); v && !get_str(c, "broker_name", *v, cfg.broker_name)) return c.err;
    if (auto *v = o.if_contains("peers"))
        if (std::string err = parse_peers(c, v, cfg); !err.empty()) return err;
    if (auto *v = o.if_contains("worker_keys"))
        if (std::string err = parse_worker_keys(c, v, cfg); !err.empty()) return err;
    if (auto *v = o.if_contains("receipts"))
        if (std::string err = parse_receipts(c, *v, cfg.receipts); !err.empty()) return err;
    if (auto *v = o.if_contains("tokens"))
        if (std::string err = parse_tokens(c, v, cfg); !err.empty()) return err;
    if (auto *v = o.if_contains("requeue"))
        if (std::string err = parse_requeue(c, v, cfg); !err.empty()) return err;
    if (auto *v = o.if_contains("checkpoint_policy"))
        if (std::string err = parse_checkpoint_policy(c, v, cfg); !err.empty()) return err;
    if (auto *v = o.if_contains("witness_seconds")) {
        if (!get_int(c, "witness_seconds", *v, 0, 86400, n)) return c.err;
        cfg.witness_seconds = int(n);
    }
    if (cfg.broker_name.empty()) cfg.broker_name = cfg.cluster;
    return "";
}

std::string config_template() {
    return R"({
  "_doc": "shardnet-broker configuration; see shardnet-broker(8). Unknown keys are errors. Signed receipts: add \"receipts\": {\"key_file\": \"/etc/shardnet/receipts.key\", \"public_keys\": []} (an Ed25519 key, root 0600).",
  "listen": "0.0.0.0:8443",
  "tls": {"cert": "/etc/shardnet/broker.crt", "key": "/etc/shardnet/broker.key"},
  "database": "/var/lib/shardnet/broker.db",
  "cluster": "alpha",
  "threads": 2,
  "limits": {"header_bytes": 8192, "body_bytes": 1048576, "read_timeout_ms": 10000,
             "max_connections": 10000, "rate_per_token": 100000, "rate_burst": 200000,
             "sse_keepalive_ms": 15000, "store_busy_ms": 2000, "sse_buffer_bytes": 1048576, "drain_seconds": 10},
  "detector": {"misses": 3, "stall_seconds": 600, "summary_seconds": 10, "quarantine_seconds": 600,
               "straggler_fraction": 0.5, "straggler_window_seconds": 60, "straggler_windows": 2},
  "slurm": {"_doc": "every slurmctld call: answers reused for cache_ms, at most max_calls_per_second",
            "cache_ms": 1000, "max_calls_per_second": 20},
  "worker_keys": [],
  "checkpoint_policy": {"_doc": "--shardnet-ckpt-every=auto: priors until measured, bounds on the interval; see doc/checkpoint-policy.md",
                        "mtbf_node_hours": 5000, "restart_seconds": 300, "min_seconds": 60, "max_seconds": 86400,
                        "min_steps": 1, "hysteresis": 0.2},
  "requeue": {"_doc": "jobs are submitted only as their real owner, never as uid 0, the SlurmUser or a uid below min_uid",
              "min_uid": 1000},
  "tokens": [
    {"_doc": "sha256 is `printf %s TOKEN | sha256sum`; a static worker token only publishes node descriptors",
     "name": "site-probes", "scope": "worker", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"},
    {"_doc": "a user token acts for the Unix account 'user', by default its name", "name": "alice", "scope": "user", "user": "alice",
     "sha256": "0000000000000000000000000000000000000000000000000000000000000000"},
    {"name": "ops", "scope": "admin", "sha256": "0000000000000000000000000000000000000000000000000000000000000000"}
  ]
}
)";
}

}  // namespace shardnet::broker
