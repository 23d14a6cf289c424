// The hot path: one agent's heartbeat. Who reports for which job (the
// token's claim, checked in trust/refusals.cpp), the run's first sight, a new
// attempt, the batch script's end; a durable change is acknowledged after
// its store write, and undone in memory when that write fails.
//
// One heartbeat is one Service::Beat, taken step by step: read (the body
// and the token's claim), admit (a new worker against Slurm), see_run (the
// run table), after_beat (the worker table, the job's spec), rank_failed and
// batch_ended (what a failure or an end asks for), settle (the run's final
// state), write (the durable record), judge (a verdict, after the record).
#include "broker/service.hpp"

#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <openssl/rand.h>

#include "broker/api/heartbeat_body.hpp"
#include "broker/detector/stderr_tail.hpp"
#include "common/job_options.hpp"
#include "common/parse_util.hpp"
#include "broker/core/api_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;
using namespace std::literals;

struct Service::Beat {
    Service &s;
    const ApiRequest &req;
    const TokenEntry &who;
    const Reply &reply;
    const double now;
    const bool looked_up;   // Slurm was just asked about the job (admission)
    Beat(Service &svc, const ApiRequest &rq, const TokenEntry &w, const Reply &rp, double t, bool asked)
        : s(svc), req(rq), who(w), reply(rp), now(t), looked_up(asked) {}

    HeartbeatBody hb;
    // Views into the body: nothing is copied on the path of a known worker.
    std::string_view run, node, jobstep, requeue_policy, cluster;
    long long attempt = 0, job = 0;
    bool ended = false, batch = false;
    ConnCache *cc = nullptr;
    char worker_buf[kMaxWorkerKey];   // node and step are at most 128 and 32 bytes (checked in read)
    std::string_view worker;
    std::unique_lock<std::mutex> admitting;

    // What the run table said (see_run).
    bool create = false, new_attempt = false, started = false, check_recovery = false, claimed = false, recorded = false;
    std::optional<RunInfo> before;   // what a failed store write puts back
    std::string run_key;             // the run as a std::string, made only where a map or the store needs it
    Store::AttemptRow attempt_row;
    std::string owner_name;
    unsigned long long gen = 0;
    // The checkpoint policy the agent lacks, when the run has a newer one
    // (the heartbeat's answer carries it: 200 instead of 204).
    std::shared_ptr<const std::string> policy_answer;

    // A failure's or an end's verdict to reach (after this heartbeat's record).
    std::optional<BatchEnd> judged;
    std::optional<RunInfo::RankFailure> fatal_rank;
    std::optional<RunState> final_state;
    std::string final_cause;
    std::string final_tail;   // the batch script's stderr tail, for a FAILED written here

    std::optional<ApiResponse> read();
    bool admit();
    std::optional<ApiResponse> see_run();
    void after_beat();
    void rank_failed();
    void batch_ended();
    void settle();
    bool durable() const { return create || new_attempt || started || claimed || recorded || final_state; }
    ApiResponse answer() const { return policy_answer ? ApiResponse{200, *policy_answer} : no_content(); }
    void write();
    void judge();
};

