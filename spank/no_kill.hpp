// --shardnet-spares needs a job that outlives a node's death (--no-kill).
// Slurm 22.05 shows no SPANK plugin whether a job has it, and `scontrol
// update` cannot add it after submit; what sbatch reads is its environment
// (SBATCH_NO_KILL, read after its first pass over the command line, where
// our option's callback runs first) and its own arguments. So the plugin
// sets SBATCH_NO_KILL when --shardnet-spares is on sbatch's command line,
// and refuses spares it cannot vouch for (given only in #SBATCH lines,
// without --no-kill on the command line or in the environment).
#pragma once
#include <string>
#include <vector>

namespace shardnet {

// The environment variable that gives a client program no-kill: sbatch
// SBATCH_NO_KILL, salloc SALLOC_NO_KILL, srun SLURM_NO_KILL.
const char *no_kill_env(const std::string &program);

// Whether no-kill holds for a job whose client was started with args
// (argv[1..]), env_had: the variable above was in its environment before
// the plugin touched it, set_in_time: the plugin set it during sbatch's
// first pass (--shardnet-spares on the command line). "" or why not.
std::string no_kill_refusal(const std::vector<std::string> &args, bool env_had, const std::string &program);

// This process's arguments (/proc/self/cmdline), argv[0] left out.
std::vector<std::string> own_args();

}  // namespace shardnet
