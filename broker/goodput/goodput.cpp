// Goodput (doc/goodput.md): one pass over a run's marks in time order. A
// cursor moves from the run's start to its end; each step adds the time
// since the cursor to the category of the phase the run was in, so the
// categories partition the wall time by construction.
#include "broker/goodput/goodput.hpp"

#include <algorithm>

namespace shardnet::broker::goodput {

double Goodput::lost() const {
    double sum = startup + not_kept + unattributed;
    for (const auto &f : faults) sum += f.total();
    return sum;
}

namespace {

bool is_final(const std::string &kind) {
    return kind == "SUCCEEDED" || kind == "FAILED" || kind == "CANCELLED" || kind == "MOVED";
}

// A first heartbeat of an attempt: RUNNING (attempt 1, or a run nobody
// created), ATTEMPT (a newer attempt), RECOVERED (every node of it).
bool is_first_heartbeat(const std::string &kind) { return kind == "RUNNING" || kind == "ATTEMPT" || kind == "RECOVERED"; }

enum class Phase {
    startup,      // attempt 1: submitted, not stepping yet
    training,     // stepping: kept at the next seal
    placing,      // a FAULT written, the next attempt not submitted yet
    queued,       // the next attempt submitted, no heartbeat of it yet
    restarting,   // the next attempt (or relaunched step) heartbeats, no new step yet
    gap,          // a newer attempt no FAULT of ours led to, not stepping yet
};

struct Sweep {
    explicit Sweep(const std::vector<Mark> &m) : marks(m) {}
    const std::vector<Mark> &marks;
    Goodput g;
    double t = 0;
    Phase phase = Phase::startup;
    long long attempt = 0;
    int open = -1;   // the fault being recovered from (index in g.faults)
    std::optional<std::string> last_seal;

