// Witnessing the peers' logs (federation/witness.hpp holds the check): a
// round asks each peer for its head and keys, holds the head to the one
// kept, and keeps it (or the conflict); GET /v1/witness shows what was
// witnessed, to anyone with a token (heads name no run). One round at a
// time, on the query pool (it waits on the peers).
#pragma once
#include <atomic>

#include "broker/core/module.hpp"

namespace shardnet::broker {

class Witnesses : Module {
public:
    explicit Witnesses(Core &core) : Module(core) {}
    // The forwarder's tick: a round on the query pool, unless one is under way.
    void start_round();
    // One look at every peer's log head: kept when it extends the one
    // witnessed before, else the conflict. Blocks on the peers; public for tests.
    void round(double now);
    // GET /v1/witness.
    void get(const Reply &reply);

private:
    std::atomic<bool> busy_{false};
};

}  // namespace shardnet::broker
