// A batch script that ended non-zero with every node of its job alive is not
// yet the program's own error: Slurm may have ended the job itself. Its
// word is asked once the job's state has settled (COMPLETING passes within
// KillWait and the epilog):
//   PENDING, REQUEUED, REQUEUE_HOLD, REQUEUE_FED, SPECIAL_EXIT: Slurm
//     requeued the job itself (an admin's scontrol requeue, a preemption in
//     REQUEUE mode, a node failure under JobRequeue=1). No failure: the run
//     goes on when Slurm starts the job again, as the same attempt (event
//     REQUEUED, counted apart from ShardNet's own requeues).
//   PREEMPTED: preempted and ended: a FAULT no node is to blame for,
//     recovered by the run's requeue policy.
//   CANCELLED: cancelled in Slurm (scancel): the run is CANCELLED.
//   TIMEOUT, OUT_OF_MEMORY, DEADLINE: FAILED, with that cause; but a
//     TIMEOUT of a job with --shardnet-on-timeout=requeue that sealed a
//     checkpoint after its pre-limit signal is a FAULT (no node to blame),
//     requeued from that checkpoint by the run's policy and budget.
//   Anything else (FAILED, a job Slurm no longer lists): the judgment
//     stands, FAILED naming the first failing rank.
#include <boost/asio/post.hpp>
#include <boost/json.hpp>

#include "broker/detector/verdicts.hpp"
#include "broker/core/api_util.hpp"
#include "broker/slurm/slurm_job.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using detail::log_warn;

namespace {

// Rounds (a second apart) a job may stay COMPLETING (KillWait, the
// epilog), or RUNNING after its batch script's end was reported (slurmstepd
// tells slurmctld within a second), before the judgment stands as it is.
constexpr int kMaxCompletingRounds = 30, kMaxRunningRounds = 3;

std::string failed_words(const std::string &s) {
    if (s == "TIMEOUT") return "the job reached its time limit (Slurm: TIMEOUT)";
    if (s == "OUT_OF_MEMORY") return "out of memory (Slurm: OUT_OF_MEMORY)";
    if (s == "DEADLINE") return "the job reached its deadline (Slurm: DEADLINE)";
    return "";
}

}  // namespace

