// Soft state of every worker (one agent = one node of one run's attempt):
// kept in memory, summarised to the store now and then, never one row per
// heartbeat. Deadlines sit in a timer wheel of one-second slots, each worker
// filed once: the detector's cost follows the workers whose (old) deadline
// comes due, not all workers, and a heartbeat never touches the wheel.
#pragma once
#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace shardnet::broker {

struct WorkerState {
    long long attempt = 0;
    int interval = 10;
    int ranks = 0;
    double last_seen = 0;
    double progress_time = 0;   // when the step last advanced
    long long step = -1;        // highest step any rank reported
    double step_time = 0;       // when it was first reported (checkpoint writes aside)
    long long first_step = -1;  // the first step this worker reported, and when:
    double first_step_time = 0; // the step time, and a recovery's first new step
    double ckpt_time = 0;       // when a rank last said it was writing a checkpoint
    bool ended = false;
    bool faulted = false;
    long long slot = 0;         // wheel second this worker is filed under; 0: not filed
    long long job = 0;          // Slurm job id, to ask Slurm before FAULT
    std::string cluster;
    double hold_until = 0;      // suspected: checked again at this time
    bool suspected = false;
    // Not an agent: a node of the job's allocation where no worker has
    // reported yet. It never sends heartbeats; at each deadline the detector
    // asks Slurm whether the node is still up (watch()).
    bool watch_only = false;
};

// A worker's key is NODE or NODE/STEP; the batch script's is NODE/batch.
inline bool is_batch_worker(std::string_view key) { return key.size() > 6 && key.ends_with("/batch"); }
// NODE/STEP (NODE without a step) in buf, which holds both and the slash:
// one worker per node and Slurm step (a batch script and the srun step it
// started on one node are two workers).
constexpr std::size_t kMaxWorkerKey = 256 + 1 + 32;
inline std::string_view worker_key(char (&buf)[kMaxWorkerKey], std::string_view node, std::string_view step) {
    if (step.empty() || node.size() + 1 + step.size() > kMaxWorkerKey) return node;
    node.copy(buf, node.size());
    buf[node.size()] = '/';
    step.copy(buf + node.size() + 1, step.size());
    return std::string_view(buf, node.size() + 1 + step.size());
}

// Why the detector suspects a worker: a kind to decide on, and its words.
// ended_by_slurm: Slurm ended the job (a preemption, a time limit) with
// every node alive: no node is to blame, none is excluded from the next attempt.
enum class FaultKind { silent, stalled, no_worker, ended_by_slurm };
const char *fault_words(FaultKind k);

struct Fault {
    std::string run, node;
    long long attempt;
    std::string cause;          // fault_words(kind), as events show it
    WorkerState state;
    FaultKind kind = FaultKind::silent;
};

class WorkerTable {
public:
    WorkerTable(int misses, int stall_seconds) : misses_(misses), stall_(stall_seconds) {}

    // A heartbeat arrived. step: highest rank step or nullopt. True when
    // the worker is new (first heartbeat of this attempt).
    bool beat(std::string_view run, std::string_view node, long long attempt, int interval, int ranks,
              std::optional<long long> step, bool ended, double now, std::string_view cluster = {}, long long job = 0,
              bool checkpointing = false);
    // Whether this worker has reported for this attempt as this job (a
    // heartbeat from it needs no admission; another job's worker of the same
    // name is no help to this one).
    bool known(std::string_view run, std::string_view node, long long attempt, std::string_view cluster, long long job) const;
    // The workers of a job in a run's attempt that still report (not ended,
    // not faulted, not a batch script's, not a watch), their count and a few of their
    // keys. The job's ended ones there are forgotten once there are more
    // than keep_ended of them: a job that runs step after step grows nothing.
    struct Live { std::size_t count = 0; std::vector<std::string> some; };
    // batch: its batch scripts' workers instead.
    Live live(const std::string &run, long long attempt, const std::string &cluster, long long job, std::size_t keep_ended, bool batch = false);
    // Watch a node of an attempt's allocation that has no worker yet: from
    // now, checked every interval x misses until a worker there reports
    // (retire) or the job ends. Nothing if the key is known.
    void watch(const std::string &run, const std::string &key, long long attempt, int interval, double now,
               const std::string &cluster, long long job);
    // A worker on that node reported: the watch ends (or, when the worker was
    // quicker than the broker's look at the allocation, never starts).
    void unwatch(const std::string &run, const std::string &key, long long attempt);
    // Slurm says the node is fine: look again at `until` before faulting.
    void suspect(const std::string &run, const std::string &node, double until);
    // Slurm says the job is over: the worker is done, not failed.
    // unfault: its silence was no failure (Slurm requeued the job itself):
    // when the same attempt's worker reports again it is watched again.
    void retire(const std::string &run, const std::string &node, bool unfault = false);
    // Workers whose deadline passed by now; each is reported once.
    std::vector<Fault> expire(double now);
    // Forget a run's workers of attempts before `attempt` (fenced).
    void fence(const std::string &run, long long attempt);

    std::size_t size() const;
    void for_each(const std::function<void(const std::string &run, const std::string &node, const WorkerState &)> &fn) const;
    // A run's workers (with_watches: and its allocation's watched nodes).
    std::vector<std::pair<std::string, WorkerState>> of_run(const std::string &run, bool with_watches = false) const;

private:
    static constexpr int kShards = 16;
    // A heartbeat hashes its key once: the hash picks the shard and, through
    // the transparent lookup, the bucket.
    struct Hashed {
        std::string_view key;
        std::size_t hash;
    };
    struct KeyHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view k) const { return std::hash<std::string_view>{}(k); }
        std::size_t operator()(const Hashed &k) const { return k.hash; }
    };
    struct KeyEq {
        using is_transparent = void;
        bool operator()(std::string_view a, std::string_view b) const { return a == b; }
        bool operator()(const Hashed &a, std::string_view b) const { return a.key == b; }
        bool operator()(std::string_view a, const Hashed &b) const { return a == b.key; }
    };
    struct Shard {
        mutable std::mutex mu;
        std::unordered_map<std::string, WorkerState, KeyHash, KeyEq> map;   // key: run '\n' node
    };
    double deadline(const WorkerState &w) const;
    void file(long long slot, std::string key);   // into the wheel
    Shard &shard(std::string_view key) { return shards_[KeyHash{}(key) % kShards]; }

    // Each run's worker keys, so that a run's or a job's workers are found
    // without reading the whole table (admission counts a job's workers at
    // each new one: a 1000-node job's start read 1000 x every worker of every
    // run). Under its own lock, taken after a shard's or alone, never before.
    void indexed(const std::string &key);
    void unindexed(const std::vector<std::string> &keys);
    std::vector<std::string> keys_of(const std::string &run) const;
    mutable std::mutex index_mu_;
    std::unordered_map<std::string, std::unordered_set<std::string>> by_run_;

    int misses_, stall_;
    std::array<Shard, kShards> shards_;
    std::mutex wheel_mu_;
    std::map<long long, std::vector<std::string>> wheel_;   // second -> keys filed there
};

}  // namespace shardnet::broker
