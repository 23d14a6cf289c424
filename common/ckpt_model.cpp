#include "common/ckpt_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace shardnet::ckpt {

double young_interval(double delta, double mtbf) { return std::sqrt(2 * delta * mtbf); }

double daly_interval(double delta, double mtbf) {
    if (delta >= 2 * mtbf) return mtbf;
    const double x = delta / (2 * mtbf);
    return std::sqrt(2 * delta * mtbf) * (1 + std::sqrt(x) / 3 + x / 9) - delta;
}

double expected_wall_time(double tau, double delta, double mtbf, double restart, double work) {
    return mtbf * std::exp(restart / mtbf) * std::expm1((tau + delta) / mtbf) * work / tau;
}

double expected_waste(double tau, double delta, double mtbf, double restart) {
    return 1 - 1 / expected_wall_time(tau, delta, mtbf, restart, 1);
}

double numeric_optimum(double delta, double mtbf, double restart) {
    // T_w / T_s = M e^(R/M) (e^((tau+delta)/M) - 1) / tau is convex in tau
    // > 0 (R only scales it): golden section on a log scale of tau.
    double lo = std::log(1e-6 * std::min(delta, mtbf)), hi = std::log(100 * (mtbf + delta));
    const double g = (std::sqrt(5.0) - 1) / 2;
    auto f = [&](double lt) { return expected_wall_time(std::exp(lt), delta, mtbf, restart, 1); };
    double a = hi - g * (hi - lo), b = lo + g * (hi - lo), fa = f(a), fb = f(b);
    for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
        if (fa < fb) { hi = b; b = a; fb = fa; a = hi - g * (hi - lo); fa = f(a); }
        else { lo = a; a = b; fa = fb; b = lo + g * (hi - lo); fb = f(b); }
    }
    return std::exp((lo + hi) / 2);
}

std::optional<double> parse_duration(std::string_view s) {
    if (s.empty() || s.size() > 32) return std::nullopt;
    std::size_t i = 0;
    bool digits = false, dot = false;
    for (; i < s.size(); ++i) {
        if (s[i] >= '0' && s[i] <= '9') digits = true;
        else if (s[i] == '.' && !dot) dot = true;
        else break;
    }
    if (!digits) return std::nullopt;
    const double v = std::strtod(std::string(s.substr(0, i)).c_str(), nullptr);
    const std::string_view unit = s.substr(i);
    double scale;
    if (unit.empty() || unit == "s") scale = 1;
    else if (unit == "m" || unit == "min") scale = 60;
    else if (unit == "h") scale = 3600;
    else if (unit == "d") scale = 86400;
    else return std::nullopt;
    const double secs = v * scale;
    if (!std::isfinite(secs) || secs > 10 * 365.25 * 86400) return std::nullopt;
    return secs;
}

std::string format_duration(double seconds) {
    char buf[32];
    auto fmt = [&](double v, const char *unit) {
        std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, unit);
        return std::string(buf);
    };
    if (seconds < 120) return fmt(seconds, "s");
    if (seconds < 2 * 3600) return fmt(seconds / 60, "min");
    if (seconds < 2 * 86400) return fmt(seconds / 3600, "h");
    return fmt(seconds / 86400, "d");
}

long long interval_steps(double tau, double step_seconds, const Bounds &b) {
    if (!std::isfinite(tau)) tau = b.max_seconds;
    const double t = std::clamp(tau, b.min_seconds, std::max(b.min_seconds, b.max_seconds));
    if (!(step_seconds > 0)) return b.min_steps;
    const double steps = std::round(t / step_seconds);
    // Never above max_seconds' worth, never below min_steps.
    const double most = std::max(1.0, std::floor(b.max_seconds / step_seconds));
    return std::max<long long>(b.min_steps, (long long)std::min({steps, most, 1e15}));
}

bool should_change(std::optional<long long> current_steps, long long proposed_steps, const Bounds &b) {
    if (!current_steps || *current_steps <= 0) return true;
    const double rel = std::fabs(double(proposed_steps - *current_steps)) / double(*current_steps);
    return rel > b.hysteresis;
}

}  // namespace shardnet::ckpt
