// Stragglers: a node of a job whose training step rate stays under a
// fraction of its job's median for `windows` windows in a row. Pure: fed
// the worker table's soft state once a window (Stragglers, stragglers.hpp,
// does that on the detector's thread), it keeps one sample per worker and
// says which are named now.
//
// What is compared: the workers of one run's attempt and one Slurm step
// (NODE/STEP keys of the same STEP), each node's steps per second between
// its own reports (the times its step advanced), not between window edges:
// a node whose heartbeat interval is longer than a window is judged when it
// reports, at its own pace, and not in a window it did not report in. A batch script's worker, a watch, an ended or faulted
// worker is not judged; nor is one writing a checkpoint (its pause is not
// slowness), nor a group of fewer than two, nor a group whose median rate is
// 0 (a stall, the stall deadline's business). Ranks of a synchronous job
// (DDP) move together at the slowest one's pace: their rates stay equal, and
// nothing is named (doc/stragglers.md says what that means).
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/workers/workers.hpp"

namespace shardnet::broker {

struct StragglerParams {
    double fraction = 0.5;        // slow: under fraction x the median rate (0: never)
    double window_seconds = 60;   // how long a rate is measured over
    int windows = 2;              // slow this many windows in a row: named
};

struct Straggler {
    std::string run, worker;      // the worker key NODE/STEP
    long long attempt = 0, job = 0;
    std::string cluster;
    double rate = 0, median = 0;  // steps per second, this window
    std::size_t peers = 0;        // workers judged in its group, itself included
};

class StragglerWatch {
public:
    explicit StragglerWatch(StragglerParams p) : p_(p) {}

    // One worker's state as of `now` (WorkerTable::for_each), then end().
    void see(const std::string &run, const std::string &worker, const WorkerState &w);
    // The window is over at `now`: the stragglers named now (each once while
    // it stays slow; named again only after a window at the group's pace).
    // Workers not seen since the last end() are forgotten.
    std::vector<Straggler> end(double now);

    std::size_t tracked() const { return samples_.size(); }

private:
    struct Sample {
        long long attempt = 0, step = -1;
        double time = 0;
        int slow = 0;        // windows in a row under the line
        bool named = false;  // said, and not at the group's pace since
        double step_time = 0;   // when the worker's step last advanced (its own report)
    };
    struct Seen {
        std::string run, worker;
        WorkerState state;
    };
    StragglerParams p_;
    std::unordered_map<std::string, Sample> samples_;   // key: run '\n' worker
    std::vector<Seen> seen_;
};

}  // namespace shardnet::broker
