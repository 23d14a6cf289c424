// The attempts whose Slurm job spec is kept or being kept (recovery's
// capture_spec): the batch step's first heartbeat of an attempt claims it
// once; a capture that failed, or a job Slurm requeued itself, lets it go
// so that the next batch heartbeat captures the spec again.
#pragma once
#include <mutex>
#include <string>
#include <unordered_set>

namespace shardnet::broker {

class SpecsSeen {
public:
    // True for the first claim of run's attempt (its spec is to be captured).
    bool claim(const std::string &run, long long attempt) {
        std::lock_guard<std::mutex> lock(mu_);
        return seen_.insert(key(run, attempt)).second;
    }
    // The attempt's spec is to be captured again at its next claim.
    void release(const std::string &run, long long attempt) {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.erase(key(run, attempt));
    }

private:
    static std::string key(const std::string &run, long long attempt) { return run + '\n' + std::to_string(attempt); }
    std::mutex mu_;
    std::unordered_set<std::string> seen_;   // run/attempt whose job spec is kept
};

}  // namespace shardnet::broker
