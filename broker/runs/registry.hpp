// The runs this broker knows: each run's record (RunInfo), the one lock
// that guards them all, the generation connections cache against, and the
// one place a run's state changes in memory (Writer::set_state, checked
// against the lifecycle in run_state.hpp). Other folders reach a run only
// through a locked view: read() shares the lock, write() holds it alone;
// the view releases it when it goes (or at unlock()).
//
// Lock order: a caller that holds the admission lock (detector/) takes this
// one after it; the event sinks' lock (service.cpp) is taken inside this
// one. Nothing that blocks (the store, Slurm, a peer) runs under it.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "broker/runs/run_state.hpp"

namespace shardnet::broker {

// The job that runs an attempt of a run, as this broker recorded it: the
// first job to report attempt 1, the job it submitted for each later one.
struct AttemptJob {
    std::string cluster;
    long long job = 0;
    long long world = 0;   // the largest step task count its tokens named
};
struct RunInfo {
    std::string owner;          // the Unix account ("" until a job claims it)
    RunState state = RunState::pending;
    long long attempt = 1, world_size = 0;
    std::string requeue = "federated";
    long long expected_nodes = 0;   // RECOVERING: nodes the new attempt runs on
    long long recover_to = 0;       // RECOVERING: the attempt that must heartbeat
    std::string manifest = "{}";    // as created (JSON), with "requires"
    long long owner_uid = -1;       // -1: created by an admin for whoever runs it first
    std::map<long long, AttemptJob> jobs{};   // attempt -> its job
    // --shardnet-ckpt-every=auto (its agents report a "policy" version):
    // the interval in force, the heartbeat answer that carries it, and
    // the latest computation with its inputs (policy/policy.cpp).
    bool ckpt_auto = false;
    std::string ckpt_every{};   // --shardnet-ckpt-every as its agents say ("": not said); a requeue keeps it
    long long policy_version = 0, policy_steps = 0;
    std::shared_ptr<const std::string> policy_answer{}, policy_detail{};
    // The recovery under way, timed for the policy's R: its phases end
    // at the FAULT, the new job, RECOVERED, and the first new step.
    // The attempt's rank that failed first, as its agent reported the
    // step's end (attempt 0: none yet): who a FAILED run names.
    struct RankFailure {
        long long attempt = 0, rank = -1;
        std::string node;
        std::optional<long long> code, signal;
        double time = 0;
    } first_failure{};
    std::set<std::string> failed_nodes{};   // nodes of first_failure.attempt that reported a failed rank
    // The attempt whose batch end is being judged, or whose failed rank
    // is being looked into (0: none): one of each at a time, and the
    // detector leaves the attempt's silent workers to the judgment.
    long long judging = 0, probing = 0;
    long long slurm_requeues = 0;   // Slurm's own requeues of the run's jobs (not ShardNet's attempts)
    long long slurm_requeued = 0;   // the attempt Slurm requeued and has not started again (0: none)
    // The pre-limit signal of attempt prelimit_attempt went at
    // prelimit_at (its agents' first heartbeat that said so): under
    // --shardnet-on-timeout=requeue, that attempt's TIMEOUT is requeued
    // only after a checkpoint sealed since (detector/slurm_end.cpp).
    long long prelimit_attempt = 0;
    double prelimit_at = 0;
    unsigned long long judging_serial = 0, probing_serial = 0;
    struct RecoveryClock {
        long long to = 0;   // the attempt that recovers (0: none timed)
        std::string tier;
        double last_seen = 0, fault_at = 0, placed_at = 0, recovered_at = 0;
    } clock{};
};

class RunRegistry {
public:
    using Map = std::unordered_map<std::string, RunInfo>;

    // The runs under the lock, held while the view lives (Lock: shared or
    // unique). Iterators and references from it are valid while it holds.
    template <class Lock, class M>
    class View {
    public:
        auto find(const std::string &run) const { return runs_->find(run); }
        auto begin() const { return runs_->begin(); }
        auto end() const { return runs_->end(); }
        std::size_t count(const std::string &run) const { return runs_->count(run); }
        std::size_t size() const { return runs_->size(); }
        void unlock() { lock_.unlock(); }

