// In-job restarts (tier 0): `shard launch`, the batch script's step
// supervisor, relaunches the step on the survivors and a spare node of the
// same Slurm job when a node dies. It tells the broker so
// (POST /v1/runs/RUN/restarts, recovery/in_job_restarts.cpp): that it
// supervises an attempt, that it relaunched it, or that it gave up. While
// it supervises, an attempt's node FAULT holds the requeue for a bounded
// time (the supervisor's relaunch, or its giving up, takes a second); a relaunch brings the run
// back to RUNNING with a RESTARTED event (so does a straggler's swap, which
// holds nothing: the node a STRAGGLER event named leaves the step at a
// sealed checkpoint, a spare takes its place), and giving up, or a hold that
// passed, requeues as before (tier 1). Everything a supervisor says is the
// job's word: it may hold its own run's requeue for a while, nothing else.
// Kept in memory; a broker restarted while a FAULT is held holds it again
// from its start (resume_holds: the run's SUPERVISED and FAULT events say
// which), so that the relaunch's report, sent again by shard launch while
// the broker is away, still brings the run back.
#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "broker/workers/workers.hpp"

namespace shardnet::broker {

struct InJobRestarts {
    // How long a FAULT's requeue waits for the supervisor's relaunch.
    static constexpr double kHoldSeconds = 30;
    static constexpr std::size_t kMaxNodes = 4096;   // per list in a report (a job of 4096 nodes: about 0.5 MiB of names at most)
    struct Supervised {
        long long attempt = 0;
        long long spares = 0;     // spare nodes left, as the supervisor last said
        long long restarts = 0;   // relaunches reported
        std::optional<Fault> held;   // the FAULT whose requeue waits
        double held_at = 0;          // since when (its hold timer's start)
        double held_fault_at = 0;    // when that FAULT was raised (since_fault counts from it)
        // FAULTs of other nodes of the attempt raised while one is held
        // (a second node died before the relaunch): each is held in turn
        // once a relaunch answers the one before, unless it named them too.
        struct Waiting { Fault fault; double fault_at; };
        std::vector<Waiting> also;
        std::vector<std::string> nodes;   // the step's nodes, as the supervisor last said: the others are spares
    };
    // Reports a run may send in a minute: a supervisor sends a handful per
    // restart; any rank's token may post, so more is a loop or an attack
    // (each costs an event row and a read of Slurm).
    static constexpr std::size_t kReportsPerMinute = 30;
    std::mutex mu;
    std::map<std::string, Supervised> by_run;
    std::map<std::string, std::vector<double>> reports;   // run -> times in the last minute
    // Counts the report; false: over kReportsPerMinute (under mu).
    bool admit(const std::string &run, double now);
    // Forgets, a minute apart at most, the supervisions that live() says
    // are over (the run ended, or left that attempt) and hold no FAULT:
    // by_run keeps live supervisions only. Takes mu itself; live() is
    // called without it.
    void prune(double now, const std::function<bool(const std::string &run, long long attempt)> &live);
    double pruned_at = 0;
};

// A restart report, read strictly: "" and out filled, or what is wrong
// naming the field.
struct RestartReport {
    // supervising, restarted (after a node's death), swapped (a straggler
    // the broker named left out at a sealed checkpoint), gave_up
    std::string kind;
    long long attempt = 0, restart = 0, spares = 0;
    std::vector<std::string> nodes, dead, took, slow;
    // The Slurm step the relaunch ended (its id, "0"): its workers on every
    // node are done, not silent (a cancelled step's agents may not say so).
    std::string ended_step;
    std::string reason;
    double relaunch_seconds = -1;   // the supervisor's own measure: evidence seen -> new step started
};
std::string read_restart_report(const std::string &body, RestartReport &out);

}  // namespace shardnet::broker
