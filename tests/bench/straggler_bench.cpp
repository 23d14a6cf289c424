// The straggler judgment's cost (broker/detector/straggler_watch.hpp): the
// worker table of 100,000 workers (100 runs of 1,000 nodes) read into a
// StragglerWatch once a window, as Stragglers::tick does on the detector's
// thread. Prints the time per window and per worker, and the samples kept.
//   make -C build/tests bench/straggler-bench && build/tests/bench/straggler-bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "broker/detector/straggler_watch.hpp"
#include "broker/workers/workers.hpp"

using namespace shardnet::broker;

int main() {
    constexpr int kWorkers = 100000, kWindows = 7;
    WorkerTable table(3, 600);
    StragglerWatch watch({0.5, 60, 2});
    auto beat_all = [&](int window) {
        for (int i = 0; i < kWorkers; ++i)
            table.beat("run" + std::to_string(i / 1000), "n" + std::to_string(i) + "/0", 1, 10, 8,
                       100 + 60LL * window * (i % 97 == 0 ? 1 : 4), false, 1000.0 + 60 * window);
    };
    double best = 1e9, sum = 0;
    std::size_t named = 0;
    for (int k = 0; k < kWindows; ++k) {
        beat_all(k);
        const auto a = std::chrono::steady_clock::now();
        table.for_each([&](const std::string &run, const std::string &worker, const WorkerState &w) { watch.see(run, worker, w); });
        named += watch.end(1000.0 + 60 * k).size();
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
        if (k > 0) best = std::min(best, ms), sum += ms;
    }
    std::printf("straggler windows, %d workers: best %.1f ms, mean %.1f ms per window (%.2f us per worker); %zu samples kept; "
                "%zu named (1 in 97 nodes at a quarter of the pace)\n",
                kWorkers, best, sum / (kWindows - 1), best * 1000 / kWorkers, watch.tracked(), named);
    return named == std::size_t(kWorkers / 97 + 1) ? 0 : 1;
}