    protected:
        View(std::shared_mutex &m, M &runs) : lock_(m), runs_(&runs) {}
        Lock lock_;
        M *runs_;
        friend class RunRegistry;
    };
    using Reader = View<std::shared_lock<std::shared_mutex>, const Map>;

    // A writer keeps each owner's count of runs not ended: a run it
    // reaches (find, [], erase) is counted again when it lets go, so an
    // owner's count is never more than one lock's work away (open_of).
    class Writer : public View<std::unique_lock<std::shared_mutex>, Map> {
    public:
        Writer(const Writer &) = delete;
        Writer &operator=(const Writer &) = delete;
        ~Writer() { settle(); }
        Map::iterator find(const std::string &run) {
            auto it = runs_->find(run);
            if (it != runs_->end()) touch(it->first, &it->second);
            return it;
        }
        RunInfo &operator[](const std::string &run) {
            auto it = runs_->find(run);
            if (it != runs_->end()) touch(run, &it->second);
            else touch(run, nullptr);
            return (*runs_)[run];
        }
        std::size_t erase(const std::string &run) {
            auto it = runs_->find(run);
            if (it == runs_->end()) return 0;
            touch(run, &it->second);
            runs_->erase(it);
            return 1;
        }
        // No walk through the runs with a writer: a change made there
        // would not be counted.
        void begin() = delete;
        void unlock() {
            settle();
            lock_.unlock();
        }
        // Runs of owner not ended, as the runs are now (this writer's
        // changes so far included): the owner's own, never those peers'
        // decisions made here for them (open_of(peer_made(owner)) counts
        // those, apart: a peer cannot spend a local user's limit).
        long long open_of(const std::string &owner);
        // The one place a run's state changes in memory: checked against
        // the lifecycle (run_state.hpp). False, and logged, when the table
        // has no such transition; nothing changes then.
        bool set_state(const std::string &run, RunInfo &info, RunState to);
        // A change connections' caches must see (a run created, its
        // attempt, owner or jobs changed).
        void bump() { reg_->generation_.fetch_add(1, std::memory_order_release); }

    private:
        explicit Writer(RunRegistry &reg) : View(reg.runs_mu_, reg.runs_), reg_(&reg) {}
        // A run as it was when this writer first reached it.
        struct Before { std::string run, owner; bool open = false; };
        void touch(const std::string &run, const RunInfo *info);
        // Each run reached: its old count out, its new one in.
        void settle();
        RunRegistry *reg_;
        std::vector<Before> touched_;
        std::unordered_set<std::string> many_;   // touched_'s runs, once there are many
        friend class RunRegistry;
    };

    Reader read() const { return Reader(runs_mu_, runs_); }
    Writer write() { return Writer(*this); }
    // fn(const RunInfo *) under the shared lock (null: no such run); what it returns.
    template <class F>
    auto with_run(const std::string &run, F &&fn) const {
        auto runs = read();
        auto it = runs.find(run);
        return fn(it == runs.end() ? nullptr : &it->second);
    }
    // Bumped on every change a connection's cached answer depends on.
    unsigned long long generation() const { return generation_.load(std::memory_order_acquire); }
    // After a store write failed: the run as it was (none: not known).
    void undo(const std::string &run, const std::optional<RunInfo> &before);
    // Throws when the run's state in memory may not become to (the store's
    // side of a change, checked before it is written).
    void check_transition(const std::string &run, RunState to) const;
    // The count key of the runs peers' decisions made here for owner
    // (Writer::open_of(peer_made(owner))).
    static std::string peer_made(const std::string &owner) { return kPeerMade + owner; }

private:
    mutable std::shared_mutex runs_mu_;
    Map runs_;
    // The key a run is counted under (open_by_owner_): its owner, or
    // peer_made(owner) for a run a peer's decision made here (its first
    // attempt here is later than 1).
    static constexpr const char *kPeerMade = "\x01peer-made ";
    static std::string count_key(const RunInfo &info);
    std::unordered_map<std::string, long long> open_by_owner_;   // runs not ended, per owner ("" none); under runs_mu_
    std::atomic<unsigned long long> generation_{1};
};

}  // namespace shardnet::broker
