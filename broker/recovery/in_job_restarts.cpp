// POST /v1/runs/RUN/restarts: `shard launch` reports in-job restarts
// (in_job_restarts.hpp), and a supervised attempt's FAULT holds its requeue
// for a while. The supervisor runs in the batch step, which holds the run's
// reader token: this is the one route a reader token may POST to (routes.cpp),
// under the same rules as a commit (its run, its recorded and current
// attempt), and the nodes it names are checked against Slurm's list of the
// job's nodes and the FAULT the broker raised.
#include <boost/json.hpp>

#include "broker/core/api_util.hpp"
#include "broker/recovery/restarts_module.hpp"
#include "common/json_fields.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {

std::string read_nodes(const json::object &o, const char *k, std::vector<std::string> &out) {
    const json::value *v = o.if_contains(k);
    if (!v) return "";
    if (!v->is_array() || v->as_array().size() > InJobRestarts::kMaxNodes)
        return std::string(k) + ": expected a list of at most " + std::to_string(InJobRestarts::kMaxNodes) + " node names";
    // Each node once: with every name one of the job's (checked against
    // Slurm), a list is no longer than the job, and its events no larger.
    std::set<std::string> seen;
    for (const auto &n : v->as_array()) {
        if (!n.is_string() || !is_safe_name(std::string(n.as_string()), 128))
            return std::string(k) + ": a node name is 1-128 of [A-Za-z0-9._-]";
        if (!seen.insert(std::string(n.as_string())).second) return std::string(k) + ": node " + std::string(n.as_string()) + " named twice";
        out.emplace_back(n.as_string());
    }
    return "";
}

std::string node_of_worker(const std::string &key) { return key.substr(0, key.find('/')); }

json::array names(const std::vector<std::string> &v) { return json::array(v.begin(), v.end()); }

}  // namespace

std::string read_restart_report(const std::string &body, RestartReport &out) {
    out = RestartReport{};
    json::error_code ec;
    json::value v = json::parse(body, ec);
    if (ec || !v.is_object()) return "body is not a JSON object";
    const json::object &o = v.as_object();
    if (JsonFields top(o, ""); !top.only({"kind", "attempt", "restart", "spares", "nodes", "dead", "took", "slow", "reason", "relaunch_seconds", "ended_step"}))
        return top.error();
    detail::Fields f{o, {}, {}};
    if (!f.str("kind", out.kind) || !f.integer("attempt", 1, 1000000, out.attempt) || !f.integer("restart", 0, 1000000, out.restart, false) ||
        !f.integer("spares", 0, 64, out.spares, false) || !f.str("reason", out.reason, false) ||
        !f.str("ended_step", out.ended_step, false))
        return f.err;
    if (!out.ended_step.empty() && (out.ended_step.size() > 10 || out.ended_step.find_first_not_of("0123456789") != std::string::npos))
        return "ended_step: a Slurm step id (1-10 digits)";
    if (out.kind != "supervising" && out.kind != "restarted" && out.kind != "swapped" && out.kind != "gave_up")
        return "kind: expected supervising, restarted, swapped or gave_up";
    if (out.reason.size() > 200 || has_control_chars(out.reason)) return "reason: at most 200 bytes, no control characters";
    for (const char *k : {"nodes", "dead", "took", "slow"}) {
        const std::string key = k;
        auto &list = key == "nodes" ? out.nodes : key == "dead" ? out.dead : key == "took" ? out.took : out.slow;
        if (auto why = read_nodes(o, k, list); !why.empty()) return why;
    }
    if (const json::value *r = o.if_contains("relaunch_seconds")) {
        if (!r->is_number() || r->to_number<double>() < 0 || r->to_number<double>() > 86400) return "relaunch_seconds: expected 0..86400";
        out.relaunch_seconds = r->to_number<double>();
    }
    if (out.kind == "restarted" && (out.dead.empty() || out.took.empty() || out.nodes.empty() || out.restart < 1))
        return "a restart names its dead and new nodes, the step's nodes and its restart number (1 or more)";
    if (out.kind == "swapped" && (out.slow.size() != 1 || out.took.size() != 1 || out.nodes.empty() || out.restart < 1 || !out.dead.empty()))
        return "a swap names its one slow node (slow), the one that took its place, the step's nodes and its restart number (1 or more)";
    return "";
}

