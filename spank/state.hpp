// Process-wide state of the plugin. Slurm loads us into srun, sbatch,
// salloc and slurmstepd; everything here is plain data (no constructors run
// at dlopen, nothing to destroy at dlclose). Heap objects hang off pointers
// and are freed in slurm_spank_exit.
#pragma once
#include <climits>
#include <cstdint>
#include <sys/types.h>

#include "common/job_options.hpp"
#include "common/plugstack_config.hpp"
#include "common/safe_path.hpp"

namespace shardnet {

struct RawOption {
    bool set;
    char value[PATH_MAX];
};

struct AgentLink {
    pid_t pid;        // 0 when no agent runs
    int ctl_fd;       // our end of the control socket (lines to the agent)
    int status_fd;    // agent's stdout: one verdict byte after its first heartbeat
    int err_fd;       // agent's stderr, drained into our log
    bool broker_ok;   // the agent's first heartbeat was taken
};

struct PluginState {
    bool enabled_by_option;
    bool no_kill_env_had;   // client: SBATCH_NO_KILL (or salloc's, srun's) was set before we ran
    RawOption opt[static_cast<int>(Opt::count)];
    PlugstackConfig *cfg;   // parsed plugstack arguments
    JobOptions *job;        // resolved options (remote side)
    bool active;            // remote: this step runs under ShardNet
    uint32_t local_tasks;
    uint32_t exited_tasks;
    uid_t uid;
    char run[72];
    unsigned attempt;
    unsigned restart;       // SHARDNET_RESTART of the step (`shard launch`'s in-job restarts)
    char ckpt_dir[PATH_MAX];
    char resume_from[PATH_MAX];
    char progress_dir[PATH_MAX];
    char master_addr[256];   // an srun step's first node (torch_env.hpp)
    unsigned master_port;
    AgentLink agent;
    // Set when this step may not run under the user's request (bad option,
    // refused path, broker down in required mode). The tasks then fail with
    // this message instead of slurmstepd failing the launch, which would
    // drain the node: a user's bad input must never take a node out.
    char refusal[1024];
    // Set when a condition the user did not make (another user's squat, a
    // site root that is missing or wrong) keeps ShardNet from this step in
    // mode=optional: the step runs without it and says why on its stderr.
    char warning[1024];
    bool broker_off;        // no usable key or token: no agent for this step
    StepDir *progress;      // the step's progress dir, removed at the end
};

extern PluginState g;

}  // namespace shardnet
