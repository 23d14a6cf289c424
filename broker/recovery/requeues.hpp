// Requeue-on-failure (requeue.cpp): a confirmed FAULT becomes a durable
// decision keyed by the run's next attempt, placed on this broker's
// clusters or handed to a peer, and the new attempt submitted; RECOVERED
// once the new attempt's nodes all heartbeat. Given the modules it asks:
// Attempts (specs, submission), Receipts, Inventory (offers), and what it
// asks of Service (ServiceHooks: a run's state in the store, the forwarder
// woken for a peer's decision).
#pragma once
#include <string>

#include "broker/core/hooks.hpp"
#include "broker/core/module.hpp"
#include "broker/workers/workers.hpp"

namespace shardnet::broker {

class Attempts;
class Receipts;
class Inventory;

class Requeues : Module {
public:
    Requeues(Core &core, const ServiceHooks &hooks, Attempts &attempts, Receipts &receipts, Inventory &inventory)
        : Module(core), hooks_(hooks), attempts_(attempts), receipts_(receipts), inventory_(inventory) {}
    // The same cluster without the failed node, else another local
    // cluster, else a peer. local_only: no peer (every peer refused): this
    // broker's clusters, their queues included. On the Slurm thread.
    void requeue(const Fault &fault, int tries = 0, bool local_only = false);
    // A requeue with no place is tried again every kUnplacedEvery seconds
    // for kUnplacedFor seconds from its decision (a restart included).
    static constexpr int kUnplacedEvery = 30, kUnplacedFor = 3600;
    // A heartbeat of a recovering run's new attempt: RECOVERED once all its
    // nodes report.
    void check_recovered(const std::string &run, long long attempt, double now);

private:
    struct Requeue;   // one requeue, step by step
    const ServiceHooks &hooks_;
    Attempts &attempts_;
    Receipts &receipts_;
    Inventory &inventory_;
};

}  // namespace shardnet::broker