bool InJobRestarts::admit(const std::string &run, double now) {
    // Runs that sent nothing for a minute are forgotten (bounded by the runs that post).
    for (auto it = reports.begin(); it != reports.end();)
        if (it->second.empty() || it->second.back() < now - 60) it = reports.erase(it);
        else ++it;
    auto &times = reports[run];
    std::erase_if(times, [&](double t) { return t < now - 60; });
    if (times.size() >= kReportsPerMinute) return false;
    times.push_back(now);
    return true;
}

void InJobRestarts::prune(double now, const std::function<bool(const std::string &, long long)> &live) {
    std::vector<std::pair<std::string, long long>> seen;
    {
        std::lock_guard<std::mutex> lock(mu);
        if (now - pruned_at < 60) return;
        pruned_at = now;
        for (const auto &[run, s] : by_run)
            if (!s.held) seen.emplace_back(run, s.attempt);
    }
    std::vector<std::pair<std::string, long long>> over;
    for (const auto &e : seen)
        if (!live(e.first, e.second)) over.push_back(e);
    std::lock_guard<std::mutex> lock(mu);
    for (const auto &[run, attempt] : over)
        if (auto it = by_run.find(run); it != by_run.end() && it->second.attempt == attempt && !it->second.held) by_run.erase(it);
}

void Restarts::prune(double now) {
    in_job_.prune(now, [this](const std::string &run, long long attempt) {
        return runs_.with_run(run, [&](const RunInfo *r) { return r && !is_final(r->state) && r->attempt == attempt; });
    });
}

void Restarts::restart_report(const std::string &id, const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now) {
    RestartReport rep;
    if (auto why = read_restart_report(req.body, rep); !why.empty()) return reply(error_response(400, "bad_field", why));
    long long world = 0;
    if (auto refused = refuse_attempt_writer(id, who, rep.attempt, world, "restart reports")) return reply(*refused);
    bool admitted;
    {
        std::lock_guard<std::mutex> lock(in_job_.mu);
        admitted = in_job_.admit(id, now);
    }
    if (!admitted) {
        ApiResponse r = error_response(429, "rate_limited", "run " + id + " sent " + std::to_string(InJobRestarts::kReportsPerMinute) +
                                       " restart reports in the last minute; a supervisor sends a few per restart");
        r.retry_after = 10;
        return reply(std::move(r));
    }
    auto apply = [this, id, rep, now](const Reply &reply) { apply_restart_report(id, rep, now, reply); };
    // The nodes a job names are its own only as Slurm lists them (a dead
    // one, in `dead` only, is checked against the broker's own FAULT
    // instead: Slurm drops it from the job once it is DOWN).
    if (!who.bound || !cfg_.clusters.count(who.cluster) || (rep.nodes.empty() && rep.took.empty())) return apply(reply);
    post_answering(slurm_thread_, "slurm", reply, [this, rep, cluster = who.cluster, job = (long long)who.job,
                                                   apply = std::move(apply)](const Reply &reply) {
        std::string why;
        const auto nodes = job_nodes(cluster, job, why);
        if (!nodes) return reply(error_response(503, "slurm_unavailable", "the job's nodes could not be read from Slurm (" + why + "); report again"));
        // Every node a report says runs the step, took a place or is slow
        // is one of the job's as Slurm lists it, whatever `dead` names: the
        // supervisor's dead nodes are never among them (a restart's dead
        // node is checked against the FAULT the broker holds instead).
        for (const auto *list : {&rep.nodes, &rep.took, &rep.slow})
            for (const auto &n : *list)
                if (!nodes->count(n))
                    return reply(error_response(403, "not_this_job", "node " + n + " is not one of job " + cluster + "/" + std::to_string(job) +
                                                "'s nodes", "nodes"));
        apply(reply);
    });
}

