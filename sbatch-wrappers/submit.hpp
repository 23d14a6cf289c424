// shard run's last steps: the run's manifest for the broker, the batch
// script, and sbatch with the --shardnet-* flags on the chosen cluster.
#pragma once
#include <boost/json.hpp>
#include <string>
#include <vector>

#include "sbatch-wrappers/spec.hpp"

namespace shardnet::cli {

boost::json::object manifest_of(const JobSpec &s);
// shard_path: the `shard` the script runs for `shard launch` (a spec with spares).
std::string batch_script(const JobSpec &s, const std::string &shard_path);
// exclude: nodes the job must not get (with an image: those whose probe
// found no container runtime).
std::vector<std::string> sbatch_argv(const JobSpec &s, const std::string &run, const std::string &cluster,
                                     const std::string &slurm_conf, const std::string &script_path,
                                     const std::vector<std::string> &exclude = {});
// Runs sbatch (no shell); the job id, or 0 with err (sbatch's own words).
long long run_sbatch(const std::vector<std::string> &argv, const std::string &slurm_conf, std::string &err);

}  // namespace shardnet::cli