// The body and the token's claim: a refusal, or nothing.
std::optional<ApiResponse> Service::Beat::read() {
    BodyError bad;
    if (!read_heartbeat(req.body, hb, bad)) return error_response(400, bad.code, bad.message, bad.field);
    run = hb.run, node = hb.node, jobstep = hb.step, requeue_policy = hb.requeue;
    attempt = hb.attempt;
    if (!is_safe_name(run)) return error_response(400, "bad_field", "run: not a valid run id", "run");
    // Control characters in any kept string were refused by read_heartbeat.
    // A Slurm node's name: never a host list or anything Slurm's commands
    // would read as more than one node (it reaches scontrol as nodename=).
    if (!is_safe_name(node, 128)) return error_response(400, "bad_field", "node: 1-128 of [A-Za-z0-9._-] (a Slurm node's name)", "node");
    if (jobstep.size() > 32) return error_response(400, "bad_field", "step: not a Slurm step id", "step");
    if (requeue_policy != "federated"sv && requeue_policy != "local"sv && requeue_policy != "off"sv)
        return error_response(400, "bad_field", "requeue: expected federated, local or off", "requeue");
    if (!hb.ckpt_every.empty() && hb.ckpt_every != "auto"sv && !parse_int(hb.ckpt_every, 1, 0x7fffffffLL))
        return error_response(400, "bad_field", "ckpt_every: expected auto or a number of steps", "ckpt_every");
    ended = hb.state == "ended"sv, batch = jobstep == "batch"sv;
    if (!ended && hb.state != "running"sv) return error_response(400, "bad_field", "state: expected running or ended", "state");
    if (!who.run.empty() && who.run != run) return error_response(403, "forbidden", "this token may not report for run " + std::string(run));
    if (who.attempt && who.attempt != (unsigned long long)attempt)
        return error_response(403, "forbidden", "this token is for attempt " + std::to_string(who.attempt), "attempt");
    // Which job reports: a derived token's own (slurmstepd took it from
    // Slurm); only an admin's word is taken from the body.
    if (who.bound) {
        if ((!hb.cluster.empty() && hb.cluster != who.cluster) || (hb.job > 0 && (unsigned long long)hb.job != who.job))
            return error_response(403, "forbidden", "this token is for job " + who.cluster + "/" + std::to_string(who.job), "job");
    } else if (who.scope != Scope::admin) {
        return error_response(403, "forbidden", "heartbeats need a per-job worker token (derived from a worker key: "
                              "plugstack worker_key_file=) or an admin token; a shared worker token cannot be tied to a job");
    }
    cluster = who.bound ? std::string_view(who.cluster) : hb.cluster;
    job = who.bound ? (long long)who.job : hb.job;
    cc = req.conn_cache;
    worker = worker_key(worker_buf, node, jobstep);
    return std::nullopt;
}

// A job's word on its node is Slurm's to confirm, once per worker
// (service_admission.cpp); a worker this connection reported as before,
// or one the table knows, was admitted then. An admin's word is taken; a
// job's of a cluster this broker does not run is held to its token's step
// (no Slurm to ask). A heartbeat the run
// refuses anyway (not this job's, or a fenced attempt, whose job is then
// cancelled) is answered as before, in see_run. False: answered already.
bool Service::Beat::admit() {
    if (who.bound && !(cc && cc->run_attempt == attempt && cc->worker == worker && cc->run == run) &&
        !s.workers_.known(run, worker, attempt, who.cluster, (long long)who.job) &&
        s.run_takes(run, who, attempt))
        return s.admit_worker(req, who, reply, now, run, node, worker, attempt, ended, looked_up, admitting) == Admission::admitted;
    return true;
}

