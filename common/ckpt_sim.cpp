#include "common/ckpt_sim.hpp"

#include <cmath>
#include <random>

#include "common/ckpt_model.hpp"

namespace shardnet::ckpt {

namespace {
// Work whose run sees about 20000 failures (Daly's model for the expected
// wall time): the simulation's cost follows the failures, and a run that
// mostly fails is simulated as long as an efficient one. 0: the model says
// the run would (nearly) never end.
double work_for(const SimInputs &in, double tau) {
    const double wall_per_work = expected_wall_time(tau, in.delta, in.mtbf, in.restart, 1);
    if (!std::isfinite(wall_per_work) || wall_per_work > 1e6) return 0;
    return 20000 * in.mtbf / wall_per_work;
}
}  // namespace

double simulated_waste(const SimInputs &in, double tau) {
    const double work = in.work > 0 ? in.work : work_for(in, tau);
    if (!(work > 0) || !(tau > 0)) return 1;
    // Weibull with mean M: scale M / Gamma(1 + 1/k).
    const double k = in.weibull_shape, scale = in.mtbf / std::tgamma(1 + 1 / k);
    std::mt19937_64 rng(in.seed);
    std::uniform_real_distribution<double> u(0, 1);
    auto lifetime = [&] {
        const double x = -std::log1p(-u(rng));   // Exp(1)
        return k == 1 ? in.mtbf * x : scale * std::pow(x, 1 / k);
    };
    const double segment = tau + in.delta;   // compute, then its checkpoint
    double wall = 0, done = 0, life = lifetime();
    // Where failures come much faster than a segment or a restart takes,
    // the run (nearly) never ends: a bounded number of draws, then "all
    // waste" rather than a loop without end.
    long long draws = 0;
    constexpr long long kMaxDraws = 20'000'000;
    while (done < work) {
        if (++draws > kMaxDraws) return 1;
        const double left = work - done;
        const double need_segments = std::ceil(left / tau - 1e-12);
        // Whole segments that end before the next failure, at once: the
        // cost of a simulation follows the failures, not the checkpoints.
        const double fit = std::floor(life / segment);
        if (fit >= need_segments) {   // the run ends before this failure
            wall += (need_segments - 1) * segment + (left - (need_segments - 1) * tau) + in.delta;
            break;
        }
        done += fit * tau;
        wall += life;   // up to the failure; the segment in progress is lost
        // Restart: a failure during it starts it again.
        for (life = lifetime(); life < in.restart; life = lifetime()) {
            wall += life;
            if (++draws > kMaxDraws) return 1;
        }
        wall += in.restart;
        life -= in.restart;
    }
    return 1 - work / wall;
}

SimOptimum simulated_optimum(const SimInputs &given, double around) {
    SimInputs in = given;
    if (!(in.work > 0)) in.work = work_for(in, around);   // the same work (and draws) for every tau
    if (!(in.work > 0)) return SimOptimum{around, 1};
    SimOptimum best{around, simulated_waste(in, around)};
    for (int i = -120; i <= 200; ++i) {
        // 1% steps from 0.3x to 1.0x below, up to 3x above.
        const double m = i < 0 ? 1 + i * (0.7 / 120) : 1 + i * 0.01;
        if (i == 0) continue;
        const double tau = around * m;
        const double w = simulated_waste(in, tau);
        if (w < best.waste) best = SimOptimum{tau, w};
    }
    return best;
}

}  // namespace shardnet::ckpt
