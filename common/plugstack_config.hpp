// Site configuration of the SPANK plugin: the arguments after the plugin's
// path on its plugstack.conf line. Parsed by a pure function so that every
// rule is unit-tested without Slurm.
#pragma once
#include <string>
#include <vector>

namespace shardnet {

enum class BrokerMode { optional, required };

struct PlugstackConfig {
    std::string broker_url;      // empty: no broker, heartbeats off
    std::string token_file;      // bearer token for the broker, read as root
    std::string worker_key_file; // site key: agents get a token for their run and attempt only
    std::string ca_file;         // CA bundle for an https broker
    std::string ckpt_root;       // site checkpoint root; empty: users' homes only
    // Slurm's oci.conf on this node, for the check that a --container task
    // really runs in its container (doc/containers.md); empty: beside
    // $SLURM_CONF, else beside /etc/slurm/slurm.conf when that exists.
    std::string oci_conf;
    // Node-local root of the per-step progress dirs: root makes it (0755)
    // and each step's dir in it, so no other user can squat a name there.
    std::string progress_root = "/run/shardnet";
    std::string agent_path;      // the heartbeat agent binary
    int heartbeat_min = 1;
    int heartbeat_max = 600;
    int heartbeat_default = 10;
    int timeout_ms = 2000;       // deadline of one request to the broker
    int exit_wait_ms = 300;      // longest a step end waits for the final report
    int start_grace_ms = 250;    // the agent starts only for steps that live this long
    BrokerMode mode = BrokerMode::optional;
    int prelimit_signal = 0;     // 0: no signal before the time limit
    int prelimit_secs = 0;
};

// Fills cfg from argv ("key=value" words). Returns "" on success, else a
// message naming the offending argument; cfg is then unspecified.
std::string parse_plugstack_args(int argc, const char *const argv[], PlugstackConfig &cfg);

// The keys parse_plugstack_args accepts, for help and man page checks.
std::vector<std::string> plugstack_keys();

}  // namespace shardnet