// The run table: a new run, a started or newer attempt, the run's owner
// and job. A refusal (not this job's, a fenced attempt), or nothing.
std::optional<ApiResponse> Service::Beat::see_run() {
    gen = s.runs_.generation();
    if (cc && cc->run_generation == gen && cc->run == run && cc->run_attempt == attempt && (!hb.policy || *hb.policy == cc->run_policy))
        return std::nullopt;   // same token, run and attempt as this connection's last heartbeat, and no run changed since
    run_key.assign(run);
    auto runs = s.runs_.write();
    auto it = runs.find(run_key);
    RunInfo *info = it == runs.end() ? nullptr : &it->second;
    if (who.bound)
        if (std::string why = s.refuse_worker(info, run_key, who, attempt); !why.empty()) {
            runs.unlock();
            s.count(c_refused);
            return error_response(403, "not_this_job", why, "attempt");
        }
    if (info && info->attempt > attempt) {
        const long long current = info->attempt;
        // Only a job this broker recorded for that attempt is cancelled.
        // (Not when Slurm requeued that same job: it runs the current attempt.)
        auto rec = info->jobs.find(attempt), now_rec = info->jobs.find(current);
        const bool ours = rec != info->jobs.end() && rec->second.cluster == cluster && rec->second.job == job &&
                          !(now_rec != info->jobs.end() && now_rec->second.cluster == cluster && now_rec->second.job == job);
        runs.unlock();
        if (ours || who.scope == Scope::admin) s.stale_jobs_.cancel_stale(std::string(cluster), job);
        return error_response(409, "stale_attempt", "run " + run_key + " is at attempt " + std::to_string(current) +
                              "; attempt " + std::to_string(attempt) + " is fenced", "attempt");
    }
    if (info) before = *info;
    if (!info) {
        // A job's first heartbeat makes its run: its user's runs not ended
        // are held to limits.runs_per_user as POST /v1/runs holds them.
        if (who.bound) {
            owner_name = user_name((long long)who.uid);
            if (auto r = too_many_runs(owner_name, runs.open_of(owner_name), s.cfg_.runs_per_user)) {
                runs.unlock();
                return r;
            }
        }
        create = true;
        info = &runs[run_key];
        *info = RunInfo{"", RunState::running, attempt, 0, std::string(requeue_policy), 0};
    } else if (info->state == RunState::pending && info->attempt == attempt) {  // created by its owner, now running
        started = runs.set_state(run_key, *info, RunState::running);
        if (started) info->requeue = std::string(requeue_policy);
    } else if (info->attempt < attempt) {
        // The newer attempt fences the older ones whatever the state; a
        // final run stays final.
        new_attempt = true;
        info->attempt = attempt;
        if (info->state != RunState::recovering && !is_final(info->state)) runs.set_state(run_key, *info, RunState::running);
    }
    if (who.bound) {
        if (info->owner_uid < 0) {   // the first job of a run claims it
            claimed = true;
            info->owner_uid = (long long)who.uid;
            if (owner_name.empty()) owner_name = user_name((long long)who.uid);
            info->owner = owner_name;
        }
        auto &rec = info->jobs[attempt];
        if (rec.job == 0 || rec.world < (long long)who.world) {
            recorded = true;
            rec = AttemptJob{who.cluster, (long long)who.job, std::max(rec.world, (long long)who.world)};
            attempt_row = Store::AttemptRow{run_key, attempt, rec.cluster, rec.job, rec.world};
        }
    }
    if (!hb.ckpt_every.empty() && info->ckpt_every != hb.ckpt_every) info->ckpt_every.assign(hb.ckpt_every);
    if (hb.policy) {
        info->ckpt_auto = true;
        if (info->policy_version > 0 && info->policy_version != *hb.policy) policy_answer = info->policy_answer;
    }
    const bool recovering = info->state == RunState::recovering;
    if (create || started || new_attempt || claimed || recorded) runs.bump();
    runs.unlock();
    // While a run recovers every heartbeat is looked at; after, the cache
    // (not while the agent is to get a new policy).
    if (cc && !create && !new_attempt && !recovering && !policy_answer) {
        cc->run = run; cc->run_attempt = attempt; cc->run_generation = gen; cc->run_policy = hb.policy.value_or(0);
    }
    check_recovery = recovering;
    return std::nullopt;
}

// The worker table, and the job's spec at its batch step's first report.
void Service::Beat::after_beat() {
    const bool new_worker = s.workers_.beat(run, worker, attempt, int(hb.interval), int(hb.ranks), hb.top_step, ended,
                                            now, cluster, job, hb.checkpointing);
    if (admitting.owns_lock()) admitting.unlock();
    if (cc && who.bound && cc->worker != worker) cc->worker.assign(worker);
    // Past the known worker's path, the run's name as a key of the maps.
    if (run_key.empty() && (new_worker || batch || ended)) run_key.assign(run);
    if (hb.prelimit_signalled) s.verdicts_.note_prelimit(run, attempt, now);
    // A step's first worker on a node: that node of the allocation is now
    // watched through its worker.
    if (new_worker && !jobstep.empty() && !batch) s.workers_.unwatch(run_key, std::string(node) + "/alloc", attempt);
    if (!batch || job <= 0 || ended || !s.cfg_.clusters.count(std::string(cluster))) return;
    if (!s.attempts_.claim_spec(run_key, attempt)) return;
    std::vector<int> fatal;   // the job's --shardnet-fatal-exit, kept with its spec for the next attempt
    for (int c = 1; c <= 255; ++c)
        if (hb.fatal_exit.test(std::size_t(c))) fatal.push_back(c);
    s.attempts_.capture_spec(run_key, attempt, std::string(cluster), job, std::string(hb.ckpt_dir), int(hb.interval),
                             JobSays{std::string(hb.ckpt_every), hb.max_attempts, fatal_exit_text(fatal), hb.requeue_timeout, hb.spares,
                                     hb.replace_stragglers});
}

