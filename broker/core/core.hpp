// The broker's shared context (the core): what every module of the broker
// is given by reference and none owns alone. The configuration, the store
// and its one thread (on_store, store_wait, transact, event), the Slurm and
// peer interfaces with the threads that call them, the run registry, the
// retries run from tick(), and the counters the metrics read. Service
// constructs it and hands it to each module (core/module.hpp); it includes
// no module folder (arrows: service -> modules -> core -> runs/store/util).
#pragma once
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/config/config.hpp"
#include "broker/http/api_message.hpp"
#include "broker/runs/registry.hpp"
#include "broker/slurm/job_allocations.hpp"
#include "broker/slurm/slurm.hpp"
#include "broker/store/store.hpp"
#include "broker/workers/workers.hpp"

namespace shardnet::broker {

class PeerLink;   // peers/peer_link.hpp: the real one or a test's fake, made by Service

double wall_now();

// The metrics' counters (Core::count), one padded slot per thread.
enum Counter { c_requests, c_heartbeats, c_errors, c_faults, c_events, c_seals, c_rate_limited, c_auth_failures, c_refused, c_slurm_requeues,
               c_witness_conflicts, n_counters };

class Core {
public:
    Core(const BrokerConfig &cfg, std::unique_ptr<Store> store, std::unique_ptr<Slurm> slurm, std::shared_ptr<PeerLink> peers);
    Core(const Core &) = delete;
    Core &operator=(const Core &) = delete;

    // Runs fn on the store thread and waits for it.
    template <class F> auto store_wait(F fn) -> decltype(fn());
    // Jobs for the store thread, under the guard (guard.hpp); the second
    // answers its request 500 if it throws before answering.
    // Waits (up to seconds) until no job posted to the broker's threads is
    // under way (api_util.hpp, jobs_in_flight): what was asked of it so
    // far is done. For tests, which judge by what happened, never by how
    // long they slept; false when it never settled.
    static bool settle(double seconds = 10);
    void on_store(std::function<void()> job);
    void on_store(const Reply &reply, std::function<void(const Reply &)> job);
    // An event of run, inside the store transaction under way (store thread).
    void event(const std::string &run, const std::string &kind, const std::string &cause, const std::string &evidence,
               double now);
    // A store transaction whose events reach the live streams once committed.
    void transact(const std::function<void()> &fn);
    // One event alone, from any thread but the store's; one the store does
    // not take is logged (false), not thrown.
    bool write_event(const std::string &run, const std::string &kind, const std::string &cause, const std::string &evidence, double now);
    // A live stream of run's events, from now on (store thread: after its backlog).
    void follow(const std::string &run, const std::shared_ptr<EventSink> &sink);

    // Work to do again later (a store write that failed), run from tick().
    void retry_later(double delay, const char *what, std::function<void()> fn);
    // The same, unless work with this key waits already (false: not added).
    bool retry_once(const std::string &key, double delay, const char *what, std::function<void()> fn);
    void run_retries(double now);

    // Why a derived worker token (who) may not report for attempt of a run,
    // or "" (trust/refusals.hpp, with this broker's clusters).
    std::string refuse_worker(const RunInfo *info, const std::string &run, const TokenEntry &who, long long attempt) const;
    // Who may write for an attempt of run id (a commit, a ranks' report):
    // its own job's worker token or an admin, for the current attempt only;
    // world becomes the attempt's ranks as the broker knows them for a
    // worker token (an admin's body is taken). The refusal, or nullopt.
    std::optional<ApiResponse> refuse_attempt_writer(const std::string &id, const TokenEntry &who, long long attempt, long long &world,
                                                     const char *what);
    // Slurm's list of a job's nodes (squeue, scontrol show hostnames), or
    // nullopt with why (the slurm thread); the answer is kept in allocations_.
    std::optional<std::set<std::string>> job_nodes(const std::string &cluster, long long job, std::string &why);

    void count(Counter c);
    unsigned long long total(Counter c) const;

    BrokerConfig cfg_;
    std::unique_ptr<Store> store_;
    // Declared before the threads, so destroyed after them: work a thread
    // pool still held (posted after it was joined) is dropped while these
    // are alive (a judgment's flag reaches the registry as it goes).
    RunRegistry runs_;   // every run's record, behind its lock (runs/registry.hpp)
    WorkerTable workers_;   // every worker's soft state and deadline (workers/workers.hpp)
    JobAllocations allocations_;   // Slurm's nodes and task count of the jobs that report
    boost::asio::thread_pool store_thread_{1};
    std::atomic<int> store_jobs_{0};   // posted to store_thread_ and not yet ended
    boost::asio::thread_pool slurm_thread_{1};
    boost::asio::thread_pool query_pool_{2};   // capacity searches (Slurm and peers)
    std::unique_ptr<Slurm> slurm_;
    std::shared_ptr<PeerLink> peers_;

private:
    std::vector<EventRow> pending_events_;   // store thread only
    std::mutex sinks_mu_;
    std::unordered_multimap<std::string, std::weak_ptr<EventSink>> sinks_;
    struct Retry { double at; const char *what; std::function<void()> fn; std::string key; };
    std::mutex retry_mu_;
    std::vector<Retry> retries_;
    struct alignas(64) Slot { std::atomic<unsigned long long> c[n_counters]{}; };
    static constexpr int kSlots = 16;
    Slot slots_[kSlots];
};

template <class F>
auto Core::store_wait(F fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto result = task.get_future();
    // No guard needed: the task keeps what fn throws for result.get(),
    // which rethrows it on the waiting thread (itself a guarded job).
    store_jobs_.fetch_add(1, std::memory_order_relaxed);
    boost::asio::post(store_thread_, [this, &task] {
        task();
        store_jobs_.fetch_sub(1, std::memory_order_relaxed);
    });
    return result.get();
}

}  // namespace shardnet::broker