void Verdicts::settle_end(const BatchEnd &end, const std::optional<RunInfo::RankFailure> &first, const std::string &unreported,
                          std::shared_ptr<void> hold, int round) {
    auto conf = cfg_.clusters.find(end.cluster);
    std::string out, state, reason, unreadable;
    long long restarts = 0;
    if (conf != cfg_.clusters.end() && slurm_->fresh(conf->second, {std::begin(kSqueueJson), std::end(kSqueueJson)}, out) == 0) {
        SlurmJob j;
        json::object record;
        if (const JobRead read = find_job_noted(*slurm_, conf->second, out, end.job, j, &record); read.found()) {
            state = j.state;
            if (auto *r = record.if_contains("state_reason"); r && r->is_string()) reason = std::string(r->as_string()).substr(0, 200);
            if (auto *r = record.if_contains("restart_cnt"); r && r->is_int64()) restarts = r->as_int64();
        } else if (read.lookup == JobLookup::unreadable) {
            unreadable = read.why;   // no state: judged on the broker's own evidence, the reason named
        }
    }
    const RunInfo::RankFailure *f = first ? &*first : nullptr;
    // Not settled yet: asked again in a second (the judgment's flag held).
    if ((state == "COMPLETING" && round < kMaxCompletingRounds) || ((state == "RUNNING" || state == "CONFIGURING") && round < kMaxRunningRounds))
        return retry_later(1.0, "settle a job's end", [this, end, first, unreported, hold, round] {
            detail::post_guarded(slurm_thread_, "settle a job's end", [this, end, first, unreported, hold, round] {
                settle_end(end, first, unreported, hold, round + 1);
            });
        });
    json::object ev{{"attempt", end.attempt}, {"job", end.job}, {"slurm_job_state", state}, {"batch_node", end.node}};
    if (!reason.empty() && reason != "None") ev["slurm_reason"] = reason;
    if (!unreadable.empty()) ev["slurm_unreadable"] = unreadable;
    if (job_requeued_by_slurm(state)) {
        ev["restarts"] = restarts;
        return slurm_requeued(end, "Slurm requeued job " + std::to_string(end.job) + " itself (" + state +
                              (reason.empty() || reason == "None" ? "" : ", " + reason) + "; restart " + std::to_string(restarts) +
                              "): not a failure; attempt " + std::to_string(end.attempt) + " goes on when Slurm starts it again",
                              json::serialize(ev), wall_now());
    }
    std::string policy;
    {
        auto runs = runs_.read();
        if (auto it = runs.find(end.run); it != runs.end()) policy = it->second.requeue;
    }
    // A run that is never requeued ends here, as with any other end.
    if (state == "PREEMPTED" && policy == "off")
        return end_failed(end, f, unreported, wall_now(), 0, "preempted (Slurm: PREEMPTED); not requeued: --shardnet-requeue=off");
    if (state == "PREEMPTED") {
        for (const auto &[key, w] : workers_.of_run(end.run, true))
            if (w.attempt == end.attempt && is_batch_worker(key)) {
                ev["preempted"] = true;
                Fault fault{end.run, key, end.attempt, "preempted", w, FaultKind::ended_by_slurm};
                return hooks_.raise_fault(fault, "preempted: Slurm ended job " + std::to_string(end.job) + " (PREEMPTED" +
                                          (reason.empty() || reason == "None" ? "" : ", " + reason) + "); no node is to blame", ev,
                                          wall_now());
            }
    }
    if (state.rfind("CANCELLED", 0) == 0) return slurm_cancelled(end, json::serialize(ev), wall_now());
    std::string words = failed_words(state);
    if (state == "TIMEOUT" && timeout_requeued(end, ev, words)) return;
    end_failed(end, f, unreported, wall_now(), 0, words);
}

void Verdicts::ended_at_limit(const Fault &fault, const std::string &job_state, const json::object &ev) {
    BatchEnd end;
    end.run = fault.run;
    end.attempt = fault.attempt;
    end.node = fault.node.substr(0, fault.node.find('/'));
    end.cluster = fault.state.cluster;
    end.job = fault.state.job;
    std::string words = failed_words(job_state) + " (the batch script's end was not reported)";
    if (job_state == "TIMEOUT" && timeout_requeued(end, ev, words)) return;
    end_failed(end, nullptr, "", wall_now(), 0, words);
}

bool Verdicts::timeout_requeued(const BatchEnd &end, json::object ev, std::string &words) {
    std::string no;
    const std::string sealed = sealed_after_prelimit(end, no);
    if (sealed.empty()) {
        if (!no.empty()) words += "; not requeued: " + no;
        return false;
    }
    for (const auto &[key, w] : workers_.of_run(end.run, true))
        if (w.attempt == end.attempt && is_batch_worker(key)) {
            ev["on_timeout"] = "requeue";
            ev["sealed_after_prelimit"] = sealed;
            Fault fault{end.run, key, end.attempt, "time limit", w, FaultKind::ended_by_slurm};
            hooks_.raise_fault(fault, "time limit: Slurm ended job " + std::to_string(end.job) + " (TIMEOUT) after checkpoint " + sealed +
                               " was sealed past the pre-limit signal; --shardnet-on-timeout=requeue goes on from it", ev, wall_now());
            return true;
        }
    return false;
}

void Verdicts::note_prelimit(std::string_view run, long long attempt, double now) {
    const std::string id(run);
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || it->second.prelimit_attempt >= attempt) return;   // known (every later heartbeat says it too)
    }
    auto runs = runs_.write();
    auto it = runs.find(id);
    if (it == runs.end() || it->second.prelimit_attempt >= attempt || it->second.attempt != attempt) return;
    it->second.prelimit_attempt = attempt;
    it->second.prelimit_at = now;
}