std::optional<ApiResponse> Restarts::refuse_swap(const std::string &id, const RestartReport &rep) {
    const std::string &slow = rep.slow.front(), &took = rep.took.front();
    {
        std::lock_guard<std::mutex> lock(in_job_.mu);
        auto it = in_job_.by_run.find(id);
        if (it != in_job_.by_run.end() && it->second.attempt == rep.attempt) {
            const auto &s = it->second;
            if (rep.restart <= s.restarts) return std::nullopt;   // sent again: answered as taken, below
            // The slow node runs ranks of the step; the one taking its place does not.
            const auto in_step = [&](const std::string &n) { return std::find(s.nodes.begin(), s.nodes.end(), n) != s.nodes.end(); };
            if (!s.nodes.empty() && (!in_step(slow) || in_step(took)))
                return error_response(409, "not_in_step", "a swap takes a node of the step (" + slow + ") out and a spare (" + took +
                                      ") in; the step's nodes are " + detail::join(s.nodes), "slow");
        }
    }
    // The broker's own word: a STRAGGLER event of the attempt naming the
    // node, each paying for one swap (in memory; after a restart, the store).
    if (hooks_.take_straggler(id, rep.attempt, slow) ||
        store_wait([&] { return store_->straggler_named(id, rep.attempt, slow); }))
        return std::nullopt;
    return error_response(409, "not_a_straggler", "no STRAGGLER event of attempt " + std::to_string(rep.attempt) + " of run " + id +
                          " names node " + slow, "slow");
}

