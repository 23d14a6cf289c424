// --bandwidth: a short NCCL all-reduce across this node's GPUs, as
// nccl-tests' all_reduce_perf measures it (bus bandwidth).
#pragma once
#include <optional>
#include <string>

namespace shardnet::probe {

struct BandwidthResult {
    int gpus = 0;
    std::string nccl_version;
    size_t bytes = 0;          // per GPU per all-reduce
    double seconds = 0;        // per all-reduce, median of the timed runs
    double algbw_gbps = 0;     // bytes / time
    double busbw_gbps = 0;     // algbw * 2(n-1)/n: what the links carried
};

// CUDA's runtime and NCCL are loaded at run time. Returns "" and fills r,
// or says why it could not measure (no GPUs is r.gpus == 0 and "").
std::string measure_nccl_allreduce(BandwidthResult &r, size_t bytes = size_t(256) << 20, int iters = 20);

}  // namespace shardnet::probe
