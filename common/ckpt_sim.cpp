#include "common/ckpt_sim.hpp"

#include <cmath>
#include <random>

namespace shardnet::ckpt {

double simulated_waste(const SimInputs &in, double tau) {
    const double work = in.work > 0 ? in.work : 20000 * in.mtbf;
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
    while (done < work) {
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
        for (life = lifetime(); life < in.restart; life = lifetime()) wall += life;
        wall += in.restart;
        life -= in.restart;
    }
    return 1 - work / wall;
}

SimOptimum simulated_optimum(const SimInputs &in, double around) {
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
