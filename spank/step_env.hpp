// The step's environment as files in its progress dir (stepd.cpp calls
// these from user_init, as the job's user).
#pragma once
#include <cstdint>

extern "C" {
#include <slurm/spank.h>
}

namespace shardnet {

// The batch script's environment, for the broker to replay into a later
// attempt (job.environment); said in slurmd's log when it cannot be saved.
void save_job_environment(spank_t sp);

// A --container task's environment for shardnet-oci-run (doc/containers.md);
// false (the task fails, the reason on its stderr) when it cannot reach the
// container, or this node runs no containers at all. True without one.
bool export_container_env(spank_t sp, uint32_t local);

}  // namespace shardnet
