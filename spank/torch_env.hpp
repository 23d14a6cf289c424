// What torch.distributed.run (torchrun) gives its workers, for every task
// of a --shardnet step: code written for torchrun's env:// contract runs
// unchanged as one srun task per rank. Pure functions, unit-tested; the
// step daemon fills StepLayout from Slurm (stepd.cpp). A torchrun started
// inside the step overwrites these for its own workers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardnet {

struct StepLayout {
    unsigned rank = 0, local_rank = 0, world = 1, local_world = 1;
    unsigned node_index = 0, nodes = 1;   // this node among the step's
    unsigned attempt = 1;
    unsigned restart = 0;                 // in-job restarts of this attempt (`shard launch`: SHARDNET_RESTART)
    bool requeue = true;                  // off: no restart will come
    unsigned max_attempts = 0;            // --shardnet-max-attempts (0: none)
    std::string run, master_addr;
    unsigned master_port = 0;
};

// The variables, name and value, in the order they are set.
std::vector<std::pair<const char *, std::string>> torch_env(const StepLayout &l);

// The first port of Slurm's reservation for the step (SLURM_STEP_RESV_PORTS:
// "12000-12003" or "12000,12005-12006"); 0 when there is none or it does
// not read as ports.
unsigned first_reserved_port(std::string_view resv);

// Without a reservation: a port in [kDerivedPortLow, kDerivedPortLow +
// kDerivedPorts) from the step's identity, the same on every node of it.
// Below Linux's ephemeral range (32768-60999), so no client socket takes it.
inline constexpr unsigned kDerivedPortLow = 20000, kDerivedPorts = 10000;
unsigned derived_port(std::string_view cluster, std::uint32_t job, std::uint32_t step);

// A NodeAddr or host name fit for MASTER_ADDR: 1-255 bytes of letters,
// digits, '.', '-', ':' (IPv6) and '_'.
bool is_host_address(std::string_view s);

}  // namespace shardnet
