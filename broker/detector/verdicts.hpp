// A job's end judged (detector/verdict.cpp, detector/slurm_end.cpp): a
// batch script that ended non-zero, or a rank that failed, is a dead node's
// FAULT when Slurm says a node of the attempt died under it; with every
// node alive, how Slurm says the job ended decides (its own requeue, a
// preemption, a cancel, a limit), else the program's own error ends the run
// FAILED, naming the rank that failed first. An end the broker did not
// hear of (it was away) is taken as Slurm tells it.
#pragma once
#include <boost/json/object.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "broker/api/heartbeat_body.hpp"
#include "broker/core/hooks.hpp"
#include "broker/core/module.hpp"
#include "broker/inventory/inventory_module.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/recovery/attempts.hpp"

namespace shardnet::broker {

// A batch script that ended non-zero, or a rank that failed: a node that
// died under the attempt makes it a FAULT, a program's own error (every
// node alive) ends the run FAILED naming the first failing rank.
struct BatchEnd {
    std::string run;
    long long attempt = 0;
    std::string node, cluster;
    long long job = 0;
    std::optional<long long> code, signal;
    std::string what = "the batch script";   // or "rank N": whose end it is
    // Its exit code is one the job's --shardnet-fatal-exit names: the
    // run ends FAILED at once, nothing asked of Slurm, nothing requeued.
    bool fatal = false;
    std::string stderr_tail;   // the batch script's last lines of standard error (its end's report)
};

class Verdicts : Module {
public:
    Verdicts(Core &core, const ServiceHooks &hooks, Receipts &receipts, Inventory &inventory, Attempts &attempts)
        : Module(core), hooks_(hooks), receipts_(receipts), inventory_(inventory), attempts_(attempts) {}

    // Keeps the attempt's first failed rank; true when node reports its first failed rank.
    bool note_rank_failure(const std::string &run, long long attempt, const std::string &node, const HeartbeatBody::RankExit &e);
    // round -1: a rank failed (its node is alive); only a dead node of the
    // attempt is acted on (FAULT), nothing else is decided.
    void judge_batch_end(const BatchEnd &end, int round = 0);
    // first: the attempt's first failed rank (for a fatal exit: the rank whose code it is, or none for the batch script's).
    // slurm_words: how Slurm says the job ended, when it says more than
    // FAILED ("out of memory (Slurm: OUT_OF_MEMORY)"), first in the cause.
    void end_failed(const BatchEnd &end, const RunInfo::RankFailure *first, const std::string &unreported, double now, int tries = 0,
                    const std::string &slurm_words = "");
    // The first heartbeat of an attempt that says its pre-limit signal went.
    void note_prelimit(std::string_view run, long long attempt, double now);
    // A job a limit ended, seen by the detector (its end unreported): the
    // same judgment as settle_end's (detector/slurm_end.cpp).
    void ended_at_limit(const Fault &fault, const std::string &job_state, const boost::json::object &ev);
    // Slurm requeued the job itself: no failure, the attempt goes on (event REQUEUED).
    void slurm_requeued(const BatchEnd &end, const std::string &cause, const std::string &evidence, double now);
    // The batch step of an attempt Slurm requeued itself heartbeats again:
    // the RESUMED event (the end of the pause on the run's timeline).
    void resumed_after_slurm_requeue(const std::string &run, long long attempt, const std::string &cluster, long long job,
                                     const std::string &nodelist);
    // The batch script ended while its last report was lost (the broker was
    // down or restarting): the run ends as Slurm says its job did
    // (COMPLETED: SUCCEEDED, CANCELLED: CANCELLED), with an event saying so.
    void end_from_slurm(const Fault &fault, const std::string &job_state, double now);

private:
    struct Judgment;   // one question to Slurm about it (detector/verdict.cpp)
    // Every node alive: the job's end as Slurm tells it once settled
    // (detector/slurm_end.cpp). hold keeps the judgment's flag up meanwhile.
    void settle_end(const BatchEnd &end, const std::optional<RunInfo::RankFailure> &first, const std::string &unreported,
                    std::shared_ptr<void> hold, int round = 0);
    // A TIMEOUT under --shardnet-on-timeout=requeue: the checkpoint sealed
    // by the attempt since its pre-limit signal, or "" with why not (no).
    std::string sealed_after_prelimit(const BatchEnd &end, std::string &no);
    // A TIMEOUT that qualifies is raised as a FAULT (true); else words says why not.
    bool timeout_requeued(const BatchEnd &end, boost::json::object ev, std::string &words);
    // The job was cancelled in Slurm (scancel): the run is CANCELLED.
    void slurm_cancelled(const BatchEnd &end, const std::string &evidence, double now);
    // The batch script's stderr tail for a run that had already ended
    // FAILED (a fatal exit, a spent budget): an event of its own.
    void note_stderr_tail(const BatchEnd &end, double now);

    const ServiceHooks &hooks_;
    Receipts &receipts_;
    Inventory &inventory_;
    Attempts &attempts_;
};

}  // namespace shardnet::broker
