// The in-job restarts module (in_job_restarts.hpp says what they are):
// `shard launch`'s reports (POST /v1/runs/RUN/restarts,
// recovery/in_job_restarts.cpp), a supervised attempt's FAULT held for its
// relaunch before any requeue, held again after the broker's restart, and a
// spare node's loss, which is no FAULT. Its supervisions are its own: only
// this module's code takes their lock.
#pragma once
#include <boost/json/object.hpp>
#include <set>
#include <string>

#include "broker/core/hooks.hpp"
#include "broker/core/module.hpp"
#include "broker/inventory/inventory_module.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/recovery/in_job_restarts.hpp"

namespace shardnet::broker {

class Restarts : Module {
public:
    Restarts(Core &core, const ServiceHooks &hooks, Inventory &inventory, Receipts &receipts)
        : Module(core), hooks_(hooks), inventory_(inventory), receipts_(receipts) {}

    // POST /v1/runs/RUN/restarts: `shard launch`'s in-job restarts.
    void restart_report(const std::string &id, const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now);
    // A FAULT of an attempt `shard launch` supervises waits for its in-job
    // restart or its giving up; else it is requeued.
    // FAULT_AT: when the FAULT was raised (default: now).
    void requeue_or_hold(const Fault &fault, double now, double fault_at = -1);
    // At start: a supervised attempt's FAULT that was held when the broker
    // stopped (DEGRADED, no decision in decided) is held again from now.
    void resume_holds(const std::set<std::string> &decided);
    // A node of a supervised attempt that is not one of its step's nodes (a spare).
    bool is_spare(const std::string &run, long long attempt, const std::string &node);
    void spare_lost(const Fault &fault, const std::string &node, const std::string &why, boost::json::object ev);
    // The detector's tick: supervisions that are over are forgotten.
    void prune(double now);

private:
    void apply_restart_report(const std::string &id, const RestartReport &rep, double now, const Reply &reply);
    bool run_state_is(const std::string &run, long long attempt, RunState state);
    // The held FAULT (held at held_at) is requeued kHoldSeconds from then,
    // unless a relaunch or giving up answered it.
    void hold_timer(const std::string &run, long long attempt, double held_at);
    // A swap's refusal, or none: the slow node in the step, the spare not,
    // and a STRAGGLER of the attempt naming it (taken once).
    std::optional<ApiResponse> refuse_swap(const std::string &id, const RestartReport &rep);
    // A relaunch written (restarted, swapped): the left nodes' and the ended
    // step's workers retired, the old step's failures forgotten, RUNNING if back.
    void relaunched(const std::string &id, const RestartReport &rep, bool back);
    // A relaunch report not taken: the same one sent again counts.
    void uncount_restart(const std::string &run, long long attempt);
    // A held FAULT put back when the report that took it was not written.
    void rehold(const std::string &run, const Fault &fault, double held_at, double fault_at);

    const ServiceHooks &hooks_;
    Inventory &inventory_;
    Receipts &receipts_;   // a relaunch's attempt-restarted receipt
    InJobRestarts in_job_;
};

}  // namespace shardnet::broker
