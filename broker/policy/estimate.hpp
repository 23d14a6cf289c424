// The checkpoint policy's inputs as the broker measures them, and the
// interval they give (doc/checkpoint-policy.md). Pure functions: the
// service gathers the samples (store, worker table) and keeps the result.
//
//   delta  the slowest rank's "checkpointing" -> "committed" per sealed
//          checkpoint; the median of the run's newest seals
//   step   seconds per training step: a worker's progress since its first
//          reported step
//   M      a node's mean time between interruptions from the broker's own
//          history (node-seconds observed, interruptions confirmed) with
//          the site's prior weighing as one interruption, divided by the
//          run's node count
//   R      the median of the recoveries measured (detect + place + start +
//          restore), or the site's prior before the first
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "common/ckpt_model.hpp"

namespace shardnet::broker::policy {

// A value and where it came from: samples measured, or the site's prior.
struct Measured {
    double value = 0;
    int samples = 0;       // measurements behind it (0: the prior alone)
    std::string source;    // "measured", "prior", or "measured+prior"
};

// The median of v (not empty).
double median(std::vector<double> v);

// The run's write time from its seals' samples (newest first); none
// before the first measured seal.
std::optional<Measured> write_cost(const std::vector<double> &samples);

// A worker's progress: its first reported step and when, its latest and when.
struct Progress {
    long long first_step = -1, step = -1;
    double first_time = 0, time = 0;
};
// Seconds per step from the worker that progressed furthest (at least two
// steps); none before that.
std::optional<Measured> step_time(const std::vector<Progress> &workers);

// Gamma-Poisson estimate of a node's mean time between interruptions: a
// prior of one interruption in prior_seconds, plus what was observed.
Measured node_mtbf(double node_seconds, long long interruptions, double prior_seconds);

// One measured recovery, and the figures per tier.
struct Phases {
    std::string tier;   // same_cluster, other_cluster, peer
    double detect = 0, place = 0, start = 0, restore = 0;
    double total() const { return detect + place + start + restore; }
};
struct TierFigures {
    std::string tier;
    int n = 0;
    Phases mean;   // the phases' means over the tier's recoveries
};
// Every tier that has recoveries, in the order same_cluster, other_cluster, peer.
std::vector<TierFigures> by_tier(const std::vector<Phases> &recoveries);
Measured restart_cost(const std::vector<Phases> &recoveries, double prior_seconds);

struct Inputs {
    std::optional<Measured> write, step;
    Measured node_mtbf, restart;
    long long nodes = 1;
};
struct Result {
    double mtbf = 0;                      // the run's: a node's over the nodes
    double daly = 0, young = 0, optimum = 0, waste = 0;   // seconds of compute; waste a fraction
    double seconds = 0;                   // the interval in force: Daly's, as whole steps bounded
    long long steps = 0;
};
// The interval from the inputs; none while the write time or the step
// time is not measured yet.
std::optional<Result> compute(const Inputs &in, const ckpt::Bounds &bounds);

// Whether r's interval replaces the one in force (current_steps; none:
// the first always does): it must differ by more than the hysteresis, and
// the one in force must waste more, under today's inputs, than r's by more
// than kMinWasteGain of r's waste. Near the optimum the waste is flat: an
// interval 30% off costs a few tenths of a percent, and noisy measurements
// would otherwise make the trainer's interval flap between neighbours.
constexpr double kMinWasteGain = 0.02;
bool worth_changing(std::optional<long long> current_steps, const Result &r, const Inputs &in, const ckpt::Bounds &bounds);

// "ckpt every 480 steps · Daly · M 6.1 h · δ 41 s" (shard watch's line).
std::string summary_line(const Result &r, const Inputs &in);

}  // namespace shardnet::broker::policy
