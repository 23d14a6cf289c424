// The broker's API v1 behind one signature: handle(request, reply). It does
// not know about sockets; the HTTP server feeds it and writes what it
// replies. Blocking work (SQLite) runs on the store's thread; reply() may
// be called from there.
#pragma once
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>
#include <shared_mutex>
#include <string>
#include <condition_variable>
#include <map>
#include <set>
#include <future>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "broker/api/heartbeat_body.hpp"
#include "broker/api/routes.hpp"
#include "broker/api/runs_api.hpp"
#include "broker/trust/auth.hpp"
#include "broker/trust/refusals.hpp"
#include "broker/util/token_gate.hpp"
#include "broker/config/config.hpp"
#include "broker/core/core.hpp"
#include "broker/core/hooks.hpp"
#include "broker/detector/verdicts.hpp"
#include "broker/peers/peer_answer.hpp"
#include "broker/http/api_message.hpp"
#include "broker/federation/onward_module.hpp"
#include "broker/peers/peer_link.hpp"
#include "broker/federation/forwarder.hpp"
#include "broker/federation/inbox.hpp"
#include "broker/federation/stale_jobs.hpp"
#include "broker/federation/witnesses.hpp"
#include "broker/slurm/job_allocations.hpp"
#include "broker/slurm/slurm.hpp"
#include "broker/inventory/inventory_module.hpp"
#include "broker/recovery/restarts_module.hpp"
#include "broker/detector/stragglers.hpp"
#include "broker/recovery/attempts.hpp"
#include "broker/recovery/requeues.hpp"
#include "broker/runs/registry.hpp"
#include "broker/store/store.hpp"
#include "broker/checkpoints/checkpoints_module.hpp"
#include "broker/policy/policy_module.hpp"
#include "broker/workers/admission_lock.hpp"
#include "broker/workers/workers.hpp"
#include "broker/receipts/receipts.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "common/receipt.hpp"

namespace shardnet::broker {


// What the service talks to outside its process, each behind an interface
// (tests give fakes). Null: the real one (Slurm's commands, libcurl).
struct ServicePorts {
    std::unique_ptr<Slurm> slurm;
    std::shared_ptr<PeerLink> peers;
};

// The composition root: the core (core/core.hpp) and the modules it wires.
class Service final : public ApiHandler, private Core {
public:
    Service(const BrokerConfig &cfg, std::unique_ptr<Store> store, ServicePorts ports = {});
    ~Service();

    void handle(const ApiRequest &req, const Reply &reply) override;
    // Detector: FAULT events for workers past their deadline. Called often.
    void tick(double now);
    // Soft state to the store (summaries), every summary_seconds.
    void summarise();
    // Kept environments whose run is gone or ended are deleted (store thread).
    void sweep_environments();
    // New tokens and limits from a reloaded config (listen address stays).
    void reload(const BrokerConfig &cfg);
    // Waits for the store's queue to empty (drain on SIGTERM), until the
    // deadline at most: false when it passed first.
    bool drain(std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::max());
    // What a drain cut short is said in its log: store jobs queued or
    // running, and the event streams open.
    int store_jobs() const { return store_jobs_.load(std::memory_order_relaxed); }
    int open_streams() const;
    std::string metrics() const;

private:
public:
    using AttemptJob = broker::AttemptJob;
    using RunInfo = broker::RunInfo;

private:
    using Json = std::string;

