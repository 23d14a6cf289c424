// What Slurm allocated to a job (its nodes, its task count), remembered per
// cluster and job, so that checking a job's word about its own node costs a
// heartbeat no call to Slurm. Asked again only when the answer could have
// changed: a node not in the list may be Slurm's own requeue of the job on
// other nodes (asked at most every kRecheckSeconds), and a failed look is
// tried again after kRetrySeconds. Bounded: kMaxJobs entries.
#pragma once
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace shardnet::broker {

class Slurm;

struct Allocation {
    std::set<std::string> nodes;   // Slurm's node names, expanded
    long long tasks = 0;           // the job's task count (squeue's tasks, at least its node count)
    std::string error;             // why Slurm could not say; nodes then empty
    double at = 0;                 // when Slurm was asked
};

// The job's allocation from Slurm (squeue --json, scontrol show hostnames):
// "" and out filled, else why not.
std::string read_allocation(Slurm &slurm, const std::string &slurm_conf, long long job, Allocation &out);

class JobAllocations {
public:
    static constexpr double kRecheckSeconds = 2, kRetrySeconds = 2, kForgetSeconds = 3600;
    static constexpr std::size_t kMaxJobs = 20000;

    enum class Verdict { member, not_member, unavailable, ask };
    struct Answer {
        Verdict verdict = Verdict::ask;
        long long tasks = 0;
        std::string error;   // unavailable: why
    };
    // Whether node is one of the job's nodes as last read; ask: read Slurm
    // (no entry yet, or one old enough to be read again), then put().
    Answer judge(const std::string &cluster, long long job, const std::string &node, double now) const;
    // One read of Slurm per job at a time: the first heartbeat that must ask
    // reads (true: it puts the answer); those that come meanwhile wait for
    // it (false: again runs once the answer is put) rather than each
    // queueing a read of its own on the Slurm thread.
    bool start_read(const std::string &cluster, long long job, std::function<void()> again);
    // The answer; the heartbeats that waited for it are run (after the lock).
    void put(const std::string &cluster, long long job, Allocation a);
    std::size_t size() const;

private:
    static std::string key(const std::string &cluster, long long job) { return cluster + '/' + std::to_string(job); }
    mutable std::mutex mu_;
    std::unordered_map<std::string, Allocation> jobs_;
    std::unordered_map<std::string, std::vector<std::function<void()>>> reads_;   // reads under way: who waits for each
};

}  // namespace shardnet::broker
