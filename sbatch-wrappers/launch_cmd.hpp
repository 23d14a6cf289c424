// `shard launch [OPTIONS] -- CMD ARGS`: the batch script's step supervisor
// (shard(1)). It runs CMD as one srun step on the job's active nodes, with
// ShardNet's environment contract, and when the broker's evidence says a
// node of the step died (a FAULT that Slurm confirmed), it ends the step
// and starts it again on the survivors and a spare within seconds, in the
// same Slurm job, resuming from the last sealed checkpoint. A program's own
// error is not retried, nor a restart storm; with no spare left it exits,
// and the run's requeue (tier 1) takes over.
#pragma once

namespace shardnet::cli {

// Exit codes: the step's own (0 when it succeeded), or kLaunchGaveUp when
// no spare was left or restarts stopped paying (the batch script's end is
// then judged as a node's death and requeued), kLaunchUsage for bad usage.
inline constexpr int kLaunchGaveUp = 75, kLaunchUsage = 2;

int launch_main(int argc, char **argv);

}  // namespace shardnet::cli