void Restarts::apply_restart_report(const std::string &id, const RestartReport &rep, double now, const Reply &reply) {
    // A swap's evidence is checked before anything changes.
    if (rep.kind == "swapped")
        if (auto refused = refuse_swap(id, rep)) return reply(std::move(*refused));
    std::optional<Fault> held;
    double held_at = 0, fault_at = 0;   // the answered FAULT's hold start, and when it was raised
    bool hold_next = false, still_held = false;   // a FAULT is held after this report
    {
        std::lock_guard<std::mutex> lock(in_job_.mu);
        auto &s = in_job_.by_run[id];
        if (s.attempt > rep.attempt)   // an older attempt's supervisor: the newer one's hold stays
            return reply(error_response(409, "stale_attempt", "run " + id + " is supervised at attempt " + std::to_string(s.attempt) +
                                        "; a report for attempt " + std::to_string(rep.attempt) + " changes nothing", "attempt"));
        if (s.attempt != rep.attempt) {
            s = InJobRestarts::Supervised{};
            s.attempt = rep.attempt;
        }
        s.spares = rep.spares;
        if (rep.kind != "gave_up" && !rep.nodes.empty()) s.nodes = rep.nodes;
        const bool relaunched = rep.kind == "restarted" || rep.kind == "swapped";
        if (relaunched && rep.restart <= s.restarts)   // sent again (its answer lost): taken once
            return reply(ok_json(200, json::object{{"kind", "RESTARTED"}, {"already_reported", true}}));
        if (rep.kind == "restarted") {
            // A relaunch answers a FAULT the broker holds for it; the names
            // a job gives are not evidence of a death by themselves.
            if (!s.held)
                return reply(error_response(409, "no_fault_held", "no FAULT of attempt " + std::to_string(rep.attempt) + " of run " + id +
                                            " waits for a relaunch (none raised, or its hold passed and the run is being requeued)",
                                            "dead"));
            // A dead node must be one whose FAULT the broker holds (the held
            // one, or one raised during its hold).
            auto named = [&](const Fault &f) { return std::find(rep.dead.begin(), rep.dead.end(), node_of_worker(f.node)) != rep.dead.end(); };
            auto named_waiting = [&](const InJobRestarts::Supervised::Waiting &w) { return named(w.fault); };
            const bool held_named = named(*s.held);
            if (!held_named && std::none_of(s.also.begin(), s.also.end(), named_waiting))
                return reply(error_response(409, "not_the_fault", "the FAULT held for attempt " + std::to_string(rep.attempt) + " is node " +
                                            node_of_worker(s.held->node) + "'s, not " + rep.dead.front() + "'s", "dead"));
            // Each dead node is one whose FAULT the broker holds: no other
            // name reaches the RESTARTED event and its receipt.
            for (const auto &d : rep.dead)
                if (node_of_worker(s.held->node) != d &&
                    std::none_of(s.also.begin(), s.also.end(), [&](const auto &w) { return node_of_worker(w.fault.node) == d; }))
                    return reply(error_response(409, "not_the_fault", "node " + d + " has no FAULT held for attempt " +
                                                std::to_string(rep.attempt) + " of run " + id, "dead"));
            ++s.restarts;
            const auto first_also = std::find_if(s.also.begin(), s.also.end(), named_waiting);
            if (held_named) {
                held = s.held, held_at = s.held_at, fault_at = s.held_fault_at;
                s.held.reset();
            } else {
                // Answered, not held: the held one still waits.
                held = first_also->fault, held_at = now, fault_at = first_also->fault_at;
                still_held = true;
            }
            std::erase_if(s.also, named_waiting);
            if (held_named && !s.also.empty()) {   // the next death the relaunch did not answer: held from now
                s.held = s.also.front().fault, s.held_at = now, s.held_fault_at = s.also.front().fault_at;
                s.also.erase(s.also.begin());
                hold_next = true;
            }
        }
        if (rep.kind == "swapped") ++s.restarts;   // the STRAGGLER event it answers is checked in the store, below
        if (rep.kind == "gave_up") { held = s.held; held_at = s.held_at; fault_at = s.held_fault_at; s.held.reset(); }
        if (rep.kind == "gave_up") in_job_.by_run.erase(id);
    }
    if (hold_next) hold_timer(id, rep.attempt, now);
    json::object ev{{"attempt", rep.attempt}, {"spares", rep.spares}};
    std::string kind, cause;
    if (rep.kind == "supervising") {
        kind = "SUPERVISED";
        ev["nodes"] = names(rep.nodes);
        cause = "shard launch supervises attempt " + std::to_string(rep.attempt) + " with " + std::to_string(rep.spares) + " spare node(s)";
    } else if (rep.kind == "restarted") {
        kind = "RESTARTED";
        ev["restart"] = rep.restart, ev["dead"] = names(rep.dead), ev["took"] = names(rep.took), ev["nodes"] = names(rep.nodes);
        if (held) ev["fault_at"] = fault_at, ev["since_fault"] = now - fault_at;
        if (rep.relaunch_seconds >= 0) ev["relaunch_seconds"] = rep.relaunch_seconds;
        cause = "in-job restart " + std::to_string(rep.restart) + ": node " + rep.dead.front() + " left out, " + rep.took.front() +
                " took its place (the job's supervisor says so)";
    } else if (rep.kind == "swapped") {
        kind = "RESTARTED";
        ev["restart"] = rep.restart, ev["straggler"] = rep.slow.front(), ev["took"] = names(rep.took), ev["nodes"] = names(rep.nodes);
        if (rep.relaunch_seconds >= 0) ev["relaunch_seconds"] = rep.relaunch_seconds;
        cause = "in-job restart " + std::to_string(rep.restart) + ": straggler node " + rep.slow.front() + " swapped out at a sealed checkpoint, " +
                rep.took.front() + " took its place (the job's supervisor says so)";
    } else {
        kind = "RESTART_GAVE_UP";
        ev["reason"] = rep.reason;
        cause = "shard launch gave up: " + (rep.reason.empty() ? std::string("no reason given") : rep.reason);
    }
    const bool none_left = !hold_next && !still_held;
    on_store(reply, [this, id, rep, kind, cause, ev = std::move(ev), held, held_at, fault_at, now, none_left](const Reply &reply) {
        bool back = false;
        try {
            transact([&] {
                // Back to RUNNING once no death of the attempt waits for a relaunch.
                back = rep.kind == "restarted" && held && none_left && run_state_is(id, rep.attempt, RunState::degraded);
                if (back) hooks_.store_state(id, RunState::running, rep.attempt, now);
                event(id, kind, cause, json::serialize(ev), now);
                // A relaunch inside the job is signed with the attempt's
                // chain: which node left, which took its place, how long.
                if (kind == "RESTARTED") receipts_.write_receipt(receipt::Kind::attempt_restarted, id, rep.attempt, ev, {}, now);
            });
        } catch (const std::exception &e) {
            // Not written: the held FAULT waits again (its timer still
            // requeues it), and a supervisor that gave up gets its requeue.
            if (held && rep.kind == "gave_up") hooks_.requeue(*held, 0, false);
            else if (held) rehold(id, *held, held_at, fault_at);
            if (rep.kind == "restarted" || rep.kind == "swapped") uncount_restart(id, rep.attempt);   // not taken: the same report sent again counts
            return reply(store_error_response(e));
        }
        if (rep.kind == "restarted" || rep.kind == "swapped") relaunched(id, rep, back);
        reply(ok_json(200, json::object{{"kind", kind}, {"state_running", back}}));
        // Given up with a FAULT held: the requeue it waited for, now.
        if (rep.kind == "gave_up" && held) hooks_.requeue(*held, 0, false);
    });
}