    // The time from the cursor to `upto` (clamped to [t, end]) goes to `into`.
    void add(double &into, double upto) {
        const double x = std::clamp(upto, t, g.end);
        into += x - t;
        t = x;
    }
    // What the run was doing when the open fault's attempt failed, and the
    // fault open then: a later FAULT of the same attempt may move the
    // failure later (below).
    Phase failed_in = Phase::training;
    int failed_open = -1;
    FaultCost &fault() { return g.faults[std::size_t(open)]; }
    double &bucket_of(Phase p, int row) {
        switch (p) {
        case Phase::startup: return g.startup;
        case Phase::placing: return g.faults[std::size_t(row)].placement;
        case Phase::queued: return g.faults[std::size_t(row)].queue_wait;
        case Phase::restarting: return g.faults[std::size_t(row)].restart;
        case Phase::gap: return g.unattributed;
        case Phase::training: break;
        }
        return g.unsealed;
    }
    double &bucket() { return bucket_of(phase, open); }
    // Whether a worker of attempt a reports a first step at or after `from`:
    // where none does (the broker did not see it), training counts from the
    // heartbeat.
    bool progress_after(long long a, double from) const {
        for (const auto &m : marks)
            if (m.kind == "PROGRESS" && m.attempt == a && m.time >= from) return true;
        return false;
    }
    void training_from(double time) {
        add(bucket(), time);
        if (phase == Phase::restarting) fault().recovered_at = t;
        if (phase == Phase::restarting || phase == Phase::gap) open = -1;
        phase = Phase::training;
    }
    void heartbeat(const Mark &m) {
        const long long a = m.attempt > 0 ? m.attempt : attempt;
        if (phase == Phase::startup && (attempt == 0 || a == attempt)) {
            attempt = a;
            if (!progress_after(a, m.time)) training_from(m.time);
        } else if ((phase == Phase::placing || phase == Phase::queued) && a > fault().attempt) {
            add(bucket(), m.time);
            attempt = a;
            fault().next_attempt = a;
            phase = Phase::restarting;
            if (!progress_after(a, m.time)) training_from(m.time);
        } else if (phase == Phase::training && a > attempt) {
            add(g.unattributed, m.time);   // the old attempt's work since its last seal
            attempt = a;
            phase = Phase::gap;
            if (!progress_after(a, m.time)) training_from(m.time);
        }
    }
    void progress(const Mark &m) {
        if (m.attempt == attempt && (phase == Phase::startup || phase == Phase::restarting || phase == Phase::gap) && m.time >= t)
            training_from(m.time);
    }
    void seal(const Mark &m) {
        if (m.attempt > attempt) return;
        last_seal = m.cause;
        if (m.attempt != attempt) return;
        if (phase == Phase::startup || phase == Phase::restarting || phase == Phase::gap) training_from(m.time);
        if (phase == Phase::training) add(g.productive, m.time);
    }
    void fault_seen(const Mark &m) {
        const long long a = m.attempt > 0 ? m.attempt : attempt;
        if (a < attempt) return;   // an older attempt's, fenced already
        const double failed = m.failed_at > 0 ? std::min(m.failed_at, m.time) : m.time;
        if ((phase == Phase::placing || phase == Phase::queued) && fault().attempt == a) return later_failure(failed);   // the same interruption
        FaultCost f;
        f.attempt = a, f.node = m.node, f.cause = m.cause, f.failed_at = failed, f.fault_at = m.time, f.resumed_from = last_seal;
        g.faults.push_back(std::move(f));
        const int mine = int(g.faults.size()) - 1;
        failed_in = phase, failed_open = open;
        if (phase == Phase::training) add(g.faults.back().redone, failed);
        else add(bucket(), failed);   // a startup or restart that failed ends at the failure
        // A failure dated before what was already counted (a worker last
        // heard before the last seal) failed there: nothing is counted twice.
        g.faults.back().failed_at = t;
        open = mine;
        attempt = a;
        add(fault().detection, m.time);
        phase = Phase::placing;
    }
    // Another worker of the failed attempt was heard after the first
    // FAULT's worker (a batch script's agent reports less often than its
    // ranks): the attempt worked until then, so the failure moves there,
    // from detection to what the attempt was doing.
    void later_failure(double failed) {
        FaultCost &f = fault();
        const double moved = std::min(failed, f.fault_at) - f.failed_at;
        if (moved <= 0) return;
        (failed_in == Phase::training ? f.redone : bucket_of(failed_in, failed_open)) += moved;
        f.detection -= moved;
        f.failed_at += moved;
    }
    void submitted(const Mark &m) {
        if (phase != Phase::placing) return;
        add(fault().placement, m.time);
        if (m.attempt > 0) fault().next_attempt = m.attempt;
        phase = Phase::queued;
    }
    void relaunched(const Mark &m) {
        if ((phase != Phase::placing && phase != Phase::queued) || (m.attempt > 0 && fault().attempt != m.attempt)) return;
        fault().in_job = true;
        phase = Phase::restarting;
        add(fault().restart, m.time);
        if (!progress_after(attempt, m.time)) training_from(m.time);
    }
    void finish(const std::string &kind) {
        if (phase == Phase::training)
            add(kind == "SUCCEEDED" ? g.productive : kind.empty() ? g.unsealed : g.not_kept, g.end);
        else
            add(bucket(), g.end);
    }
};

}  // namespace

Goodput compute(std::vector<Mark> marks, double now) {
    std::stable_sort(marks.begin(), marks.end(), [](const Mark &a, const Mark &b) { return a.time < b.time; });
    Sweep s(marks);
    Goodput &g = s.g;
    const Mark *begin = nullptr, *final = nullptr;
    for (const auto &m : marks) {
        if (!begin && (m.kind == "PENDING" || is_first_heartbeat(m.kind) || m.kind == "RECOVERING")) begin = &m;
        if (!final && is_final(m.kind)) final = &m;
    }
    if (!begin) {   // never submitted: no wall time yet
        g.end = now;
        return g;
    }
    g.start = begin->time;
    g.ended = final != nullptr;
    g.end = std::max(g.start, final ? final->time : now);
    g.wall = g.end - g.start;
    s.t = g.start;
    s.attempt = begin->attempt;
    for (const auto &m : marks) {
        if (&m == final) break;
        if (is_first_heartbeat(m.kind)) s.heartbeat(m);
        else if (m.kind == "PROGRESS") s.progress(m);
        else if (m.kind == "SEAL") s.seal(m);
        else if (m.kind == "FAULT") s.fault_seen(m);
        else if (m.kind == "RECOVERING") s.submitted(m);
        else if (m.kind == "RESTARTED") s.relaunched(m);
    }
    s.finish(final ? final->kind : std::string());
    return g;
}

}  // namespace shardnet::broker::goodput
