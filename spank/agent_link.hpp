// Starting, feeding and ending the heartbeat agent from slurmstepd. The
// agent is a separate process running as the job user, so network I/O and
// the user's progress files never touch the root-owned step daemon.
#pragma once
#include <string>
#include <sys/types.h>

namespace shardnet {

struct AgentSpawn {
    std::string path;         // agent binary
    std::string config;       // encoded AgentConfig
    std::string slurm_conf;   // for the agent's time-limit queries
    uid_t uid;
    gid_t gid;
    std::string user;
    int grace_ms;             // exec only if the step is still running after this
};

// "" on success (g.agent filled), else why the agent could not start.
std::string agent_start(const AgentSpawn &s);
// Best effort, never blocks: a stuck agent loses the line, not the step.
void agent_send(const std::string &line);
// Required mode: waits for the verdict on the first heartbeat.
std::string agent_wait_verdict(int timeout_ms);
// End of step: EOF to the agent and, if the broker has been answering, up
// to wait_ms for its final report; then SIGKILL. Logs what the agent said.
void agent_finish(int wait_ms);

}  // namespace shardnet