void Restarts::relaunched(const std::string &id, const RestartReport &rep, bool back) {
    // A dead node's silence is the fault already handled, not a new one;
    // the ended step's workers are done (cancelled with it).
    for (const auto &[key, w] : workers_.of_run(id, true)) {
        if (w.attempt != rep.attempt) continue;
        const bool dead = std::find(rep.dead.begin(), rep.dead.end(), node_of_worker(key)) != rep.dead.end();
        const bool ended =
            !rep.ended_step.empty() && key.size() > rep.ended_step.size() + 1 && key.ends_with("/" + rep.ended_step) && !is_batch_worker(key);
        if (dead || ended) workers_.retire(id, key);
    }
    auto runs = runs_.write();
    if (auto it = runs.find(id); it != runs.end() && it->second.attempt == rep.attempt) {
        // The relaunched step starts over: the old step's ranks' failures
        // (killed with it) are not its end's.
        it->second.first_failure = {};
        it->second.failed_nodes.clear();
        if (back) runs.set_state(id, it->second, RunState::running);
    }
}

void Restarts::uncount_restart(const std::string &run, long long attempt) {
    std::lock_guard<std::mutex> lock(in_job_.mu);
    if (auto it = in_job_.by_run.find(run); it != in_job_.by_run.end() && it->second.attempt == attempt && it->second.restarts > 0)
        --it->second.restarts;
}

bool Restarts::is_spare(const std::string &run, long long attempt, const std::string &node) {
    std::lock_guard<std::mutex> lock(in_job_.mu);
    auto it = in_job_.by_run.find(run);
    if (it == in_job_.by_run.end() || it->second.attempt != attempt || it->second.nodes.empty()) return false;
    const auto &n = it->second.nodes;
    return std::find(n.begin(), n.end(), node) == n.end();
}

void Restarts::spare_lost(const Fault &fault, const std::string &node, const std::string &why, json::object ev) {
    // A spare runs no rank: its loss costs the job a spare, not its training.
    // No FAULT, no hold, no requeue; shard launch stops counting on it.
    workers_.retire(fault.run, fault.node);
    ev["spare"] = true;
    const double now = wall_now();
    const std::string slurm_state = ev.contains("slurm_node_state") && ev.at("slurm_node_state").is_string()
                                        ? std::string(ev.at("slurm_node_state").as_string()) : "";
    inventory_.seen_down(fault.state.cluster, node, now, fault.run, "spare node down: " + why, slurm_state);
    write_event(fault.run, "SPARE_LOST", "spare node " + node + " of job " + std::to_string(fault.state.job) + " down (" + why +
                "); no rank ran there: training goes on, one spare fewer", json::serialize(ev), now);
}

