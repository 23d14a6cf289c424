// A discrete-event simulation of a run that checkpoints every tau seconds
// of compute: failures drawn from an exponential or a Weibull distribution
// (a renewal process: each failure's replacement starts a fresh lifetime),
// each one losing the work since the last complete checkpoint and costing
// the restart time R, during which failures can strike again (as in Daly's
// model). It checks the formulas of ckpt_model against what they model,
// and shows what Weibull's clustering of early failures changes.
#pragma once
#include <cstdint>
#include <vector>

namespace shardnet::ckpt {

struct SimInputs {
    double delta = 0, mtbf = 0, restart = 0;
    double weibull_shape = 1;   // 1: exponential; < 1: failures come early and in clusters
    double work = 0;            // seconds of compute; 0: as much as sees about 20000 failures
    std::uint64_t seed = 1;
};

// The fraction of wall time not spent on the work, for an interval tau
// (1 when the run would take more than 20 million failures to finish).
// The same seed draws the same failure times for every tau (common random
// numbers), so that intervals compare with little noise.
double simulated_waste(const SimInputs &in, double tau);

struct SimOptimum {
    double tau = 0, waste = 0;
};
// The best tau by search over a grid of multiples of `around` (0.3x to
// 3x, finer near 1x), each simulated with the same draws.
SimOptimum simulated_optimum(const SimInputs &in, double around);

}  // namespace shardnet::ckpt
