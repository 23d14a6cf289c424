// What the checkpoint policy measures (store/policy_store.cpp;
// doc/checkpoint-policy.md): Store::policy().
#pragma once
#include <string>
#include <vector>

#include "broker/store/store_part.hpp"

namespace shardnet::broker {

class PolicyStore : StorePart {
public:
    explicit PolicyStore(Store &store) : StorePart(store) {}

    // The write times of the run's newest sealed checkpoints, newest first.
    std::vector<double> write_samples(const std::string &run, int limit);
    // Node-seconds of workers observed, and interruptions (an attempt's
    // first FAULT), per cluster; added to.
    void add_exposure(const std::string &cluster, double node_seconds, long long interruptions);
    struct ExposureRow { std::string cluster; double node_seconds = 0; long long interruptions = 0; };
    std::vector<ExposureRow> exposure();
    // One recovery's phases in seconds: detect (last heartbeat to FAULT),
    // place (FAULT to the new job), start (to RECOVERED), restore (to the
    // first new step). tier: same_cluster, other_cluster or peer.
    struct RecoveryRow {
        std::string run;
        long long attempt = 0;
        std::string tier;
        double detect = 0, place = 0, start = 0, restore = 0, at = 0;
    };
    void insert_recovery(const RecoveryRow &r);
    std::vector<RecoveryRow> recoveries(int limit);   // the newest first, every run
    // The interval in force for a run, with what it was computed from (JSON).
    struct PolicyRow { std::string run; long long version = 0, every_steps = 0; double seconds = 0; std::string detail; double updated = 0; };
    void upsert_policy(const PolicyRow &p);
    std::vector<PolicyRow> load_policies();
};

}  // namespace shardnet::broker
