// The failure detector's side of the service: deadlines that passed are
// confirmed with Slurm before they become FAULT events; soft state goes to
// the store now and then.
#include <boost/asio/post.hpp>
#include <boost/json.hpp>

#include "broker/recovery/job_environment.hpp"
#include "broker/service.hpp"
#include "broker/core/api_util.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using detail::log_warn;

void Service::tick(double now) {
    for (auto &fault : workers_.expire(now)) {
        {
            auto runs = runs_.read();
            auto it = runs.find(fault.run);
            if (it == runs.end() || it->second.attempt != fault.attempt || is_final(it->second.state)) continue;
            // Recovering to a newer attempt: the old attempt's workers going
            // silent is the recovery itself (its job is being ended), not a
            // new fault (a restarted broker restores and watches them).
            if (it->second.state == RunState::recovering && it->second.recover_to > fault.attempt) continue;
            // The batch script ended and its end is being judged
            // (verdict.cpp): the judgment asks Slurm about these workers.
            if (it->second.judging == fault.attempt) continue;
        }
        confirm(std::move(fault), now);
    }
    run_retries(now);
    stragglers_.tick(now);
    auth_.load(std::memory_order_acquire)->sweep(now);
    restarts_.prune(now);
}

void Service::confirm(Fault fault, double now) {
    auto conf = cfg_.clusters.find(fault.state.cluster);
    if (conf == cfg_.clusters.end() || fault.state.job <= 0) {
        // No Slurm to ask for this cluster: the broker's own evidence only.
        return raise_fault(fault, fault.cause, json::object{{"confirmed", false}}, now);
    }
    detail::post_guarded(slurm_thread_, "confirm fault", [this, fault = std::move(fault), slurm_conf = conf->second, now] {
        const std::string node = fault.node.substr(0, fault.node.find('/'));
        SlurmView v = ask_slurm(*slurm_, slurm_conf, fault.state.job, node);
        json::object ev{{"confirmed", true}, {"slurm_job_state", v.job_state}, {"slurm_node_state", v.node_state},
                        {"slurmd_answers", v.slurmd_answers}};
        if (!v.controller_ok) {
            // The broker's own evidence (a silent worker), and why Slurm could
            // not confirm it (down, or an answer it cannot read: no verdict).
            ev["slurmctld"] = v.error;
            if (v.unreadable) ev["confirmed"] = false;
            return raise_fault(fault, fault.cause + "; cluster " + fault.state.cluster +
                               (v.unreadable ? "'s answer unreadable" : " unreachable"), ev, wall_now());
        }
        if (!job_state_running(v.job_state)) {
            // A limit ended the job, its node fine, its end not reported (the
            // broker was away, the agent's last report lost): judged as the
            // batch end would have been, never a node's fault.
            const bool limit = v.job_state == "TIMEOUT" || v.job_state == "OUT_OF_MEMORY" || v.job_state == "DEADLINE";
            if (limit && !node_state_bad(v.node_state) && v.slurmd_answers) {
                workers_.retire(fault.run, fault.node);
                if (is_batch_worker(fault.node)) verdicts_.ended_at_limit(fault, v.job_state, ev);
                return;
            }
            if (v.job_state == "NODE_FAIL") ev["node_failure"] = true;
            if (v.job_state == "NODE_FAIL" || v.job_state == "FAILED" || v.job_state == "TIMEOUT" || v.job_state == "OUT_OF_MEMORY")
                return raise_fault(fault, fault.cause + "; Slurm job " + std::to_string(fault.state.job) + " " + v.job_state, ev, wall_now());
            // The job ended; its last report was lost. Requeued by Slurm
            // itself, it starts again as the same attempt: its workers
            // report again and are watched again.
            const bool requeued = job_requeued_by_slurm(v.job_state);
            workers_.retire(fault.run, fault.node, requeued);
            if (is_batch_worker(fault.node) && requeued) {
                // Slurm requeued the job itself and its batch step's end was
                // not reported (Slurm 24.11 ends the step's processes, the
                // agent's with them, before it can): judged as that end would
                // have been, no failure.
                BatchEnd end;
                end.run = fault.run, end.attempt = fault.attempt, end.cluster = fault.state.cluster, end.job = fault.state.job;
                end.node = fault.node.substr(0, fault.node.find('/'));
                return verdicts_.slurm_requeued(end, "Slurm requeued job " + std::to_string(end.job) + " itself (" + v.job_state +
                                                     "; the batch script's end was not reported): the attempt goes on when Slurm "
                                                     "starts it again", json::serialize(ev), wall_now());
            }
            if (is_batch_worker(fault.node)) verdicts_.end_from_slurm(fault, v.job_state, wall_now());
            return;
        }
        const bool node_down = node_state_bad(v.node_state) || !v.slurmd_answers;
        // Whose word it is: Slurm's (its node DOWN or FAIL) or the broker's
        // own (a refused connect to slurmd, Slurm's NOT_RESPONDING): the
        // run recovers at once either way, but only Slurm's word holds the
        // node for other runs (Inventory::seen_down).
        const bool slurm_word = node_dead_in_slurm(v.node_state);
        const std::string down_why = (v.slurmd_answers ? v.node_state : "slurmd unreachable") +
                                     (slurm_word ? "" : " (seen by the broker; Slurm says " + (v.node_state.empty() ? "nothing" : v.node_state) + ")");
        if (node_down) ev["seen_by"] = slurm_word ? "slurm" : "broker";
        if (fault.state.watch_only) {  // a node of the allocation without a worker: only its health counts
            if (!node_down) {
                workers_.suspect(fault.run, fault.node, wall_now() + double(fault.state.interval) * cfg_.detector_misses);
                return;
            }
            if (restarts_.is_spare(fault.run, fault.attempt, node)) return restarts_.spare_lost(fault, node, down_why, std::move(ev));
            ev["no_worker_yet"] = true;
            ev["node_failure"] = true;
            inventory_.seen_down(fault.state.cluster, node, wall_now(), fault.run, "down before a worker reported: " + down_why, v.node_state);
            return raise_fault(fault, "(node " + node + " of job " + std::to_string(fault.state.job) +
                               "'s allocation, no worker there yet) down: " + down_why, ev, wall_now());
        }
        if (node_down) {
            ev["node_failure"] = true;
            inventory_.seen_down(fault.state.cluster, node, wall_now(), fault.run, fault.cause + "; " + down_why, v.node_state);
            return raise_fault(fault, fault.cause + "; node " + node + " " + down_why, ev, wall_now());
        }
        if (fault.kind == FaultKind::stalled)  // node and job are fine: the trainer hangs
            return raise_fault(fault, fault.cause + "; node " + node + " and job healthy in Slurm", ev, wall_now());
        if (!fault.state.suspected) {
            // Silent, but Slurm and slurmd say the node is fine: a network or
            // broker hiccup until the silence lasts another full deadline.
            workers_.suspect(fault.run, fault.node, wall_now() + double(fault.state.interval) * cfg_.detector_misses);
            return;
        }
        raise_fault(fault, fault.cause + " for two deadlines although slurmd on " + node + " answers", ev, wall_now());
    });
}

