#include "broker/service.hpp"

#include "broker/core/store_answer.hpp"

#include "broker/slurm/slurm_calls.hpp"

#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <openssl/rand.h>

#include "broker/api/heartbeat_body.hpp"
#include "common/parse_util.hpp"
#include "broker/core/api_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;
using namespace std::literals;


ApiResponse error_response(unsigned status, const std::string &code, const std::string &message, const std::string &field) {
    json::object e{{"code", code}, {"message", message}};
    if (!field.empty()) e["field"] = field;
    return ApiResponse{status, json::serialize(json::object{{"error", std::move(e)}}), "application/json"};
}


Service::Service(const BrokerConfig &cfg, std::unique_ptr<Store> store, ServicePorts ports)
    : Core(cfg, std::move(store),
           ports.slurm ? std::move(ports.slurm) : std::make_unique<SlurmCalls>(cfg.slurm_cache_ms, cfg.slurm_max_per_second),
           ports.peers ? std::move(ports.peers) : std::make_shared<CurlPeerLink>()),
      hooks_{[this](const std::string &run, RunState to, long long attempt, double now) { store_state(run, to, attempt, now); },
             [this](const Fault &f, const std::string &cause, json::object ev, double now) { raise_fault(f, cause, std::move(ev), now); },
             [this](const Fault &f, int tries, bool local_only) { requeues_.requeue(f, tries, local_only); },
             [this](const std::string &run) { back_to_degraded(run); },
             [this] { forwarder_.wake(); },
             [this](const std::string &run, long long attempt, const std::string &node) { return stragglers_.take(run, attempt, node); }},
      receipts_(*this), checkpoints_(*this, receipts_), policy_(*this), inventory_(*this), witnesses_(*this),
      onward_(*this), runs_api_(*this, receipts_, onward_, hooks_),
      attempts_(*this, receipts_,
                [this](const std::string &run, long long attempt, const std::string &cluster, long long job, const std::string &nodelist) {
                    verdicts_.resumed_after_slurm_requeue(run, attempt, cluster, job, nodelist);
                }),
      verdicts_(*this, hooks_, receipts_, inventory_, attempts_), requeues_(*this, hooks_, attempts_, receipts_, inventory_),
      restarts_(*this, hooks_, inventory_, receipts_), stragglers_(*this), stale_jobs_(*this),
      inbox_(*this, hooks_, inventory_, receipts_, attempts_),
      forwarder_(*this, hooks_, witnesses_, stale_jobs_) {
    auths_.push_back(std::make_unique<Auth>(cfg.tokens, cfg.rate_per_token, cfg.rate_burst, cfg.worker_keys));
    auth_ = auths_.back().get();
    auto runs = runs_.write();   // no other thread yet: one view for the load
    for (auto &r : store_->load_runs()) {
        RunInfo info{r.owner, state_from_name(r.state).value_or(RunState::failed), r.attempt, r.world_size};
        if (!state_from_name(r.state)) log_warn("unknown run state in the database, read as FAILED", r.id, r.state);
        info.manifest = r.manifest;
        info.owner_uid = r.owner_uid;
        info.requeue = r.requeue;
        // RECOVERING here when the broker stopped: its new attempt's
        // heartbeats still end the wait with RECOVERED.
        if (info.state == RunState::recovering && r.recover_to > 0 && r.recover_nodes > 0) {
            info.recover_to = r.recover_to;
            info.expected_nodes = r.recover_nodes;
        }
        runs[r.id] = std::move(info);
    }
    for (auto &a : store_->attempts().load_attempts())
        if (auto it = runs.find(a.run); it != runs.end()) it->second.jobs[a.attempt] = AttemptJob{a.cluster, a.job, a.world};
    runs.unlock();
    policy_.load_policies();
    inventory_.load_bad_nodes(wall_now());
    // Kept environments: an earlier version's get their owners before any
    // requeue reads them (the store thread takes this first); gone runs' go.
    on_store([this] { sweep_environments(); });
    // The workers of live runs are watched again, with a deadline from now:
    // one that died while the broker was down (or as it stopped) still
    // becomes a FAULT, confirmed with Slurm as ever. A worker that reports
    // goes on as before; an allocation's node without a worker stays watch-only.
    const double started = wall_now();
    for (const auto &w : store_->attempts().load_workers()) {
        if (runs_.with_run(w.run, [&](const RunInfo *r) {
                return !r || is_final(r->state) || r->state == RunState::moved || r->attempt != w.attempt;
            }))
            continue;
        if (w.job <= 0) continue;
        if (w.watch_only) workers_.watch(w.run, w.node, w.attempt, int(w.interval), started, w.cluster, w.job);
        else workers_.beat(w.run, w.node, w.attempt, int(w.interval), 0, std::nullopt, false, started, w.cluster, w.job, false);
    }
    // Decisions for peers left 'forwarding' (a crash after writing one) are
    // sent again: the peer applies each id at most once.
    // Requeue decisions written but never acted on (a stop between the two)
    // are taken up again: requeue() finds a job already submitted for one
    // by its nonce, and submits only where there is none.
    // Requeues that found no place are tried again as before the stop (every
    // 30 s, for an hour from their decision): a restart must not leave
    // their runs DEGRADED for good.
    std::set<std::string> decided;
    const auto take_up = [&](const DecisionStore::WrittenDecision &d, const std::string &what, int tries, bool local_only) {
        decided.insert(d.run);
        if (runs_.with_run(d.run, [&](const RunInfo *r) {
                return !r || r->attempt != d.from_attempt || r->state != RunState::degraded;
            }))
            return;
        Fault f{d.run, d.exclude, d.from_attempt, "(" + what + " " + d.id + " taken up after a restart)", WorkerState{}, FaultKind::silent};
        f.state.attempt = d.from_attempt;
        f.state.cluster = d.cluster;
        f.state.job = d.old_job;
        log_warn("requeue " + what + " taken up again at start", d.run, d.id);
        requeues_.requeue(f, tries, local_only);
    };
    for (const auto &d : store_->decisions().written_decisions()) take_up(d, "decision", 0, false);
    // One every peer refused stays this broker's own: no peer is asked again.
    for (const auto &u : store_->decisions().unplaced_decisions(started - Requeues::kUnplacedFor))
        take_up(u.d, "unplaced decision", std::max(1, int((started - u.created) / Requeues::kUnplacedEvery)), u.peers_refused);
    // FAULTs with no decision: those an in-job restart held when the broker
    // stopped (held again, so that the relaunch's report still counts).
    restarts_.resume_holds(decided);
    forwarder_.start();
}

