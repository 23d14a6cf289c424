// A batch script that ended non-zero is not yet the run's verdict. The
// survivors of a multi-node job crash within a second of a peer node's
// death (gloo and NCCL abort their collectives), long before Slurm marks
// that node down; taken at its word, every node failure would end its run
// FAILED. So the end is classified first: the attempt's other workers
// that never said they ended are the suspects, and Slurm and their slurmd
// are asked about each one's node. A node that is down is a FAULT (the
// survivors' exit is its consequence), and the run is recovered by policy;
// with every node alive, the program's own error ends the run FAILED, naming
// the rank that failed first, its node and its exit code or signal. The
// same question is asked as soon as an agent reports a failed rank: the
// survivors fail within a second of the death, and the dead node's slurmd
// no longer answers, so the FAULT need not wait for the batch script's end
// (which srun delays until Slurm itself declares the node down).
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <map>

#include "broker/detector/verdicts.hpp"
#include "broker/core/api_util.hpp"
#include "broker/detector/stderr_tail.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using detail::log_warn;

namespace {

std::string node_of(const std::string &worker) { return worker.substr(0, worker.find('/')); }

std::string exit_words(const std::optional<long long> &code, const std::optional<long long> &signal) {
    if (code) return "exited " + std::to_string(*code);
    if (signal) return "killed by signal " + std::to_string(*signal);
    return "ended";
}

}  // namespace

bool Verdicts::note_rank_failure(const std::string &run, long long attempt, const std::string &node, const HeartbeatBody::RankExit &e) {
    auto runs = runs_.write();
    auto it = runs.find(run);
    if (it == runs.end() || it->second.attempt != attempt || it->second.state != RunState::running) return false;
    auto &first = it->second.first_failure;
    const bool news = first.attempt != attempt, earlier = news || (e.time > 0 && (first.time == 0 || e.time < first.time));
    if (news) it->second.failed_nodes.clear();
    if (earlier) first = RunInfo::RankFailure{attempt, e.rank, node, e.code, e.signal, e.time};
    // A node's first failed rank is looked into once (an agent repeats its
    // ranks' ends), and a job's word on its nodes is bounded.
    auto &seen = it->second.failed_nodes;
    if (seen.size() >= 64 || !seen.insert(node).second) return false;
    return true;
}

namespace {
// The most rounds (a second apart) a batch end waits for a silent worker
// on a node Slurm says is up: one detector deadline, at most this long.
constexpr int kMaxJudgeRounds = 60;
}  // namespace

// One question to Slurm about a job's end (on the Slurm thread): which node
// of the attempt, if any, died under it. hold keeps the judgment's flag up
// (judge_batch_end) while a copy of this lives: a retry, the settling.
struct Verdicts::Judgment {
    Verdicts &s;
    BatchEnd end;
    int round = 0;
    bool probe = false;   // a rank's failure, not the batch script's end: only a dead node is acted on
    RunInfo::RankFailure first;
    std::string slurm_conf;
    std::shared_ptr<void> hold;

    const RunInfo::RankFailure *first_of_attempt() const { return first.attempt == end.attempt ? &first : nullptr; }
    void classify();
    // Slurm does not answer: as the detector does, the broker's own
    // evidence (a silent worker) is a FAULT, said unconfirmed.
    void unreachable(json::object ev, const std::string &why);
};

void Verdicts::Judgment::unreachable(json::object ev, const std::string &why) {
    for (const auto &[key, w] : s.workers_.of_run(end.run))
        if (w.attempt == end.attempt && !w.ended && node_of(key) != end.node) {
            ev["confirmed"] = false;
            ev["slurmctld"] = why;
            Fault fault{end.run, key, end.attempt, fault_words(FaultKind::silent), w, FaultKind::silent};
            return s.hooks_.raise_fault(fault, "silent while " + end.what + " " + exit_words(end.code, end.signal) + " on " + end.node +
                                        "; cluster " + end.cluster + " unreachable (" + why + ")", ev, wall_now());
        }
    if (!probe) s.end_failed(end, first_of_attempt(), "", wall_now());
}

