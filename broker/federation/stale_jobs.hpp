// Jobs of fenced attempts that still run (a peer took the run's next
// attempt, or an old job heartbeats again): each cancelled once, off the
// caller's thread.
#pragma once
#include <mutex>
#include <string>
#include <unordered_set>

#include "broker/core/module.hpp"

namespace shardnet::broker {

class StaleJobs : Module {
public:
    explicit StaleJobs(Core &core) : Module(core) {}
    // A fenced attempt's job that still runs: cancelled once, off the caller's
    // thread (when a peer takes its successor, or when it shows up again).
    void cancel_stale(const std::string &cluster, long long job);

private:
    std::mutex stale_mu_;
    std::unordered_set<std::string> stale_cancelled_;   // cluster/job, under stale_mu_
};

}  // namespace shardnet::broker