std::string Verdicts::sealed_after_prelimit(const BatchEnd &end, std::string &no) {
    auto spec = store_wait([&] { return store_->attempts().get_job_spec(end.run, end.attempt); });
    json::error_code ec;
    json::value sv = spec ? json::parse(spec->spec, ec) : json::value();
    const json::object *so = !ec ? sv.if_object() : nullptr;
    const json::value *on = so ? so->if_contains("on_timeout") : nullptr;
    if (!on || !on->is_string() || on->as_string() != "requeue") return "";   // the job did not ask: FAILED, as ever
    double signalled = 0;
    std::string policy;
    {
        auto runs = runs_.read();
        if (auto it = runs.find(end.run); it != runs.end()) {
            policy = it->second.requeue;
            if (it->second.prelimit_attempt == end.attempt) signalled = it->second.prelimit_at;
        }
    }
    if (policy == "off") {
        no = "--shardnet-on-timeout=requeue, but --shardnet-requeue=off";
        return "";
    }
    // The site's bound: a job that asks for it is not requeued at its limit forever.
    if (cfg_.timeout_max_attempts == 0 || end.attempt >= cfg_.timeout_max_attempts) {
        no = cfg_.timeout_max_attempts == 0 ? "this site requeues no job at its time limit (requeue.timeout_max_attempts 0)"
                                             : "attempt " + std::to_string(end.attempt) + " is the last a time limit may requeue to here "
                                               "(requeue.timeout_max_attempts " + std::to_string(cfg_.timeout_max_attempts) + ")";
        return "";
    }
    if (signalled <= 0) {
        no = "--shardnet-on-timeout=requeue, but no pre-limit signal was reported (the site's plugstack prelimit=SIG@SECONDS)";
        return "";
    }
    const auto cps = store_wait([&] { return store_->seals().list_checkpoints(end.run); });
    for (auto it = cps.rbegin(); it != cps.rend(); ++it)
        if (it->attempt == end.attempt && it->sealed_at >= signalled) return it->name;
    no = "--shardnet-on-timeout=requeue, but attempt " + std::to_string(end.attempt) + " sealed no checkpoint after its pre-limit signal";
    return "";
}

void Verdicts::slurm_requeued(const BatchEnd &end, const std::string &cause, const std::string &evidence, double now) {
    {
        auto runs = runs_.write();
        auto it = runs.find(end.run);
        if (it == runs.end() || it->second.attempt != end.attempt || it->second.state != RunState::running) return;
        // The attempt starts again: its earlier ranks' failures are not its next end's.
        it->second.first_failure = {};
        it->second.failed_nodes.clear();
        ++it->second.slurm_requeues;
        it->second.slurm_requeued = end.attempt;
        // The job starts over: its pre-limit signal is yet to come.
        it->second.prelimit_attempt = 0;
        it->second.prelimit_at = 0;
    }
    count(c_slurm_requeues);
    // Slurm starts the job again, maybe on other nodes: the old allocation's
    // watches go, and the batch step's first heartbeat then keeps the job's
    // spec and watches its allocation anew (capture_spec: RESUMED).
    for (const auto &[key, w] : workers_.of_run(end.run, true))
        if (w.attempt == end.attempt && w.watch_only) workers_.unwatch(end.run, key, end.attempt);
    attempts_.release_spec(end.run, end.attempt);
    on_store([this, end, cause, evidence, now] {
        try {
            transact([&] { event(end.run, "REQUEUED", cause, evidence, now); });
        } catch (const std::exception &e) {
            log_warn("Slurm's requeue not written as an event", end.run, e.what());   // the run's state is unchanged
        }
    });
}

