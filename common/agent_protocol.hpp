// The line protocol between the plugin (in slurmstepd, root) and the
// heartbeat agent (a process of the job user). The plugin writes the agent's
// configuration as key=value lines ending with "end", then one line per
// event ("pid=RANK:PID", "exit=RANK:WAITSTATUS"); end of file is the end of
// the step. The agent trusts nothing in it beyond what parse_* accepts.
#pragma once
#include <optional>
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
    std::vector<AgentRank> ranks;
};

std::string encode_agent_config(const AgentConfig &c);

// Feeds one config line; returns "" or an error naming the line. Sets done
// when the "end" line arrives.
std::string parse_agent_config_line(const std::string &line, AgentConfig &c, bool &done);

// Event lines after the config.
struct AgentEvent {
    enum Kind { pid, exit } kind;
    unsigned rank;
    int value;
};
std::optional<AgentEvent> parse_agent_event(const std::string &line);

}  // namespace shardnet
