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

#include "broker/service.hpp"
#include "broker/api/api_util.hpp"
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

bool Service::note_rank_failure(const std::string &run, long long attempt, const std::string &node, const HeartbeatBody::RankExit &e) {
    std::unique_lock lock(runs_mu_);
    auto it = runs_.find(run);
    if (it == runs_.end() || it->second.attempt != attempt || it->second.state != RunState::running) return false;
    auto &first = it->second.first_failure;
    const bool news = first.attempt != attempt, earlier = news || (e.time > 0 && (first.time == 0 || e.time < first.time));
    if (news) it->second.failed_nodes.clear();
    if (earlier) first = RunInfo::RankFailure{attempt, e.rank, node, e.code, e.signal, e.time};
    // A node's first failed rank is looked into once (an agent repeats its ranks' ends).
    return it->second.failed_nodes.insert(node).second && it->second.failed_nodes.size() <= 64;
}

void Service::judge_batch_end(const BatchEnd &end, int round) {
    const bool probe = round < 0;   // a rank's failure, not the batch script's end: only a dead node is acted on
    // Still this attempt's question: a FAULT (the detector was quicker), a
    // cancel or a newer attempt answered it already.
    RunInfo::RankFailure first;
    {
        std::shared_lock lock(runs_mu_);
        auto it = runs_.find(end.run);
        if (it == runs_.end() || it->second.attempt != end.attempt || it->second.state != RunState::running) return;
        first = it->second.first_failure;
    }
    // Workers of the attempt on other nodes than the batch script's that
    // never said they ended; a node of the allocation where none reported
    // yet (a watch) is asked about once, not waited for.
    std::vector<std::pair<std::string, WorkerState>> suspects;
    for (auto &[key, w] : workers_.of_run(end.run, true))
        if (w.attempt == end.attempt && !w.ended && !w.faulted && node_of(key) != end.node && (round <= 0 || !w.watch_only))
            suspects.emplace_back(key, w);
    auto conf = cfg_.clusters.find(end.cluster);
    if (probe && (suspects.empty() || conf == cfg_.clusters.end())) return;
    if (suspects.empty() || conf == cfg_.clusters.end())
        return end_failed(end, first.attempt == end.attempt ? &first : nullptr, "", wall_now());
    detail::post_guarded(slurm_thread_, "classify a batch script's end", [this, end, round, probe, suspects, first, slurm_conf = conf->second] {
        std::string waiting;
        int wait_rounds = 3;
        for (const auto &[key, w] : suspects) {
            const std::string node = node_of(key);
            SlurmView v = ask_slurm(*slurm_, slurm_conf, end.job, node);
            const bool down = v.controller_ok && (node_state_bad(v.node_state) || !v.slurmd_answers);
            if (down) {
                const std::string why = v.slurmd_answers ? "Slurm says " + v.node_state : "its slurmd does not answer";
                json::object ev{{"confirmed", true}, {"node_failure", true}, {"slurm_job_state", v.job_state},
                                {"slurm_node_state", v.node_state}, {"slurmd_answers", v.slurmd_answers},
                                {probe ? "rank_exit" : "batch_exit", exit_words(end.code, end.signal)},
                                {probe ? "rank_node" : "batch_node", end.node}};
                if (first.attempt == end.attempt)
                    ev["first_failure"] = json::object{{"rank", first.rank}, {"node", first.node}, {"exit", exit_words(first.code, first.signal)}};
                quarantine(end.cluster, node, wall_now(), end.run, "died under the job (" + why + ")");
                Fault fault{end.run, key, end.attempt, fault_words(FaultKind::silent), w, FaultKind::silent};
                return raise_fault(fault, "lost: node " + node + " died (" + why + "); " + end.what + " " +
                                   exit_words(end.code, end.signal) + " on " + end.node + " after it, which is not the verdict",
                                   ev, wall_now());
            }
            if (!w.watch_only) {
                if (!waiting.empty()) waiting += ", ";
                waiting += key;
                wait_rounds = std::max(wait_rounds, w.interval * cfg_.detector_misses);
            }
        }
        // A rank's failure with every other node up: the batch script's
        // end (or the detector) decides.
        if (probe) return;
        // Every suspect's node is up: its agent's last word is late, or
        // lost. Asked again each second, for one detector deadline.
        if (!waiting.empty() && round < wait_rounds) {
            return retry_later(1.0, "classify a batch script's end", [this, end, round] { judge_batch_end(end, round + 1); });
        }
        end_failed(end, first.attempt == end.attempt ? &first : nullptr, waiting, wall_now());
    });
}

void Service::end_failed(const BatchEnd &end, const RunInfo::RankFailure *first, const std::string &unreported, double now) {
    std::string cause;
    json::object ev{{"attempt", end.attempt}, {"batch_exit", exit_words(end.code, end.signal)}, {"batch_node", end.node},
                    {"nodes_alive", true}};
    if (first) {
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
    on_store([this, end, cause, evidence = json::serialize(ev), now] {
        std::optional<RunInfo> before;
        {
            std::unique_lock lock(runs_mu_);
            auto it = runs_.find(end.run);
            if (it == runs_.end() || it->second.attempt != end.attempt || it->second.state != RunState::running) return;
            before = it->second;
            if (!set_state(end.run, it->second, RunState::failed)) return;
        }
        try {
            transact([&] {
                json::object how{{"how", "exited"}, {"node", end.node}};
                if (end.code) how["exit_codes"] = json::array{*end.code};
                if (end.signal) how["signal"] = *end.signal;
                write_receipt(receipt::Kind::attempt_ended, end.run, end.attempt, std::move(how), {}, now);
                store_state(end.run, RunState::failed, end.attempt, now);
                event(end.run, "FAILED", cause, evidence, now);
            });
        } catch (const std::exception &e) {
            undo_run(end.run, before);
            log_warn("FAILED not written; tried again in 1 s", end.run, e.what());
            retry_later(1.0, "FAILED retry", [this, end] { judge_batch_end(end, 1000); });
        }
    });
}

}  // namespace shardnet::broker
