// --shardnet-spares needs a job that outlives a node's death (--no-kill).
// Slurm 22.05 shows no SPANK plugin whether a job has it, `scontrol update`
// cannot add it after submit, and a plugin cannot give it either: sbatch has
// read SBATCH_NO_KILL before any option callback runs (tried on the harness:
// set from the callback, the job was still requeued when a node died). What
// the plugin can see is sbatch's own arguments and environment, so spares
// are taken only with -k/--no-kill on the command line or SBATCH_NO_KILL
// (SALLOC_NO_KILL, SLURM_NO_KILL) set; `shard run` passes --no-kill itself.
#pragma once
#include <string>
#include <vector>

namespace shardnet {

// The environment variable that gives a client program no-kill: sbatch
// SBATCH_NO_KILL, salloc SALLOC_NO_KILL, srun SLURM_NO_KILL.
const char *no_kill_env(const std::string &program);

// Whether a --no-kill value (or the variable's) means no-kill: "" or "set".
bool no_kill_value(const char *v);

// Whether no-kill holds for a job whose client was started with args
// (argv[1..]); env_had: the variable above is in its environment with a
// value that means no-kill. "" or why not.
std::string no_kill_refusal(const std::vector<std::string> &args, bool env_had, const std::string &program);

// This process's arguments (/proc/self/cmdline), argv[0] left out.
std::vector<std::string> own_args();

}  // namespace shardnet