void Verdicts::slurm_cancelled(const BatchEnd &end, const std::string &evidence, double now) {
    {
        auto runs = runs_.read();
        auto it = runs.find(end.run);
        if (it == runs.end() || it->second.attempt != end.attempt || it->second.state != RunState::running) return;
    }
    on_store([this, end, evidence, now] {
        std::optional<RunInfo> before;
        {
            auto runs = runs_.write();
            auto it = runs.find(end.run);
            if (it == runs.end() || it->second.attempt != end.attempt || it->second.state != RunState::running) return;
            before = it->second;
            if (!runs.set_state(end.run, it->second, RunState::cancelled)) return;
        }
        try {
            transact([&] {
                receipts_.write_receipt(receipt::Kind::attempt_ended, end.run, end.attempt,
                              json::object{{"how", "cancelled"}, {"by", "slurm"}, {"job", end.job}}, {}, now);
                hooks_.store_state(end.run, RunState::cancelled, end.attempt, now);
                event(end.run, "CANCELLED", "job " + std::to_string(end.job) + " cancelled in Slurm (scancel) on " + end.cluster, evidence, now);
            });
        } catch (const std::exception &e) {
            runs_.undo(end.run, before);
            log_warn("CANCELLED not written", end.run, e.what());
        }
    });
}

void Verdicts::resumed_after_slurm_requeue(const std::string &run, long long attempt, const std::string &cluster, long long job,
                                           const std::string &nodelist) {
    long long restarts = 0;
    {
        auto runs = runs_.write();
        auto it = runs.find(run);
        if (it == runs.end() || it->second.slurm_requeued != attempt) return;
        it->second.slurm_requeued = 0;
        restarts = it->second.slurm_requeues;
    }
    const double now = wall_now();
    json::object ev{{"attempt", attempt}, {"job", job}, {"cluster", cluster}, {"nodes", nodelist}, {"slurm_requeues", restarts}};
    on_store([this, run, attempt, job, nodelist, ev = json::serialize(ev), now] {
        try {
            transact([&] {
                event(run, "RESUMED", "Slurm started job " + std::to_string(job) + " again after its own requeue, on " + nodelist +
                      "; attempt " + std::to_string(attempt) + " goes on", ev, now);
            });
        } catch (const std::exception &e) {
            log_warn("RESUMED not written as an event", run, e.what());
        }
    });
}

void Verdicts::end_from_slurm(const Fault &fault, const std::string &job_state, double now) {
    std::optional<RunState> to;
    if (job_state == "COMPLETED") to = RunState::succeeded;
    else if (job_state.rfind("CANCELLED", 0) == 0) to = RunState::cancelled;
    if (!to) return;
    {
        auto runs = runs_.read();
        auto it = runs.find(fault.run);
        // Only a running run of that attempt: while a failure is handled,
        // cancelling the old job is part of it.
        if (it == runs.end() || it->second.attempt != fault.attempt || it->second.state != RunState::running ||
            !transition_allowed(it->second.state, *to))
            return;
    }
    const std::string cause = "Slurm job " + std::to_string(fault.state.job) + " " + job_state + " on " + fault.state.cluster +
                              " (the batch script's end was not reported: the broker was away)";
    const std::string evidence = json::serialize(json::object{{"attempt", fault.attempt}, {"job", fault.state.job},
                                                              {"slurm_job_state", job_state}, {"last_seen", fault.state.last_seen}});
    on_store([this, fault, to = *to, cause, evidence, now, job_state] {
        try {
            transact([&] {
                receipts_.write_receipt(receipt::Kind::attempt_ended, fault.run, fault.attempt,
                              json::object{{"how", "exited"}, {"slurm_job_state", job_state}, {"job", fault.state.job}}, {}, now);
                hooks_.store_state(fault.run, to, fault.attempt, now);
                event(fault.run, state_name(to), cause, evidence, now);
            });
        } catch (const std::exception &e) {
            log_warn("run end not written: the store refused it", fault.run, e.what());
            return;
        }
        auto runs = runs_.write();
        if (auto it = runs.find(fault.run); it != runs.end() && it->second.attempt == fault.attempt) runs.set_state(fault.run, it->second, to);
    });
}

}  // namespace shardnet::broker
