#include "sbatch-wrappers/ckpt_plan.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "common/ckpt_model.hpp"
#include "common/ckpt_sim.hpp"

namespace shardnet::cli {

namespace json = boost::json;
using namespace shardnet::ckpt;

namespace {

constexpr int kOk = 0, kUsage = 2;

int usage_error(const std::string &msg) {
    std::fprintf(stderr, "shard: ckpt: %s\n", msg.c_str());
    return kUsage;
}

// A duration option: its seconds, or an error naming it.
std::optional<double> duration(const std::map<std::string, std::string> &opt, const char *key, bool required,
                               double positive_min, std::string &err) {
    auto it = opt.find(key);
    if (it == opt.end()) {
        if (required) err = std::string("--") + key + " is required (a duration: 90s, 5m, 6h, 2d)";
        return std::nullopt;
    }
    auto v = parse_duration(it->second);
    if (!v) err = std::string("--") + key + " " + it->second + ": not a duration (90s, 5m, 1.5h, 2d or seconds)";
    else if (*v < positive_min)
        err = std::string("--") + key + " " + it->second + (positive_min > 0 ? ": must be at least 1 ms" : ": must not be negative");
    else return v;
    return std::nullopt;
}

struct Inputs {
    double delta = 0, mtbf = 0, restart = 0;
    std::optional<double> work;
};

bool read_inputs(const std::map<std::string, std::string> &opt, Inputs &in, std::string &err) {
    auto d = duration(opt, "write-cost", true, 1e-3, err);
    if (!err.empty()) return false;
    auto m = duration(opt, "mtbf", true, 1e-3, err);
    if (!err.empty()) return false;
    auto r = duration(opt, "restart", true, 0, err);
    if (!err.empty()) return false;
    in.work = duration(opt, "work", false, 1e-3, err);
    if (!err.empty()) return false;
    in.delta = *d, in.mtbf = *m, in.restart = *r;
    // Where interruptions come so much faster than a checkpoint write or a
    // restart that the run would take over a million times its work, the
    // model's answer is "never" (and a simulation would not end): said so.
    const double ratio = expected_wall_time(daly_interval(in.delta, in.mtbf), in.delta, in.mtbf, in.restart, 1);
    if (!std::isfinite(ratio) || ratio > 1e6) {
        err = "with a mean time to interruption of " + format_duration(in.mtbf) + ", a checkpoint write of " +
              format_duration(in.delta) + " and a restart of " + format_duration(in.restart) +
              " the run would almost never finish (over a million times its work in wall time)";
        return false;
    }
    return true;
}

// Minutes with one decimal (as Daly's examples are given); under a minute, seconds.
std::string minutes(double s) {
    char b[32];
    if (s < 60) std::snprintf(b, sizeof b, "%.1f s", s);
    else std::snprintf(b, sizeof b, "%.1f min", s / 60);
    return b;
}

}  // namespace

int ckpt_plan(const std::map<std::string, std::string> &opt) {
    Inputs in;
    std::string err;
    if (!read_inputs(opt, in, err)) return usage_error("plan: " + err);
    const double daly = daly_interval(in.delta, in.mtbf), young = young_interval(in.delta, in.mtbf);
    const double best = numeric_optimum(in.delta, in.mtbf, in.restart);
    const double waste = expected_waste(daly, in.delta, in.mtbf, in.restart);
    const bool regime = in.delta >= 2 * in.mtbf;
    if (opt.count("json")) {
        json::object o{{"inputs", {{"write_cost_s", in.delta}, {"mtbf_s", in.mtbf}, {"restart_s", in.restart}}},
                       {"daly_s", daly}, {"young_s", young}, {"optimum_s", best}, {"expected_waste", waste},
                       {"method", regime ? "delta >= 2M: every M" : "Daly 2006"}};
        if (in.work) {
            o["inputs"].as_object()["work_s"] = *in.work;
            o["expected_wall_s"] = expected_wall_time(daly, in.delta, in.mtbf, in.restart, *in.work);
        }
        std::printf("%s\n", json::serialize(o).c_str());
        return kOk;
    }
    std::printf("inputs: write %s (delta) · mean time to interruption %s (M) · restart %s (R)\n", format_duration(in.delta).c_str(),
                format_duration(in.mtbf).c_str(), format_duration(in.restart).c_str());
    std::printf("checkpoint every %s of compute  (Daly 2006%s)\n", minutes(daly).c_str(), regime ? "; delta >= 2M: every M" : "");
    std::printf("  Young 1974 (first order): %s · complete model's optimum: %s\n", minutes(young).c_str(), minutes(best).c_str());
    std::printf("expected waste: %.1f%% of wall time (checkpoint writes, lost work, restarts)\n", 100 * waste);
    if (in.work) {
        const double wall = expected_wall_time(daly, in.delta, in.mtbf, in.restart, *in.work);
        std::printf("work %s: expected total %s (%.0f interruptions)\n", format_duration(*in.work).c_str(),
                    format_duration(wall).c_str(), wall / in.mtbf);
    }
    return kOk;
}

int ckpt_simulate(const std::map<std::string, std::string> &opt) {
    double shape = 1;
    if (auto it = opt.find("weibull-shape"); it != opt.end()) {
        char *end = nullptr;
        shape = std::strtod(it->second.c_str(), &end);
        if (!end || *end || !(shape >= 0.2 && shape <= 5))
            return usage_error("simulate: --weibull-shape " + it->second + ": expected a number from 0.2 to 5");
    }
    std::uint64_t seed = 1;
    if (auto it = opt.find("seed"); it != opt.end()) {
        const std::string &v = it->second;
        if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
            return usage_error("simulate: --seed " + v + ": expected a whole number");
        seed = std::stoull(v);
    }
    if (opt.count("grid"))
        for (const char *k : {"write-cost", "mtbf", "restart", "work"})
            if (opt.count(k)) return usage_error(std::string("simulate: --grid takes its own inputs; --") + k + " goes without it");
    struct Point { double delta, mtbf, restart; };
    std::vector<Point> points;
    if (opt.count("grid")) {
        // delta 10 s .. 30 min, M 15 min .. 2 weeks, R 1 .. 30 min: 7 x 8 x 3 = 168 points.
        for (double d : {10.0, 30.0, 60.0, 180.0, 300.0, 900.0, 1800.0})
            for (double m : {900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0, 3 * 86400.0, 7 * 86400.0, 14 * 86400.0})
                for (double r : {60.0, 600.0, 1800.0}) points.push_back({d, m, r});
    } else {
        Inputs in;
        std::string err;
        if (!read_inputs(opt, in, err)) return usage_error("simulate: " + err + " (or --grid)");
        points.push_back({in.delta, in.mtbf, in.restart});
    }
    const bool as_json = opt.count("json") > 0;
    json::array rows;
    double worst = -1;
    Point worst_at{};
    if (!as_json)
        std::printf("%9s %9s %9s %11s %9s %11s %9s %8s\n", "delta", "M", "R", "Daly", "waste", "sim. best", "waste", "excess");
    for (const auto &p : points) {
        SimInputs s{p.delta, p.mtbf, p.restart, shape, 0, seed};
        const double tau = daly_interval(p.delta, p.mtbf);
        const double w = simulated_waste(s, tau);
        const SimOptimum best = simulated_optimum(s, tau);
        const double excess = best.waste > 0 ? w / best.waste - 1 : 0;
        if (excess > worst) worst = excess, worst_at = p;
        if (as_json)
            rows.push_back(json::object{{"write_cost_s", p.delta}, {"mtbf_s", p.mtbf}, {"restart_s", p.restart}, {"daly_s", tau},
                                        {"waste", w}, {"best_s", best.tau}, {"best_waste", best.waste}, {"excess", excess}});
        else
            std::printf("%9s %9s %9s %11s %8.3f%% %11s %8.3f%% %7.3f%%\n", format_duration(p.delta).c_str(), format_duration(p.mtbf).c_str(),
                        format_duration(p.restart).c_str(), format_duration(tau).c_str(), 100 * w, format_duration(best.tau).c_str(),
                        100 * best.waste, 100 * excess);
    }
    if (as_json) {
        std::printf("%s\n", json::serialize(json::object{{"weibull_shape", shape}, {"points", rows}, {"worst_excess", worst}}).c_str());
    } else {
        std::printf("%zu point(s), failures %s; worst: Daly's interval wastes %.3f%% more than the simulated optimum "
                    "(delta %s, M %s, R %s)\n", points.size(), shape == 1 ? "exponential" : ("Weibull k=" + std::to_string(shape)).c_str(),
                    100 * worst, format_duration(worst_at.delta).c_str(), format_duration(worst_at.mtbf).c_str(),
                    format_duration(worst_at.restart).c_str());
    }
    return kOk;
}

}  // namespace shardnet::cli