// A step's rank that failed: the first one is who a FAILED run names, and a
// peer's dead node is looked for at once (a survivor's collective fails
// within a second of the death). A rank whose exit code the job named in
// --shardnet-fatal-exit ends the run instead, at once.
void Service::Beat::rank_failed() {
    if (batch || !hb.first_failure || job <= 0) return;
    const std::string r(run);
    const bool news = s.verdicts_.note_rank_failure(r, attempt, std::string(node), *hb.first_failure);
    // An agent repeats its ranks' ends in each report: acted on while the run is still RUNNING.
    auto running = [&] {
        auto runs = s.runs_.read();
        auto it = runs.find(r);
        return it != runs.end() && it->second.attempt == attempt && it->second.state == RunState::running;
    };
    if (const auto &f = hb.fatal_failure; f && running()) {
        fatal_rank = RunInfo::RankFailure{attempt, f->rank, std::string(node), f->code, f->signal, f->time};
        judged = BatchEnd{r, attempt, std::string(node), std::string(cluster), job, f->code, f->signal, "rank " + std::to_string(f->rank), true, ""};
    } else if (news) {
        const auto &ff = *hb.first_failure;
        post_guarded(s.slurm_thread_, "a rank failed: is a node of its job dead?",
                     [svc = &s, end = BatchEnd{r, attempt, std::string(node), std::string(cluster), job, ff.code, ff.signal,
                                               "rank " + std::to_string(ff.rank), false, ""}] { svc->verdicts_.judge_batch_end(end, -1); });
    }
}

// The batch script's end is the job's end. Exit 0: the run succeeded.
// Anything else is classified first (detector/verdict.cpp): a node that
// died under the job is a FAULT, not the survivors' exit code.
void Service::Beat::batch_ended() {
    if (!ended || !batch) return;
    if (hb.exit_code && *hb.exit_code == 0) {
        final_state = RunState::succeeded, final_cause = "batch script exited 0 on " + std::string(node);
        return;
    }
    if (!hb.exit_code && !hb.exit_signal) return;
    bool off_and_faulted = false;
    {
        auto runs = s.runs_.read();
        auto it = runs.find(run_key);
        off_and_faulted = it != runs.end() && it->second.state == RunState::degraded && it->second.requeue == "off";
    }
    // A FAULT already said why, and nothing will be requeued: the run ends here.
    if (off_and_faulted) {
        final_state = RunState::failed;
        final_cause = "batch script " + (hb.exit_code ? "exited " + std::to_string(*hb.exit_code) : "killed by signal " + std::to_string(*hb.exit_signal)) +
                      " on " + std::string(node) + " after a FAULT (requeue is off)";
        final_tail.assign(hb.stderr_tail);
        return;
    }
    // An exit code the job named in --shardnet-fatal-exit is the verdict itself.
    const bool fatal = hb.exit_code && *hb.exit_code >= 1 && *hb.exit_code <= 255 && hb.fatal_exit.test(std::size_t(*hb.exit_code));
    judged = BatchEnd{run_key, attempt, std::string(node), std::string(cluster), job, hb.exit_code, hb.exit_signal, "the batch script", fatal,
                      std::string(hb.stderr_tail)};
}

// The run's final state in memory, unless a failure is being handled:
// cancelling the old attempt's job is part of its recovery.
void Service::Beat::settle() {
    if (!final_state) return;
    auto runs = s.runs_.write();
    auto it = runs.find(run_key);
    const bool handling = it != runs.end() && (it->second.state == RunState::recovering ||
                          (it->second.state == RunState::degraded && it->second.requeue != "off"));
    if (it == runs.end() || handling || it->second.attempt != attempt) return final_state.reset();
    if (!before) before = it->second;
    if (!runs.set_state(run_key, it->second, *final_state)) final_state.reset();
}

