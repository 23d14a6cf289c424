// How often to checkpoint: the optimum interval between checkpoints from
// the time one takes to write (delta), the mean time to interruption (M)
// and the time a failure costs besides lost work (R: detect, place, start,
// restore). Exponential interarrival times, as both sources assume:
//
//   Young, J. W. (1974). "A first order approximation to the optimum
//   checkpoint interval". CACM 17(9): 530-531.        tau = sqrt(2 delta M)
//   Daly, J. T. (2006). "A higher order estimate of the optimum checkpoint
//   interval for restart dumps". FGCS 22(3): 303-312.
//     tau = sqrt(2 delta M) [1 + 1/3 sqrt(delta/2M) + (delta/2M)/9] - delta
//     for delta < 2M, else tau = M; and his complete model of the
//     expected wall time of T_s seconds of work:
//     T_w(tau) = M e^(R/M) (e^((tau + delta)/M) - 1) T_s / tau
//
// All times in seconds. Nothing here measures anything: the broker and the
// CLI give the inputs and say where each came from.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace shardnet::ckpt {

// Young's first-order interval.
double young_interval(double delta, double mtbf);
// Daly's higher-order interval (M itself when delta >= 2M).
double daly_interval(double delta, double mtbf);
// Daly's complete model: expected wall time of `work` seconds of compute
// when checkpointing every tau seconds of compute.
double expected_wall_time(double tau, double delta, double mtbf, double restart, double work);
// The expected fraction of wall time not spent on the work: checkpoint
// writes, recomputation and restarts (independent of the work's length in
// this model).
double expected_waste(double tau, double delta, double mtbf, double restart);
// The tau that minimises expected_wall_time, found by golden-section search
// from a millionth of min(delta, M) to 100 (M + delta) (the complete
// model's exact optimum; a check on Daly's formula). delta, M > 0.
double numeric_optimum(double delta, double mtbf, double restart);

// Durations as people write them: "90s", "5m", "1.5h", "2d", "24h",
// "300" (seconds). nullopt for anything else (negative, empty, a unit
// missing its number, trailing text). At most 10 years.
std::optional<double> parse_duration(std::string_view s);
// "41 s", "9.1 min", "6.1 h", "2.3 d": three significant digits.
std::string format_duration(double seconds);

// The site's bounds on an interval, and on how often it may change.
struct Bounds {
    double min_seconds = 60;          // never more often than this
    double max_seconds = 24 * 3600;   // never less often than this
    long long min_steps = 1;
    double hysteresis = 0.2;          // a new interval is taken when it differs by more than this fraction
};

// An interval in seconds as training steps, bounded: at least min_steps,
// at least min_seconds and at most max_seconds of steps.
long long interval_steps(double tau, double step_seconds, const Bounds &b);

// Whether a newly computed interval replaces the one in force: the first
// always; later ones only when they differ by more than the hysteresis,
// so that measurement noise does not make the trainer's interval flap.
bool should_change(std::optional<long long> current_steps, long long proposed_steps, const Bounds &b);

}  // namespace shardnet::ckpt
