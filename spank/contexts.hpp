// What each SPANK context does; plugin.cpp calls these and catches.
#pragma once
#include <functional>
#include <string>

#include "common/job_options.hpp"
extern "C" {
#include <slurm/spank.h>
}

namespace shardnet {

// options.cpp: every context that sees options
int init_config(int ac, char **av);
int register_options(spank_t sp);
int client_post_opt();  // srun, sbatch, salloc: early, friendly checks
JobOptionsRaw collect_raw(const std::function<bool(const char *, std::string &)> &env);

// stepd.cpp: slurmstepd
int stepd_post_opt(spank_t sp);
int stepd_user_init(spank_t sp);
int stepd_task_init(spank_t sp);
int stepd_task_post_fork(spank_t sp);
int stepd_task_exit(spank_t sp);
void stepd_exit();

}  // namespace shardnet
