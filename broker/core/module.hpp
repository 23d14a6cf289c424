// What a module of the broker sees of the core (core.hpp), under the names
// the code has always used: cfg_, store_, runs_, the threads, on_store,
// store_wait, transact, event... A module's class derives from it and is
// given the core by Service, which constructs both.
#pragma once
#include "broker/core/core.hpp"

namespace shardnet::broker {

class Module {
protected:
    explicit Module(Core &core)
        : core_(core), cfg_(core.cfg_), store_(core.store_), store_thread_(core.store_thread_), slurm_thread_(core.slurm_thread_),
          query_pool_(core.query_pool_), slurm_(core.slurm_), peers_(core.peers_), runs_(core.runs_), workers_(core.workers_), allocations_(core.allocations_) {}

    template <class F> auto store_wait(F fn) -> decltype(fn()) { return core_.store_wait(std::move(fn)); }
    void on_store(std::function<void()> job) { core_.on_store(std::move(job)); }
    void on_store(const Reply &reply, std::function<void(const Reply &)> job) { core_.on_store(reply, std::move(job)); }
    void event(const std::string &run, const std::string &kind, const std::string &cause, const std::string &evidence, double now) {
        core_.event(run, kind, cause, evidence, now);
    }
    void transact(const std::function<void()> &fn) { core_.transact(fn); }
    bool write_event(const std::string &run, const std::string &kind, const std::string &cause, const std::string &evidence, double now) {
        return core_.write_event(run, kind, cause, evidence, now);
    }
    void retry_later(double delay, const char *what, std::function<void()> fn) { core_.retry_later(delay, what, std::move(fn)); }
    bool retry_once(const std::string &key, double delay, const char *what, std::function<void()> fn) {
        return core_.retry_once(key, delay, what, std::move(fn));
    }
    void count(Counter c) { core_.count(c); }
    std::string refuse_worker(const RunInfo *info, const std::string &run, const TokenEntry &who, long long attempt) const {
        return core_.refuse_worker(info, run, who, attempt);
    }
    std::optional<ApiResponse> refuse_attempt_writer(const std::string &id, const TokenEntry &who, long long attempt, long long &world,
                                                     const char *what) {
        return core_.refuse_attempt_writer(id, who, attempt, world, what);
    }
    std::optional<std::set<std::string>> job_nodes(const std::string &cluster, long long job, std::string &why) {
        return core_.job_nodes(cluster, job, why);
    }

    Core &core_;
    const BrokerConfig &cfg_;
    std::unique_ptr<Store> &store_;
    boost::asio::thread_pool &store_thread_, &slurm_thread_, &query_pool_;
    std::unique_ptr<Slurm> &slurm_;
    std::shared_ptr<PeerLink> &peers_;
    RunRegistry &runs_;
    WorkerTable &workers_;
    JobAllocations &allocations_;
};

}  // namespace shardnet::broker
