// The checkpoint policy module (doc/checkpoint-policy.md): for runs with
// --shardnet-ckpt-every=auto, what is measured (write time per seal, step
// time, node exposure, each recovery's phases), the interval computed from
// it (policy/estimate.hpp), and GET /v1/runs/{id}/policy.
#pragma once
#include <string>
#include <vector>

#include "broker/core/module.hpp"

namespace shardnet::broker {

class Policy : Module {
public:
    explicit Policy(Core &core) : Module(core) {}

    // Checkpoint policy (policy/policy.cpp): GET /v1/runs/{id}/policy, and
    // on the store thread at every summary: exposure, recoveries' first
    // steps, and each auto run's interval, recomputed.
    void get_policy(const std::string &id, const TokenEntry &who, const Reply &reply);
    struct WorkerSummary { std::string run, node; WorkerState w; };
    void measure_policies(const std::vector<WorkerSummary> &workers, double now);
    struct PolicyPass;   // one summary's pass, step by step (policy/policy.cpp)
    void load_policies();
private:
    double exposure_at_ = 0;   // store thread: when node-seconds were last counted
};

}  // namespace shardnet::broker