void Verdicts::Judgment::classify() {
    // Only the job's own nodes, as Slurm lists them, are suspects (a job
    // names its workers' nodes itself), one worker each: the attempt's
    // workers on other nodes than the reporter's that never said they
    // ended, and its allocation's watched nodes (asked once).
    std::string why;
    const auto nodes = s.job_nodes(end.cluster, end.job, why);
    json::object ev{{"confirmed", true}, {probe ? "rank_exit" : "batch_exit", exit_words(end.code, end.signal)},
                    {probe ? "rank_node" : "batch_node", end.node}};
    if (first.attempt == end.attempt)
        ev["first_failure"] = json::object{{"rank", first.rank}, {"node", first.node}, {"exit", exit_words(first.code, first.signal)}};
    if (!nodes && why == "squeue failed") return unreachable(std::move(ev), why);
    // A job Slurm no longer lists (purged): its workers' nodes, a few. (A
    // worker the detector found silent meanwhile is one too: it left the
    // question to this judgment.)
    std::map<std::string, std::pair<std::string, WorkerState>> suspects;
    for (auto &[key, w] : s.workers_.of_run(end.run, true)) {
        const std::string node = node_of(key);
        if (w.attempt == end.attempt && !w.ended && node != end.node && (nodes ? nodes->count(node) > 0 : suspects.size() < 16) &&
            (round <= 0 || !w.watch_only) && (!suspects.count(node) || suspects[node].second.watch_only))
            suspects[node] = {key, w};
    }
    std::string waiting;
    int wait_rounds = 3;
    for (const auto &[node, suspect] : suspects) {
        const auto &[key, w] = suspect;
        SlurmView v = ask_slurm(*s.slurm_, slurm_conf, end.job, node);
        if (v.controller_ok && (node_state_bad(v.node_state) || !v.slurmd_answers)) {
            const std::string dead = v.slurmd_answers ? "Slurm says " + v.node_state : "its slurmd does not answer";
            ev["node_failure"] = true;
            ev["slurm_job_state"] = v.job_state;
            ev["slurm_node_state"] = v.node_state;
            ev["slurmd_answers"] = v.slurmd_answers;
            ev["seen_by"] = node_dead_in_slurm(v.node_state) ? "slurm" : "broker";
            s.inventory_.seen_down(end.cluster, node, wall_now(), end.run, "died under the job (" + dead + ")", v.node_state);
            Fault fault{end.run, key, end.attempt, fault_words(FaultKind::silent), w, FaultKind::silent};
            return s.hooks_.raise_fault(fault, "lost: node " + node + " died (" + dead + "); " + end.what + " " +
                                        exit_words(end.code, end.signal) + " on " + end.node + " after it, which is not the verdict",
                                        ev, wall_now());
        }
        if (!w.watch_only) {
            if (!waiting.empty()) waiting += ", ";
            waiting += key;
            wait_rounds = std::max(wait_rounds, std::min(w.interval * s.cfg_.detector_misses, kMaxJudgeRounds));
        }
    }
    // A rank's failure with every other node up: the batch script's end
    // (or the detector) decides.
    if (probe) return;
    // Every suspect's node is up: its agent's last word is late, or lost.
    // Asked again each second, for one detector deadline.
    if (!waiting.empty() && round < wait_rounds)
        return s.retry_later(1.0, "classify a batch script's end",
                             [svc = &s, end = end, round = round, hold = hold] { svc->judge_batch_end(end, round + 1); });
    // Every node alive: how Slurm says the job ended decides (its own
    // requeue, a preemption, a cancel, a limit), the judgment's flag held.
    s.settle_end(end, first.attempt == end.attempt ? std::optional(first) : std::nullopt, waiting, hold);
}

