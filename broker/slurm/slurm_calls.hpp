// Every call the broker makes to a Slurm controller goes through here:
// read-only queries are answered from a short cache, and each cluster gets
// at most max_per_second calls, so that a burst of suspects, capacity
// searches or requeues never floods a slurmctld. A controller that is down
// (scontrol ping, asked at most every 2 s) fails calls at once: Slurm's
// own commands wait 9-18 s for a dead one.
#pragma once
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "broker/slurm/slurm.hpp"

namespace shardnet::broker {

class SlurmCalls final : public Slurm {
public:
    // ping_first: ask scontrol ping before other calls (off only in tests
    // that stand other commands in for Slurm's).
    SlurmCalls(int cache_ms, int max_per_second, bool ping_first = true)
        : cache_ms_(cache_ms), max_per_second_(max_per_second), ping_first_(ping_first) {}

    // A query (scontrol show, sinfo, squeue, ping): from the cache when an
    // answer younger than cache_ms is there.
    int query(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out) override;
    // A query whose answer must be current (has a decision's job been
    // submitted?): always asked, and its answer refreshes the cache. The
    // cluster's other cached answers stay.
    int fresh(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out) override;
    // A command that changes Slurm's state (sbatch, scancel, ...): never
    // cached, and it drops the cluster's cached answers.
    // out has its stderr after its stdout (sbatch's reasons).
    int change(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out) override;

    // change(), run as a user (slurm_view.hpp, RunAs): sbatch of a requeue.
    int change_as(const std::string &slurm_conf, const std::vector<std::string> &argv, const RunAs &as, std::string &out) override;
    // A TCP connect to the node's slurmd.
    bool slurmd_answers(const std::string &addr, int port, int timeout_ms) override;

    unsigned long long calls() const override { return calls_.load(std::memory_order_relaxed); }
    unsigned long long cache_hits() const override { return hits_.load(std::memory_order_relaxed); }

private:
    int call(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out, bool with_stderr);
    // A change was made: the cluster's cached answers are stale.
    void drop_cache(const std::string &slurm_conf);

    struct Answer { double at; int rc; std::string out; };
    int cache_ms_, max_per_second_;
    bool ping_first_;
    std::mutex mu_;
    std::map<std::pair<std::string, std::vector<std::string>>, Answer> cache_;
    std::map<std::string, std::vector<double>> recent_;   // cluster -> times of its last calls
    std::map<std::string, std::pair<double, bool>> up_;   // cluster -> when pinged, answered UP
    bool controller_up(const std::string &slurm_conf);
    std::atomic<unsigned long long> calls_{0}, hits_{0};
};

}  // namespace shardnet::broker
