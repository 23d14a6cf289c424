// What a module asks of what Service still owns: a run's state in the
// store (with what goes with a run's end), a FAULT raised, a requeue, a
// recovery put back. Service fills it in its constructor, before any
// module's thread starts; a module keeps a reference, never service.hpp.
#pragma once
#include <boost/json/object.hpp>
#include <functional>
#include <string>

#include "broker/runs/run_state.hpp"
#include "broker/workers/workers.hpp"

namespace shardnet::broker {

struct ServiceHooks {
    // The database's side of a run's state change (service_runs.cpp), inside
    // a store transaction, before memory changes; throws when it may not.
    std::function<void(const std::string &run, RunState to, long long attempt, double now)> store_state;
    // A confirmed FAULT written, then recovered by policy (service_faults.cpp).
    std::function<void(const Fault &fault, const std::string &cause, boost::json::object evidence, double now)> raise_fault;
    // Requeue-on-failure (recovery/requeue.cpp); local_only: no peer.
    std::function<void(const Fault &fault, int tries, bool local_only)> requeue;
    // A recovery handed to peers that ended nowhere: RECOVERING -> DEGRADED.
    std::function<void(const std::string &run)> back_to_degraded;
    // A decision was written for a peer: the forwarder sends it now.
    std::function<void()> forward_now;
    // A STRAGGLER this broker named (detector/stragglers.hpp) of the run's
    // attempt, taken by the swap it pays for: true once per event.
    std::function<bool(const std::string &run, long long attempt, const std::string &node)> take_straggler;
};

}  // namespace shardnet::broker