void Restarts::rehold(const std::string &run, const Fault &fault, double held_at, double fault_at) {
    std::lock_guard<std::mutex> lock(in_job_.mu);
    auto &s = in_job_.by_run[run];
    if (s.attempt != fault.attempt && s.attempt != 0) return;   // a newer attempt's: the old FAULT is moot
    s.attempt = fault.attempt;
    if (!s.held) s.held = fault, s.held_at = held_at, s.held_fault_at = fault_at;
    else if (node_of_worker(s.held->node) != node_of_worker(fault.node))
        s.also.insert(s.also.begin(), InJobRestarts::Supervised::Waiting{fault, fault_at});   // after the one held now
}

bool Restarts::run_state_is(const std::string &run, long long attempt, RunState state) {
    auto runs = runs_.read();
    auto it = runs.find(run);
    return it != runs.end() && it->second.attempt == attempt && it->second.state == state;
}

// What a run's events say of its attempt's supervision (read at start).
struct Supervision {
    bool supervised = false;   // a SUPERVISED event of the attempt, no RESTART_GAVE_UP after it
    long long spares = 0;
    std::vector<std::string> nodes;
    // The workers ("n1/0") whose FAULTs of the attempt no relaunch answered
    // yet, oldest first, with when each was raised: the first is held
    // again, the others wait after it.
    struct Death { std::string worker; double at; };
    std::vector<Death> waiting;
    bool acted = false;              // something else came of them (a placement, an end): no hold
};

Supervision supervision_of(Store &store, const std::string &run, long long attempt) {
    Supervision s;
    long long after = 0;
    for (;;) {
        auto page = store.list_events(run, after, 1000);
        for (const auto &e : page) {
            after = e.id;
            if (!s.waiting.empty() && e.kind != "SEALED" && e.kind != "FAULT" && e.kind != "STRAGGLER" && e.kind != "RESTARTED") s.acted = true;
            if (e.kind != "SUPERVISED" && e.kind != "RESTART_GAVE_UP" && e.kind != "FAULT" && e.kind != "RESTARTED") continue;
            json::error_code ec;
            auto v = json::parse(e.evidence, ec);
            if (ec || !v.is_object()) continue;
            const auto &o = v.as_object();
            const auto *a = o.if_contains("attempt");
            if (!a || !a->is_int64() || a->as_int64() != attempt) continue;
            if (e.kind == "FAULT") {
                const auto *node = o.if_contains("node");
                if (!node || !node->is_string()) continue;
                const std::string w(node->as_string());
                const auto same = [&](const Supervision::Death &x) { return node_of_worker(x.worker) == node_of_worker(w); };
                if (std::none_of(s.waiting.begin(), s.waiting.end(), same)) s.waiting.push_back({w, e.time});
                s.acted = false;
                continue;
            }
            if (e.kind == "RESTARTED") {   // a relaunch answered the FAULTs of the nodes it left out
                if (const auto *dead = o.if_contains("dead"); dead && dead->is_array())
                    for (const auto &d : dead->as_array())
                        if (d.is_string()) std::erase_if(s.waiting, [&](const Supervision::Death &x) { return node_of_worker(x.worker) == d.as_string(); });
                continue;
            }
            s.supervised = e.kind == "SUPERVISED";
            if (!s.supervised) continue;
            if (auto *n = o.if_contains("spares"); n && n->is_int64()) s.spares = n->as_int64();
            s.nodes.clear();
            if (auto *n = o.if_contains("nodes"); n && n->is_array())
                for (const auto &x : n->as_array())
                    if (x.is_string()) s.nodes.emplace_back(x.as_string());
        }
        if (page.size() < 1000) return s;
    }
}

