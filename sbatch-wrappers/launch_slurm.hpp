// What `shard launch` asks of Slurm, as the job's user, with Slurm's own
// commands (no shell): the job's nodes now (SLURM_JOB_NODELIST is the
// submit-time list and stays stale when Slurm drops a dead node), its
// batch host, the id of a step by name, and ending a step.
#pragma once
#include <string>
#include <sys/types.h>
#include <vector>

namespace shardnet::cli {

// Runs argv (PATH lookup), stdout (and stderr) collected, at most
// timeout_ms; the exit status (-1: could not run or timed out).
int run_capture(const std::vector<std::string> &argv, std::string &out, int timeout_ms = 10000);

// The job's nodes in Slurm's order and its batch host; "" or what failed.
std::string job_nodes(const std::string &job, std::vector<std::string> &nodes, std::string &batch_host);

// The step of the job named `name` ("JOB.STEP"), "" when none runs.
std::string step_named(const std::string &job, const std::string &name);

// Starts argv with env (NAME=VALUE entries) in a process group of its own;
// its pid, or -1 with err.
pid_t spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env, std::string &err);

}  // namespace shardnet::cli
