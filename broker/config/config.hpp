// shardnet-broker's configuration: one JSON file, validated whole. Unknown
// keys are errors, so a typo never silently falls back to a default.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "broker/slurm/name_map.hpp"
#include "common/signing_key.hpp"

namespace shardnet::broker {

enum class Scope { worker, user, peer, admin };

struct TokenEntry {
    std::string name;      // who: a user name, "site-agents", a peer broker
    std::string sha256;    // hex SHA-256 of the token; tokens are never stored
    Scope scope = Scope::worker;
    std::string run;       // worker tokens may be tied to one run
    unsigned long long attempt = 0;  // and to one attempt (0: any)
    // User tokens: the Unix account they act for (default: name). A run a
    // user token creates belongs to that account's uid.
    std::string user{};
    // Peer tokens: the local accounts a peer's decisions may run as (empty:
    // any ordinary account, see requeue.min_uid).
    std::vector<std::string> users{};
    // Derived worker tokens (common/worker_token.hpp) only: the job the
    // token was made for in slurmstepd. Static worker tokens have none and
    // may only publish node descriptors.
    bool bound = false;
    unsigned long long world = 0, uid = 0, job = 0;
    std::string cluster{};
    // A reader token (common/worker_token.hpp): GET routes only.
    bool read_only = false;
};

// A site key from which per-run, per-attempt worker tokens are derived (see
// common/worker_token.hpp): the same file as the plugin's worker_key_file.
struct WorkerKey {
    std::string name, key_file, key;
};

// Signed receipts (doc/receipts.md): the broker's Ed25519 signing key and
// the public halves of keys it signed with before (rotation keeps them
// listed at GET /v1/keys, so old receipts still verify). Read when the
// config is (re)loaded; no key: the broker signs nothing.
struct ReceiptKeys {
    std::string key_file;
    std::vector<std::string> public_key_files;
    SigningKey key;                  // empty: receipts are off
    std::vector<SigningKey> retired;
    bool on() const { return !key.empty(); }
};

// The site policy's default for a job's environment: names that belong to
// the job, the host or Slurm, never replayed into a later attempt (a
// trailing * matches a prefix).
std::vector<std::string> default_environment_drop();

struct BrokerConfig {
    std::string listen_host = "127.0.0.1";
    unsigned short listen_port = 8443;
    bool plain_http = false;           // only when said explicitly
    std::string tls_cert, tls_key;
    std::string database = "/var/lib/shardnet/broker.db";
    std::string cluster = "local";
    int threads = 2;
    std::size_t header_bytes = 8192;
    std::size_t body_bytes = 1 << 20;
    int read_timeout_ms = 10000;
    int sse_keepalive_ms = 15000;  // comment lines on idle event streams
    // Per event stream, bytes queued beyond what its socket took: a reader
    // slower than its run's events is dropped past it (and resumes).
    std::size_t sse_buffer_bytes = 1 << 20;
    // How long a store write waits for a database another process locked;
    // then the request is answered 503 store_busy (well inside its deadline).
    int store_busy_ms = 2000;
    // SIGTERM: the most the broker takes to stop. Requests in flight get it
    // but a quarter (at most 2 s), which is the store queue's; what is still
    // open then is cut, and said in the log.
    int drain_seconds = 10;
    int witness_seconds = 60;   // how often the peers' log heads are witnessed (0: never)
    int max_connections = 10000;
    // Event streams have a budget of their own, so that open streams can
    // never take the connections heartbeats need: at most sse_max_streams
    // in all (0: half of max_connections; always below it), at most
    // sse_streams_per_token for one token (its user's tabs, a job's watcher).
    int sse_max_streams = 0, sse_streams_per_token = 8;
    // Sealed file lists (GET .../files) in flight at once per token: each
    // is built and proved on the store thread.
    int list_requests_per_token = 2;
    // Requests one token may have in flight, heartbeats aside (429 over it).
    int requests_per_token = 64;
    // Runs not ended one user may have (POST /v1/runs; 429 over it).
    int runs_per_user = 10000;
    double rate_per_token = 100000;    // requests per second, per token
    double rate_burst = 200000;
    int detector_misses = 3;
    int stall_seconds = 600;
    // Stragglers (detector/straggler_watch.hpp): a node under fraction x its
    // step's median step rate for `windows` windows of window_seconds (0: off).
    double straggler_fraction = 0.5;
    int straggler_window_seconds = 60, straggler_windows = 2;
    int summary_seconds = 10;          // soft state to the store every N s
    // A node the detector saw down (slurmd unreachable, Slurm says down) is
    // offered to no placement for this long: Slurm may list a dead node as
    // idle for tens of seconds (SlurmdTimeout), and a job sent there waits.
    int quarantine_seconds = 600;
    // After drain_faults node faults within drain_window_seconds, drain the
    // node in Slurm with a reason (off by default).
    bool drain_bad_nodes = false;
    int drain_faults = 3, drain_window_seconds = 86400;
    int slurm_cache_ms = 1000;         // Slurm query answers are reused this long
    int slurm_max_per_second = 20;     // calls to one slurmctld, at most
    std::vector<TokenEntry> tokens;
    std::vector<WorkerKey> worker_keys;  // read when the config is loaded
    ReceiptKeys receipts;                // optional "receipts" section
    // Local clusters: name -> SLURM_CONF, to confirm failures with Slurm.
    std::map<std::string, std::string> clusters;
    // names: the site's partition/account/QOS names as this cluster calls
    // them (broker/slurm/name_map.hpp).
    // containers: Slurm there runs OCI containers (oci.conf, doc/containers.md);
    // false keeps a job that runs in an image off it.
    // image_roots: where OCI image layouts are readable there, at their own
    // path (doc/containers.md); empty: anywhere.
    struct ClusterInfo {
        std::string region;
        std::vector<std::string> ckpt_roots;
        NameTable names;
        bool containers = true;
        std::vector<std::string> image_roots{};
    };
    std::map<std::string, ClusterInfo> cluster_info;   // optional, per cluster
    // Federation: this broker's name to its peers, and the peers.
    std::string broker_name;                 // default: the cluster name
    struct Peer { std::string name, url, token_file, token, ca_file; };
    std::vector<Peer> peers;
    // Submitting as a job's owner: never uid 0 or the SlurmUser, never below this.
    long long min_uid = 1000;
    // A job with --shardnet-on-timeout=requeue is requeued at its time limit
    // only to attempts below this (requeue.timeout_max_attempts; 0: never).
    long long timeout_max_attempts = 10;
    // Names of the submitter's environment never replayed into a later
    // attempt (requeue.environment_drop; NAME or PREFIX*).
    std::vector<std::string> environment_drop = default_environment_drop();
    // The checkpoint interval of runs with --shardnet-ckpt-every=auto
    // (doc/checkpoint-policy.md): the site's priors while the broker's own
    // history is thin, and the bounds on what it computes.
    struct CkptPolicy {
        // A node's mean time between interruptions before any is observed;
        // weighs as one interruption. About what large GPU fleets report
        // (Meta's Llama 3: 419 interruptions in 54 days on ~2,000 nodes).
        double mtbf_node_hours = 5000;
        double restart_seconds = 300;   // R before a recovery was measured
        double min_seconds = 60, max_seconds = 86400;
        long long min_steps = 1;
        double hysteresis = 0.2;
    } ckpt_policy;
};

// "" and cfg filled, or an error naming the field ("limits.body_bytes: ...").
std::string parse_broker_config(const std::string &json_text, BrokerConfig &cfg);

// A commented template for --print-config (JSON has no comments: "_doc" keys).
std::string config_template();

const char *scope_name(Scope s);

}  // namespace shardnet::broker
