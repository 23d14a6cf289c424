#include "broker/policy/estimate.hpp"

#include <algorithm>
#include <cmath>

namespace shardnet::broker::policy {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::optional<Measured> write_cost(const std::vector<double> &samples) {
    std::vector<double> ok;
    for (double s : samples)
        if (std::isfinite(s) && s >= 0) ok.push_back(s);
    if (ok.empty()) return std::nullopt;
    // A zero write time would make every interval zero: a millisecond is
    // as fast as the clocks behind it resolve.
    return Measured{std::max(median(ok), 1e-3), int(ok.size()), "measured"};
}

std::optional<Measured> step_time(const std::vector<Progress> &workers) {
    const Progress *best = nullptr;
    for (const auto &w : workers)
        if (w.first_step >= 0 && w.step - w.first_step >= 2 && w.time > w.first_time &&
            (!best || w.step - w.first_step > best->step - best->first_step))
            best = &w;
    if (!best) return std::nullopt;
    const long long steps = best->step - best->first_step;
    return Measured{(best->time - best->first_time) / double(steps), int(std::min<long long>(steps, 1 << 30)), "measured"};
}

Measured node_mtbf(double node_seconds, long long interruptions, double prior_seconds) {
    const double observed = std::max(node_seconds, 0.0);
    const long long n = std::max(interruptions, 0LL);
    Measured m{(prior_seconds + observed) / double(1 + n), int(std::min<long long>(n, 1 << 30)), n ? "measured+prior" : "prior"};
    return m;
}

std::vector<TierFigures> by_tier(const std::vector<Phases> &recoveries) {
    std::vector<TierFigures> out;
    for (const char *tier : {"same_cluster", "other_cluster", "peer"}) {
        TierFigures t{tier, 0, Phases{tier}};
        for (const auto &r : recoveries) {
            if (r.tier != tier) continue;
            ++t.n;
            t.mean.detect += r.detect, t.mean.place += r.place, t.mean.start += r.start, t.mean.restore += r.restore;
        }
        if (!t.n) continue;
        t.mean.detect /= t.n, t.mean.place /= t.n, t.mean.start /= t.n, t.mean.restore /= t.n;
        out.push_back(t);
    }
    return out;
}

Measured restart_cost(const std::vector<Phases> &recoveries, double prior_seconds) {
    if (recoveries.empty()) return Measured{prior_seconds, 0, "prior"};
    // The median: one run whose trainer took an hour to its first step (or
    // a peer's odd clock) does not set every run's R.
    std::vector<double> totals;
    for (const auto &r : recoveries) totals.push_back(r.total());
    return Measured{median(totals), int(recoveries.size()), "measured"};
}

std::optional<Result> compute(const Inputs &in, const ckpt::Bounds &bounds) {
    if (!in.write || !in.step || in.step->value <= 0) return std::nullopt;
    Result r;
    r.mtbf = in.node_mtbf.value / double(std::max(in.nodes, 1LL));
    const double delta = in.write->value;
    r.daly = ckpt::daly_interval(delta, r.mtbf);
    r.young = ckpt::young_interval(delta, r.mtbf);
    r.optimum = ckpt::numeric_optimum(delta, r.mtbf, in.restart.value);
    // At most 2^31 - 1 steps: what the agent and the trainer's library take.
    r.steps = std::min<long long>(ckpt::interval_steps(r.daly, in.step->value, bounds), 0x7fffffffLL);
    r.seconds = double(r.steps) * in.step->value;
    r.waste = ckpt::expected_waste(r.seconds, delta, r.mtbf, in.restart.value);
    return r;
}

bool worth_changing(std::optional<long long> current_steps, const Result &r, const Inputs &in, const ckpt::Bounds &bounds) {
    if (!current_steps) return true;
    if (!ckpt::should_change(current_steps, r.steps, bounds) || !in.write || !in.step) return false;
    const double now_waste = ckpt::expected_waste(double(*current_steps) * in.step->value, in.write->value, r.mtbf, in.restart.value);
    return now_waste > r.waste * (1 + kMinWasteGain);
}

std::string summary_line(const Result &r, const Inputs &in) {
    return "ckpt every " + std::to_string(r.steps) + " steps · Daly · M " + ckpt::format_duration(r.mtbf) + " · δ " +
           ckpt::format_duration(in.write ? in.write->value : 0);
}

}  // namespace shardnet::broker::policy