void Service::raise_fault(const Fault &fault, const std::string &cause, json::object evidence, double now, int tries) {
    {
        auto runs = runs_.read();
        auto it = runs.find(fault.run);
        if (it == runs.end() || it->second.attempt != fault.attempt || !transition_allowed(it->second.state, RunState::degraded) ||
            (it->second.state == RunState::recovering && it->second.recover_to > fault.attempt))
            return;
    }
    if (tries == 0) count(c_faults);
    evidence["node"] = fault.node;
    evidence["attempt"] = fault.attempt;
    evidence["last_seen"] = fault.state.last_seen;
    evidence["interval"] = fault.state.interval;
    evidence["silent_for"] = now - fault.state.last_seen;
    if (fault.state.step >= 0) evidence["last_step"] = fault.state.step;
    if (fault.state.job > 0) evidence["job"] = fault.state.job;
    // The database first: the FAULT and DEGRADED, then memory, then the
    // requeue. A store that fails is tried again (the FAULT is not lost).
    on_store([this, fault, cause, evidence, now, tries] {
        // The attempt's first FAULT is one interruption of its nodes (the
        // checkpoint policy's M) when Slurm confirms a node failed: a hung
        // trainer or a job's own crash is the job's, and a job could
        // otherwise lower every run's M with cheap stalls. More FAULTs of
        // the attempt are the same interruption.
        const bool node_failure = evidence.contains("node_failure");
        bool first = false;
        {
            auto runs = runs_.read();
            auto it = runs.find(fault.run);
            // Asked again on the store's thread: a verdict written since
            // (a FAILED, a newer attempt) is not overwritten.
            if (it == runs.end() || it->second.attempt != fault.attempt || !transition_allowed(it->second.state, RunState::degraded) ||
                (it->second.state == RunState::recovering && it->second.recover_to > fault.attempt))
                return;
            first = it->second.state != RunState::degraded;
        }
        try {
            transact([&] {
                store_state(fault.run, RunState::degraded, fault.attempt, now);
                event(fault.run, "FAULT", "worker " + fault.node + " " + cause, json::serialize(evidence), now);
                if (first && node_failure) store_->policy().add_exposure(fault.state.cluster, 0, 1);
                // The attempt ends at its first FAULT (later ones are the same end).
                if (first)
                    receipts_.write_receipt(receipt::Kind::attempt_ended, fault.run, fault.attempt,
                                  json::object{{"how", "fault"}, {"cause", "worker " + fault.node + " " + cause}, {"evidence", evidence}}, {}, now);
            });
        } catch (const std::exception &e) {
            log_warn("FAULT not written; tried again in 1 s", fault.run, e.what());
            if (tries < 600) retry_later(1.0, "FAULT retry", [=, this] { raise_fault(fault, cause, evidence, now, tries + 1); });
            return;
        }
        {
            auto runs = runs_.write();
            auto it = runs.find(fault.run);
            if (it == runs.end() || it->second.attempt != fault.attempt || !runs.set_state(fault.run, it->second, RunState::degraded)) return;
            if (first) it->second.clock = RunInfo::RecoveryClock{fault.attempt + 1, "", fault.state.last_seen, now};
        }
        restarts_.requeue_or_hold(fault, now);
    });
}

