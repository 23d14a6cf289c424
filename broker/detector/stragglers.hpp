// The stragglers module: once a straggler window (detector.straggler_*),
// on the detector's thread, the worker table's soft state is read into a
// StragglerWatch (straggler_watch.hpp); a node named there becomes a
// STRAGGLER event of its run (when the run still runs that attempt). The
// event is what `shard launch --straggler replace` swaps a node out on.
#pragma once
#include <mutex>
#include <set>
#include <string>

#include "broker/core/module.hpp"
#include "broker/detector/straggler_watch.hpp"

namespace shardnet::broker {

class Stragglers : Module {
public:
    explicit Stragglers(Core &core)
        : Module(core), params_{cfg_.straggler_fraction, double(cfg_.straggler_window_seconds), cfg_.straggler_windows}, watch_(params_) {}
    // The detector's tick: a window's end reads every worker, else nothing.
    void tick(double now);
    // A straggler named since the broker started, not yet swapped out:
    // taken (true) once (ServiceHooks::take_straggler).
    bool take(const std::string &run, long long attempt, const std::string &node);

private:
    std::mutex named_mu_;
    std::set<std::string> named_;   // run '\n' attempt '\n' node, written once its event is
    static std::string key(const std::string &run, long long attempt, const std::string &node) {
        return run + '\n' + std::to_string(attempt) + '\n' + node;
    }
    const StragglerParams params_;   // detector.straggler_* (a reload does not change them)
    StragglerWatch watch_;
    double next_ = 0;   // the current window's end
};

}  // namespace shardnet::broker
