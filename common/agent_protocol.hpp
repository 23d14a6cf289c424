// The line protocol between the plugin (in slurmstepd, root) and the
// heartbeat agent (a process of the job user). The plugin writes the agent's
// configuration as key=value lines ending with "end", then one line per
// event ("pid=RANK:PID", "exit=RANK:WAITSTATUS"); end of file is the end of
// the step. The agent trusts nothing in it beyond what parse_* accepts.
//
// Some values come from the job's environment (the node list) or from the
// user (run, checkpoint dir): a newline in one of them would add a line of
// its own choosing (a second url= that receives the agent's token). So
// every value is checked on both sides by the same rules, and a key may
// appear only once (rank lines excepted).
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardnet {

struct AgentRank {
    unsigned rank = 0;
    unsigned local_rank = 0;
};

struct AgentConfig {
    std::string url;           // broker base URL
    std::string token;
    std::string ca_file;
    std::string run;
    unsigned attempt = 1;
    std::string cluster;
    std::string node;          // when empty: nodelist[nodeid]
    std::string nodelist;
    unsigned nodeid = 0;
    unsigned long job = 0;
    std::string step;          // "0", "1", ... or "batch"
    int interval = 10;         // seconds between heartbeats
    int timeout_ms = 2000;
    int prelimit_signal = 0;
    int prelimit_secs = 0;
    std::string progress_dir;
    std::string requeue = "federated";   // the job's --shardnet-requeue
    std::string ckpt_dir;      // the job's checkpoint directory (reported by the batch step)
    unsigned world = 1;        // the step's ranks (checkpoint commits name it)
    // --shardnet-ckpt-every as the job gave it ("auto" or a number of
    // steps; "" unknown): sent in heartbeats so that a requeued attempt
    // keeps it. With "auto" the broker computes the interval; the agent
    // asks for it in each heartbeat and writes it for the trainer.
    std::string ckpt_every;
    int max_attempts = 0;      // the job's --shardnet-max-attempts (0: none); the batch step reports it
    // The job's --shardnet-fatal-exit: every step's agent reports it, so
    // that a rank's failed report carries what its own job said of it.
    std::vector<int> fatal_exit;
    bool requeue_timeout = false;   // the job's --shardnet-on-timeout=requeue; the batch step reports it
    // The job's --shardnet-spares and --shardnet-straggler=replace: the batch
    // step reports them, so that a requeued attempt holds its spares too.
    int spares = 0;
    bool replace_stragglers = false;
    bool ckpt_auto() const { return ckpt_every == "auto"; }
    std::vector<AgentRank> ranks;
};

// The longest value any config line may carry (paths fit PATH_MAX).
constexpr std::size_t kMaxAgentValue = 4096;

// "" when v may be the value of key in the agent's config, else why not
// (naming the key, never echoing the value: it may be a token).
std::string agent_config_value_error(const std::string &key, const std::string &v);

// True when s is a Slurm host list as the job's environment spells one:
// host names and ranges, [A-Za-z0-9._-] and "[],".
bool is_hostlist(const std::string &s);

// Writes c's lines into out; "" on success. A value that breaks the rules
// above is refused (out is then empty) rather than written. out holds the
// token: the caller wipes it.
std::string encode_agent_config(const AgentConfig &c, std::string &out);

// The agent's side: feed lines until done. Refuses a line that breaks the
// value rules, an unknown key and a key given twice.
class AgentConfigParser {
public:
    // "" or an error naming the line's key.
    std::string feed(const std::string &line);
    bool done() const { return done_; }
    AgentConfig &config() { return cfg_; }

private:
    AgentConfig cfg_;
    std::set<std::string> seen_;
    bool done_ = false;
};

// Event lines after the config.
struct AgentEvent {
    enum Kind { pid, exit } kind;
    unsigned rank;
    int value;
};
std::optional<AgentEvent> parse_agent_event(const std::string &line);

}  // namespace shardnet