void Service::summarise() {
    std::vector<Policy::WorkerSummary> rows;
    workers_.for_each([&](const std::string &run, const std::string &node, const WorkerState &w) { rows.push_back({run, node, w}); });
    on_store([this, rows = std::move(rows)] {
        transact([&] {
            for (const auto &[run, node, w] : rows)
                store_->attempts().upsert_worker(run, w.attempt, node, std::to_string(w.ranks), w.last_seen, w.step, w.interval,
                                      w.ended || w.faulted, w.watch_only, w.cluster, w.job);
        });
        policy_.measure_policies(rows, wall_now());
        // Bad-node memory keeps 30 days (inventory/bad_nodes.cpp); so do a
        // finished run's seals carried here from a peer (no resume needs them).
        try {
            transact([&] {
                store_->nodes().forget_node_faults(wall_now() - 30 * 86400.0);
                store_->seals().forget_carried_seals(wall_now() - 30 * 86400.0);
            });
        } catch (const std::exception &) {}
        sweep_environments();
    });
}

void Service::sweep_environments() {
    // A kept environment lives as long as its run here: one whose run
    // is gone or ended (its end missed by a crash, an earlier version's
    // refused decision) is deleted; its values may be secrets. An earlier
    // version's file of a live run gets its owner, or goes. A file kept
    // for a job of a cluster that is not this broker's is another broker's
    // (two brokers whose databases share a directory share this one): left.
    std::string ignored;
    const std::string dir = private_dir(cfg_.database, ignored);
    if (dir.empty()) return;
    for (const auto &run : kept_environment_runs(dir)) {
        if (auto kept = read_environment_file(dir, run, ignored); kept && kept->origin.uid >= 0 && !cfg_.clusters.count(kept->origin.cluster))
            continue;
        bool live = false;
        {
            auto runs = runs_.read();
            auto it = runs.find(run);
            live = it != runs.end() && !is_final(it->second.state);
        }
        if (!live) forget_environment_file(dir, run);
        else adopt_legacy_environment(*this, dir, run);
    }
}

}  // namespace shardnet::broker