// A run first seen, a new attempt, its owner or its job is a durable record:
// acknowledged after it is written, undone in memory when the write fails.
void Service::Beat::write() {
    if (new_attempt) s.workers_.fence(run_key, attempt);
    const long long owner_uid = claimed ? (long long)who.uid : -1;
    RunState state_now = RunState::running;
    {
        auto runs = s.runs_.read();
        if (auto it = runs.find(run_key); it != runs.end()) state_now = it->second.state;
    }
    // The attempt's receipt names its job: the token's, or an admin's word
    // for a run or attempt it starts.
    const bool job_known = recorded || ((create || new_attempt || started) && job > 0 && !cluster.empty());
    s.on_store(reply, [svc = &s, run_key = run_key, attempt = attempt, policy = std::string(requeue_policy), create = create,
                       new_attempt = new_attempt, started = started, claimed = claimed, recorded = recorded, owner_uid,
                       owner_name = owner_name, attempt_row = attempt_row, final_state = final_state, final_cause = final_cause,
                       state_now, before = before, now = now, answer = answer(), job_known, cluster = std::string(cluster), job = job,
                       node = std::string(node), exit_code = hb.exit_code, exit_signal = hb.exit_signal,
                       final_tail = final_tail](const Reply &reply) {
        Service &s = *svc;
        try {
            s.transact([&] {
                if (create) {
                    s.store_->insert_run(RunRow{run_key, owner_name, "RUNNING", "{}", attempt, 0, now, now, owner_uid, 0, 0, policy});
                    s.event(run_key, "RUNNING", "first heartbeat", json::serialize(json::object{{"attempt", attempt}}), now);
                } else if (claimed) {
                    s.store_->set_run_owner(run_key, owner_name, owner_uid);
                }
                if (recorded) s.store_->attempts().upsert_attempt(attempt_row);
                if (started) {
                    s.store_state(run_key, RunState::running, attempt, now);
                    s.store_->set_requeue(run_key, policy);
                    s.event(run_key, "RUNNING", "first heartbeat", json::serialize(json::object{{"attempt", attempt}}), now);
                } else if (new_attempt) {
                    s.store_state(run_key, final_state ? RunState::running : state_now, attempt, now);
                    s.event(run_key, "ATTEMPT", "attempt " + std::to_string(attempt) + " heartbeats; older attempts fenced",
                            json::serialize(json::object{{"attempt", attempt}}), now);
                }
                if (job_known) s.receipts_.note_attempt_start(run_key, attempt, cluster, job, {}, {}, {}, now, false);
                if (final_state) {
                    json::object how{{"how", "exited"}, {"node", node}};
                    if (exit_code) how["exit_codes"] = json::array{*exit_code};
                    if (exit_signal) how["signal"] = *exit_signal;
                    s.receipts_.write_receipt(receipt::Kind::attempt_ended, run_key, attempt, std::move(how), {}, now);
                    s.store_state(run_key, *final_state, attempt, now);
                    std::string cause = final_cause;
                    json::object ev{{"attempt", attempt}};
                    add_stderr_tail(cause, ev, final_tail);
                    s.event(run_key, state_name(*final_state), cause, json::serialize(ev), now);
                }
            });
            reply(answer);
        } catch (const std::exception &e) {
            // Memory goes back to what the database still says.
            s.runs_.undo(run_key, create ? std::nullopt : before);
            log_warn("heartbeat not written: the store refused it", run_key, e.what());
            reply(store_error_response(e));
        }
    });
}

// After this heartbeat's own store write is queued: a verdict is written after the run it ends.
void Service::Beat::judge() {
    if (!judged) return;
    if (judged->fatal) return s.verdicts_.end_failed(*judged, fatal_rank ? &*fatal_rank : nullptr, "", now);
    post_guarded(s.slurm_thread_, "classify a batch script's end",
                 [svc = &s, end = std::move(*judged)] { svc->verdicts_.judge_batch_end(end); });
}

void Service::heartbeats(const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now, bool looked_up) {
    Beat b(*this, req, who, reply, now, looked_up);
    if (auto refused = b.read()) return reply(std::move(*refused));
    if (!b.admit()) return;
    count(c_heartbeats);
    if (auto refused = b.see_run()) return reply(std::move(*refused));
    b.after_beat();
    b.rank_failed();
    b.batch_ended();
    b.settle();
    // After the new attempt's own record, so that ATTEMPT precedes RECOVERED.
    const bool recovery = b.check_recovery && !b.batch;
    if (!b.durable()) {
        if (recovery) requeues_.check_recovered(b.run_key, b.attempt, now);
        b.judge();
        return reply(b.answer());
    }
    b.write();
    b.judge();
    if (recovery) requeues_.check_recovered(b.run_key, b.attempt, now);
}

}  // namespace shardnet::broker