void Verdicts::judge_batch_end(const BatchEnd &end, int round) {
    const bool probe = round < 0;   // a rank's failure, not the batch script's end: only a dead node is acted on
    // Still this attempt's question: a FAULT, a cancel or a newer attempt
    // answers it. One judgment (and one probe) of an attempt at a time: the
    // detector leaves the attempt's silent workers to it meanwhile.
    RunInfo::RankFailure first;
    // The flag goes down whichever way the judgment ends (a verdict, a
    // question answered elsewhere, an exception in a Slurm call): held by
    // every copy of the judgment, released with the last one.
    // It holds the registry, not this module: a retry still queued when the
    // broker stops lowers it as the core goes, after the modules.
    struct Flag {
        RunRegistry *registry;
        std::string run;
        bool probe;
        unsigned long long serial;   // a later round's flag is another one: only the newest lowers it
        ~Flag() {
            auto runs = registry->write();
            auto it = runs.find(run);
            if (it == runs.end()) return;
            auto &info = it->second;
            if ((probe ? info.probing_serial : info.judging_serial) == serial) (probe ? info.probing : info.judging) = 0;
        }
    };
    unsigned long long serial = 0;
    bool off_and_faulted = false, failed_before = false;
    {
        auto runs = runs_.write();
        auto it = runs.find(end.run);
        if (it == runs.end() || it->second.attempt != end.attempt) return;
        long long &mine = probe ? it->second.probing : it->second.judging;
        if (it->second.state != RunState::running) {
            if (round > 0) mine = 0;
            // A FAULT came meanwhile and nothing will be requeued: the
            // batch script's end is the run's end.
            off_and_faulted = !probe && it->second.state == RunState::degraded && it->second.requeue == "off";
            failed_before = !probe && it->second.state == RunState::failed;
        } else {
            if (round <= 0 && mine == end.attempt) return;   // already under way
            mine = end.attempt;
            serial = ++(probe ? it->second.probing_serial : it->second.judging_serial);
        }
        first = it->second.first_failure;
    }
    // In place (a temporary Flag would lower the flag as it dies), and at
    // once: every way out from here lowers it.
    std::shared_ptr<void> flag;
    if (serial) flag.reset(new Flag{&runs_, end.run, probe, serial});
    if (off_and_faulted) return end_failed(end, nullptr, "", wall_now());
    if (failed_before) return note_stderr_tail(end, wall_now());   // a fatal exit (or a spent budget) ended it first
    if (!flag) return;
    auto conf = cfg_.clusters.find(end.cluster);
    if (conf == cfg_.clusters.end() || end.job <= 0) {
        flag.reset();
        if (!probe) end_failed(end, first.attempt == end.attempt ? &first : nullptr, "", wall_now());
        return;
    }
    detail::post_guarded(slurm_thread_, "classify a job's end",
                         [j = Judgment{*this, end, round, probe, first, conf->second, std::move(flag)}]() mutable { j.classify(); });
}

