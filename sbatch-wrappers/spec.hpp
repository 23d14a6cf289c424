// The job spec (YAML) that `shard run` reads: what the job needs, not where
// it runs. Parsed whole with yaml-cpp; an error names the file, line and
// column and what was expected. See shard-spec(5).
#pragma once
#include <string>
#include <vector>

namespace shardnet::cli {

struct JobSpec {
    std::string name;                   // run id prefix
    std::string command;                // what srun starts on every rank
    std::string accelerator;            // a class (H100-SXM) or alias (h100); "" none
    int gpus = 0;                       // in all
    int gpus_per_node = 0;
    double gpu_memory_gb = 0;
    int nodes = 0;                      // 0: gpus / gpus_per_node, or 1
    int tasks_per_node = 1;
    std::string fabric;                 // nvlink, infiniband, roce, ethernet, xgmi
    std::string image;                  // container image as written: oci:DIR[:TAG], docker://REF (image.hpp)
    std::string image_digest;           // its manifest digest, resolved at submit (shard run)
    std::string image_pinned;           // oci:DIR@DIGEST: what every attempt unpacks and runs
    std::string ckpt_root;              // checkpoint directory root
    std::string ckpt_every = "auto";    // N steps or auto
    int heartbeat = 10;
    std::string requeue = "federated";  // federated, local, off
    int max_attempts = 0;               // attempts at most (0: no budget of its own)
    std::string fatal_exit;             // exit codes never retried, "3,7" (--shardnet-fatal-exit); "" none
    std::string on_timeout = "fail";    // fail, or requeue from a checkpoint sealed after the pre-limit signal
    int spares = 0;                     // nodes held back for `shard launch` (sbatch --no-kill --shardnet-spares)
    std::string straggler = "report";   // report|replace: a named straggler swapped for a spare (--shardnet-straggler)
    std::vector<std::string> clusters, regions;
    std::string time_limit;             // Slurm's [D-]HH:MM:SS or minutes
};

// "" and spec filled, or "FILE:LINE:COL: what is wrong".
std::string load_spec(const std::string &path, JobSpec &spec);
std::string parse_spec(const std::string &yaml_text, const std::string &label, JobSpec &spec);

// "h200" -> "H200-SXM"; a class name is kept. "" when it is no known class.
std::string accelerator_class(const std::string &name);

// Nodes the spec asks for (from nodes, or gpus / gpus_per_node); "" or why not.
std::string resolve_shape(JobSpec &spec);

}  // namespace shardnet::cli
