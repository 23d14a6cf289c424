// The stragglers module: once a straggler window (detector.straggler_*),
// on the detector's thread, the worker table's soft state is read into a
// StragglerWatch (straggler_watch.hpp); a node named there becomes a
// STRAGGLER event of its run (when the run still runs that attempt). The
// event is what `shard launch --straggler replace` swaps a node out on.
#pragma once
#include "broker/core/module.hpp"
#include "broker/detector/straggler_watch.hpp"

namespace shardnet::broker {

class Stragglers : Module {
public:
    explicit Stragglers(Core &core) : Module(core) {}
    // The detector's tick: a window's end reads every worker, else nothing.
    void tick(double now);

private:
    StragglerWatch watch_{StragglerParams{}};
    double next_ = 0;   // the current window's end
};

}  // namespace shardnet::broker