    // looked_up: Slurm was just asked about the job (admission, below).
    void heartbeats(const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now, bool looked_up = false);
    // A job's worker reporting for the first time (service_admission.cpp):
    // its node must be one of the job's Slurm nodes, and the job's workers
    // that still report stay within its task count. admitted: go on (hold
    // is locked until the worker is in the table); answered: refused;
    // asked: Slurm is being read, and the heartbeat comes back here after.
    enum class Admission { admitted, answered, asked };
    // Whether the run would take this job's heartbeat (refuse_worker, not
    // a fenced attempt): only then is its worker admitted against Slurm.
    bool run_takes(std::string_view run, const TokenEntry &who, long long attempt) const;
    Admission admit_worker(const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now, std::string_view run,
                           std::string_view node, std::string_view worker, long long attempt, bool ended, bool looked_up,
                           std::unique_lock<std::mutex> &hold);
    // The job's workers that still report stay under tasks (from Slurm, or
    // the token's step where Slurm cannot be asked).
    Admission within_tasks(const Reply &reply, const TokenEntry &who, std::string_view run, std::string_view worker, long long attempt,
                           bool ended, long long tasks, bool from_slurm, std::unique_lock<std::mutex> &hold);
    std::shared_ptr<TokenGate> requests_gate_ = std::make_shared<TokenGate>(cfg_.requests_per_token);
    // The route table (service_routes.cpp): each API resource and its handler.
    struct Call;
    struct Route;
    static std::span<const Route> routes();
    friend std::span<const RouteSpec> api_routes();
    // The database's side of a run's state change (in memory:
    // RunRegistry::Writer::set_state): inside a store transaction, before
    // memory changes. Throws (the transaction then writes nothing) when the
    // run's state in memory may not become to.
    void store_state(const std::string &run, RunState to, long long attempt, double now);
    // A recovery handed to peers that ended nowhere: RECOVERING -> DEGRADED.
    void back_to_degraded(const std::string &run);
    // "" or why a client may not create run id (a job's default id).
    std::string reserved_run_id(const std::string &id) const { return broker::reserved_run_id(id, cfg_); }
    // Asks Slurm (on its own thread) before a suspected failure becomes FAULT.
    void confirm(Fault fault, double now);
    void raise_fault(const Fault &fault, const std::string &cause, boost::json::object evidence, double now, int tries = 0);
    struct Beat;      // one heartbeat, step by step (service_heartbeats.cpp)
public:
    // One look at every peer's log head (federation/witnesses.hpp); public for tests.
    void witness_round(double now) { witnesses_.round(now); }
private:


    ServiceHooks hooks_;   // what the modules ask of Service (core/hooks.hpp), wired in its constructor
    Receipts receipts_;   // signed receipts, their log and API (receipts/receipts_module.hpp)
    Checkpoints checkpoints_;   // commits, seals, sealed files (checkpoints/checkpoints_module.hpp)
    Policy policy_;   // checkpoint policies of auto runs (policy/policy_module.hpp)
    Inventory inventory_;   // nodes, offers, quarantined nodes, clusters, capacity (inventory/inventory_module.hpp)
    Witnesses witnesses_;   // the peers' log heads witnessed here, GET /v1/witness (federation/witnesses.hpp)
    Onward onward_;   // moved runs' stories: GET .../story, "onward" in answers (federation/onward_module.hpp)
    RunsApi runs_api_;   // the runs resource, its events and streams, the dashboard's views (api/runs_api.hpp)
    Attempts attempts_;   // job specs kept, next attempts submitted and recorded (recovery/attempts.hpp)
    Verdicts verdicts_;   // a job's end judged: a dead node's FAULT, FAILED, Slurm's own end (detector/verdicts.hpp)
    Requeues requeues_;   // requeue-on-failure and RECOVERED (recovery/requeues.hpp)
    Restarts restarts_;   // in-job restarts: reports, held FAULTs, spares (recovery/restarts_module.hpp)
    Stragglers stragglers_;   // STRAGGLER events from step rates (detector/stragglers.hpp)
    StaleJobs stale_jobs_;   // fenced attempts' jobs cancelled (federation/stale_jobs.hpp)
    Inbox inbox_;   // decisions from peers, POST /v1/decisions (federation/inbox.hpp)
    Forwarder forwarder_;   // decisions sent to peers, on its own thread (federation/forwarder.hpp)
    // Replaced whole on reload; retired ones are kept (reloads are rare and
    // connections may hold pointers into them).
    std::atomic<Auth *> auth_{nullptr};
    std::vector<std::unique_ptr<Auth>> auths_;
    std::mutex auths_mu_;
    AdmissionLock admission_;   // one new worker at a time is counted against its job's cap (workers/admission_lock.hpp)
};


}  // namespace shardnet::broker
