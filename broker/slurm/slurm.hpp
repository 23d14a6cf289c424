// What the broker asks of a Slurm cluster, as one interface: the service
// holds a Slurm&, never a concrete class, so that recovery, placement and
// federation are unit-tested against a fake (tests/unit/fake_slurm.hpp)
// while the integration tests run them on real Slurm. The real one is
// SlurmCalls (slurm_calls.hpp): Slurm's own commands under a cluster's
// SLURM_CONF, cached and rate-limited per cluster.
#pragma once
#include <string>
#include <vector>

#include "broker/slurm/read_errors.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

class Slurm {
public:
    virtual ~Slurm() = default;
    // A read (scontrol show, sinfo, squeue, ping), possibly from a short cache.
    virtual int query(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out) = 0;
    // A read whose answer must be current.
    virtual int fresh(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out) = 0;
    // A command that changes Slurm's state (scancel); out has stderr after stdout.
    virtual int change(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out) = 0;
    // The same as a user, input on stdin (sbatch of a new attempt).
    virtual int change_as(const std::string &slurm_conf, const std::vector<std::string> &argv, const RunAs &as,
                          std::string &out) = 0;
    // Whether a slurmd takes a TCP connection at addr:port within timeout_ms.
    virtual bool slurmd_answers(const std::string &addr, int port, int timeout_ms) = 0;

    virtual unsigned long long calls() const { return 0; }
    virtual unsigned long long cache_hits() const { return 0; }

    // Answers that could not be read, per cluster (read_errors.hpp).
    SlurmReadErrors read_errors;
};

}  // namespace shardnet::broker