void Restarts::resume_holds(const std::set<std::string> &decided) {
    std::vector<std::pair<std::string, long long>> degraded;
    {
        auto runs = runs_.read();
        for (auto it = runs.begin(); it != runs.end(); ++it)
            if (it->second.state == RunState::degraded && !decided.count(it->first)) degraded.emplace_back(it->first, it->second.attempt);
    }
    const double now = wall_now();
    for (const auto &[run, attempt] : degraded) {
        // Only a supervised attempt's FAULT that nothing came of: another
        // DEGRADED run (requeue off, a recovery that found no place) stays.
        const Supervision sup = supervision_of(*store_, run, attempt);
        if (!sup.supervised || sup.waiting.empty() || sup.acted) continue;
        Fault f{run, sup.waiting.front().worker, attempt, "(a FAULT held for an in-job restart when the broker stopped)", WorkerState{},
                FaultKind::silent};
        f.state.attempt = attempt;
        // Its job as the workers restored at start know it (attempt 1's
        // job is no recorded attempt), else as the attempt's record says.
        for (const auto &[key, w] : workers_.of_run(run, true))
            if (w.attempt == attempt && w.job > 0) f.state.cluster = w.cluster, f.state.job = w.job;
        runs_.with_run(run, [&](const RunInfo *r) {
            if (!r) return false;
            if (auto j = r->jobs.find(attempt); j != r->jobs.end() && j->second.job > 0) f.state.cluster = j->second.cluster, f.state.job = j->second.job;
            return true;
        });
        if (f.state.job <= 0 || f.state.cluster.empty()) {
            log_warn("a FAULT held for an in-job restart cannot be held again: its job is not known (no worker rows)", run, std::to_string(attempt));
            continue;
        }
        {
            std::lock_guard<std::mutex> lock(in_job_.mu);
            auto &s = in_job_.by_run[run];
            s = InJobRestarts::Supervised{};
            s.attempt = attempt, s.spares = sup.spares, s.nodes = sup.nodes;
        }
        log_warn("a FAULT held for an in-job restart is held again after the broker's restart", run, std::to_string(attempt));
        requeue_or_hold(f, now, sup.waiting.front().at);
        for (std::size_t i = 1; i < sup.waiting.size(); ++i) {   // the others wait after it, as before the stop
            Fault next = f;
            next.node = sup.waiting[i].worker;
            requeue_or_hold(next, now, sup.waiting[i].at);
        }
    }
}

void Restarts::requeue_or_hold(const Fault &fault, double now, double fault_at) {
    if (fault_at < 0) fault_at = now;
    bool hold = false;
    {
        std::lock_guard<std::mutex> lock(in_job_.mu);
        auto it = in_job_.by_run.find(fault.run);
        if (it != in_job_.by_run.end() && it->second.attempt == fault.attempt) {
            auto &sup = it->second;
            if (sup.held) {   // a FAULT of the attempt waits already: this one waits after it (one requeue at most)
                const auto same = [&](const Fault &f) { return node_of_worker(f.node) == node_of_worker(fault.node); };
                const auto same_waiting = [&](const InJobRestarts::Supervised::Waiting &w) { return same(w.fault); };
                if (!same(*sup.held) && std::none_of(sup.also.begin(), sup.also.end(), same_waiting) && sup.also.size() < InJobRestarts::kMaxNodes)
                    sup.also.push_back({fault, fault_at});
                return;
            }
            // With no spare left too: the supervisor says it gives up
            // (within a second), and only then is the job cancelled for the
            // requeue, so that its word is heard.
            it->second.held = fault;
            it->second.held_at = now;
            it->second.held_fault_at = fault_at;
            hold = true;
        }
    }
    if (!hold) return hooks_.requeue(fault, 0, false);
    hold_timer(fault.run, fault.attempt, now);
}

void Restarts::hold_timer(const std::string &run, long long attempt, double held_at) {
    retry_later(InJobRestarts::kHoldSeconds, "in-job restart hold", [this, run, attempt, held_at] {
        std::optional<Fault> held;
        {
            std::lock_guard<std::mutex> lock(in_job_.mu);
            auto it = in_job_.by_run.find(run);
            if (it == in_job_.by_run.end() || it->second.attempt != attempt || !it->second.held || it->second.held_at != held_at) return;
            held = it->second.held;
            in_job_.by_run.erase(it);   // the supervisor is taken as gone
        }
        log_warn("no in-job restart within " + std::to_string(int(InJobRestarts::kHoldSeconds)) + " s of the FAULT: requeued", run, "");
        hooks_.requeue(*held, 0, false);
    });
}

}  // namespace shardnet::broker