Service::~Service() {
    forwarder_.stop();
    query_pool_.join();
    slurm_thread_.join();
    store_thread_.join();
}






bool Service::drain(std::chrono::steady_clock::time_point until) {
    // Not a counted job: it is the drain's own mark in the queue. Shared, so
    // that a mark left behind at the deadline has its promise still.
    auto done = std::make_shared<std::promise<void>>();
    auto reached = done->get_future();
    boost::asio::post(store_thread_, [done] { done->set_value(); });
    if (until == std::chrono::steady_clock::time_point::max()) return reached.wait(), true;
    return reached.wait_until(until) == std::future_status::ready;
}

int Service::open_streams() const {
    return runs_api_.open_streams();
}

void Service::reload(const BrokerConfig &cfg) {
    std::lock_guard<std::mutex> lock(auths_mu_);
    auths_.push_back(std::make_unique<Auth>(cfg.tokens, cfg.rate_per_token, cfg.rate_burst, cfg.worker_keys));
    auth_ = auths_.back().get();
    // A new receipts key_file signs from now on (turning receipts on or off
    // needs a restart), rotated on the store thread, where every signature is made.
    const ReceiptKeys &fresh = cfg.receipts;
    if (cfg_.receipts.on() != fresh.on()) {
        log_json("warn", "receipts: turning them on or off needs a restart; the running config keeps its receipts",
                 json::object{{"receipts", cfg_.receipts.on() ? "on" : "off"}, {"reloaded_config", fresh.on() ? "on" : "off"}});
        return;
    }
    if (fresh.on()) on_store([this, fresh] { receipts_.rotate(fresh); });
}





std::string Service::metrics() const {
    std::string s;
    auto line = [&](const char *name, const char *help, unsigned long long v, const char *type = "counter") {
        s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + std::to_string(v) + "\n";
    };
    line("shardnet_requests_total", "HTTP requests handled", total(c_requests));
    line("shardnet_heartbeats_total", "heartbeats accepted", total(c_heartbeats));
    line("shardnet_faults_total", "FAULT events raised", total(c_faults));
    line("shardnet_events_total", "events recorded", total(c_events));
    line("shardnet_seals_total", "checkpoints sealed", total(c_seals));
    line("shardnet_rate_limited_total", "requests answered 429", total(c_rate_limited));
    line("shardnet_auth_failures_total", "requests answered 401", total(c_auth_failures));
    line("shardnet_worker_refusals_total", "worker reports refused: not the token's job, run or attempt", total(c_refused));
    line("shardnet_slurm_requeues_total", "jobs Slurm requeued itself (scontrol requeue, preemption, JobRequeue): not failures", total(c_slurm_requeues));
    line("shardnet_witness_conflicts_total", "peer log heads that did not extend the one witnessed before (a rollback or a fork)",
         total(c_witness_conflicts));
    s += "# HELP shardnet_store_refusals_total requests answered 503 or 500 because the store refused them, by cause\n"
         "# TYPE shardnet_store_refusals_total counter\n";
    for (auto [kind, cause] : {std::pair{StoreFault::full, "full"}, {StoreFault::io, "io"}, {StoreFault::busy, "busy"},
                               {StoreFault::other, "other"}})
        s += std::string("shardnet_store_refusals_total{cause=\"") + cause + "\"} " + std::to_string(detail::store_refusals(kind)) + "\n";
    line("shardnet_failed_jobs_total", "jobs on the broker's threads that threw (logged, then dropped)", failed_jobs());
    line("shardnet_slurm_calls_total", "commands run against slurmctld", slurm_->calls());
    line("shardnet_slurm_cache_hits_total", "Slurm queries answered from the cache", slurm_->cache_hits());
    line("shardnet_workers_tracked", "workers in the failure detector", workers_.size(), "gauge");
    line("shardnet_event_streams", "event streams open (limits.sse_max_streams)", (unsigned long long)runs_api_.open_streams(), "gauge");
    {
        auto runs = runs_.read();
        line("shardnet_runs", "runs known", runs.size(), "gauge");
    }
    return s;
}

}  // namespace shardnet::broker