void Verdicts::end_failed(const BatchEnd &end, const RunInfo::RankFailure *first, const std::string &unreported, double now, int tries,
                          const std::string &slurm_words) {
    std::string cause;
    json::object ev{{"attempt", end.attempt}};
    // A rank's fatal exit comes while the batch script may still run.
    if (!end.fatal || !first) ev["batch_exit"] = exit_words(end.code, end.signal), ev["batch_node"] = end.node;
    if (!end.fatal) ev["nodes_alive"] = true;
    if (end.fatal) {
        // The job said so itself: no node was asked about.
        cause = end.what + " on " + end.node + " " + exit_words(end.code, end.signal) + ", which --shardnet-fatal-exit says is not to be retried";
        json::object f{{"node", end.node}};
        if (first) f["rank"] = first->rank;
        if (end.code) f["exit_code"] = *end.code;
        ev["fatal_exit"] = std::move(f);
    } else if (first) {
        cause = "rank " + std::to_string(first->rank) + " on " + first->node + " " + exit_words(first->code, first->signal) +
                " (the first rank to fail; every node alive); the batch script " + exit_words(end.code, end.signal) + " on " + end.node;
        json::object f{{"rank", first->rank}, {"node", first->node}};
        if (first->code) f["exit_code"] = *first->code;
        if (first->signal) f["signal"] = *first->signal;
        ev["first_failure"] = std::move(f);
    } else {
        cause = "batch script " + exit_words(end.code, end.signal) + " on " + end.node + " (every node alive)";
    }
    if (!unreported.empty()) {
        cause += "; no end reported by " + unreported + ", though Slurm says their nodes are up";
        ev["unreported"] = unreported;
    }
    // Slurm's own word on how the job ended (a time limit, out of memory) comes first.
    if (!slurm_words.empty()) cause = slurm_words + ": " + cause, ev["slurm_end"] = slurm_words;
    add_stderr_tail(cause, ev, end.stderr_tail);
    on_store([this, end, cause, evidence = json::serialize(ev), now, first = first ? std::optional(*first) : std::nullopt, unreported, tries,
              slurm_words] {
        std::optional<RunInfo> before;
        {
            auto runs = runs_.write();
            auto it = runs.find(end.run);
            // RUNNING, or DEGRADED by a FAULT with nothing to requeue (requeue=off).
            const bool off_and_faulted = it != runs.end() && it->second.state == RunState::degraded && it->second.requeue == "off";
            if (it == runs.end() || it->second.attempt != end.attempt || (it->second.state != RunState::running && !off_and_faulted)) {
                // Ended FAILED meanwhile (a rank's fatal exit came first): the batch script's tail follows.
                if (it != runs.end() && it->second.attempt == end.attempt && it->second.state == RunState::failed) note_stderr_tail(end, now);
                return;
            }
            before = it->second;
            if (!runs.set_state(end.run, it->second, RunState::failed)) return;
        }
        try {
            transact([&] {
                json::object how{{"how", "exited"}, {"node", end.node}};
                if (end.code) how["exit_codes"] = json::array{*end.code};
                if (end.signal) how["signal"] = *end.signal;
                receipts_.write_receipt(receipt::Kind::attempt_ended, end.run, end.attempt, std::move(how), {}, now);
                hooks_.store_state(end.run, RunState::failed, end.attempt, now);
                event(end.run, "FAILED", cause, evidence, now);
            });
        } catch (const std::exception &e) {
            runs_.undo(end.run, before);
            log_warn("FAILED not written; tried again in 1 s", end.run, e.what());
            if (tries < 600) retry_later(1.0, "FAILED retry", [this, end, first = first ? std::optional(*first) : std::nullopt, unreported, tries, slurm_words] {
                end_failed(end, first ? &*first : nullptr, unreported, wall_now(), tries + 1, slurm_words);
            });
        }
    });
}

void Verdicts::note_stderr_tail(const BatchEnd &end, double now) {
    if (end.stderr_tail.empty()) return;
    std::string cause = "the batch script " + exit_words(end.code, end.signal) + " on " + end.node + " after the run ended FAILED";
    json::object ev{{"attempt", end.attempt}, {"batch_exit", exit_words(end.code, end.signal)}, {"batch_node", end.node}};
    add_stderr_tail(cause, ev, end.stderr_tail);
    on_store([this, end, cause, evidence = json::serialize(ev), now] {
        {
            auto runs = runs_.read();
            auto it = runs.find(end.run);
            if (it == runs.end() || it->second.attempt != end.attempt || it->second.state != RunState::failed) return;
        }
        try {
            transact([&] { event(end.run, "STDERR", cause, evidence, now); });
        } catch (const std::exception &e) {
            log_warn("the batch script's stderr tail not written", end.run, e.what());   // a detail of a final run: not retried
        }
    });
}

}  // namespace shardnet::broker
