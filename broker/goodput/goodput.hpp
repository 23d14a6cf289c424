// Goodput of a run (doc/goodput.md): its wall time split into what a
// sealed checkpoint kept and what each fault cost. A pure function of what
// the broker records (the run's events, its seals, its workers' first
// steps), so that the sum can be checked by value.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace shardnet::broker::goodput {

// One thing the broker recorded, in time order. kind is an event's kind
// (PENDING, RUNNING, ATTEMPT, RECOVERED, FAULT, RECOVERING, RESTARTED,
// SUCCEEDED, FAILED, CANCELLED, MOVED), or SEAL (a sealed checkpoint) or
// PROGRESS (a worker's first step of the attempt).
struct Mark {
    std::string kind;
    double time = 0;
    long long attempt = 0;      // 0: not named
    double failed_at = 0;       // FAULT: the dead worker's last heartbeat (0: unknown)
    std::string node, cause;    // FAULT: the worker and the cause; SEAL: the checkpoint in cause
};

// What one fault cost, in seconds, each a part of the run's wall time.
struct FaultCost {
    long long attempt = 0;
    std::string node, cause;
    double failed_at = 0, fault_at = 0;
    std::optional<std::string> resumed_from;   // the last seal before the failure: none, from the start
    bool in_job = false;                       // relaunched inside the job (RESTARTED), no new attempt
    long long next_attempt = 0;                // 0: none yet
    double recovered_at = 0;                   // training again (0: not yet)
    double redone = 0, detection = 0, placement = 0, queue_wait = 0, restart = 0;
    double total() const { return redone + detection + placement + queue_wait + restart; }
};

// The run's wall time, partitioned: productive + unsealed + lost() == wall.
struct Goodput {
    double start = 0, end = 0, wall = 0;
    bool ended = false;
    double productive = 0;   // training whose steps a sealed checkpoint kept (or a SUCCEEDED end)
    double unsealed = 0;     // training since the last seal of the attempt that runs now: at risk
    double startup = 0;      // attempt 1: submit (or first heartbeat) to its first step
    double not_kept = 0;     // training after the last seal of a run that ended FAILED, CANCELLED or MOVED
    double unattributed = 0; // redone or waited on with no FAULT to name (an attempt no decision of ours started)
    std::vector<FaultCost> faults;
    double lost() const;     // startup + not_kept + unattributed + each fault's total
    double ratio() const { return wall > 0 ? productive / wall : 0; }
};

// marks in any order (sorted here, stably); now: the end of a run not ended.
Goodput compute(std::vector<Mark> marks, double now);

}  // namespace shardnet::broker::goodput
