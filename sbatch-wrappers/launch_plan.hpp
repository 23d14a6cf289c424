// `shard launch`'s decisions, pure and unit-tested (launch_cmd.cpp acts on
// them): which of the job's nodes run ranks and which wait as spares, what
// a broker event says about them, and when restarts have stopped paying.
#pragma once
#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shardnet::cli {

struct Placement {
    std::vector<std::string> active, spares;
};

// The job's nodes (Slurm's order) less the dead: the batch host last, so
// that it is a spare while there is another (its death ends the job in
// Slurm, whatever --no-kill says); world_nodes of them run ranks. nullopt
// when fewer than world_nodes are left.
std::optional<Placement> place(const std::vector<std::string> &nodes, const std::string &batch_host, std::size_t world_nodes,
                               const std::vector<std::string> &dead);

// After a death: the survivors keep their places, spares fill the dead
// nodes' ones. nullopt when the spares do not cover the dead.
std::optional<Placement> replace(const Placement &p, const std::vector<std::string> &dead, std::vector<std::string> &took);

// A broker event (GET /v1/runs/RUN/events), untrusted JSON: the node a
// FAULT of this attempt says died (Slurm confirmed: node_failure), or "".
std::string dead_node_of(const boost::json::value &event, long long attempt);
// The node a STRAGGLER event of this attempt names (its steps slower than
// its step's median, the broker's word: detector.straggler_*), or "".
std::string straggler_of(const boost::json::value &event, long long attempt);
// A SEALED event's checkpoint, or "".
std::string sealed_of(const boost::json::value &event);

// Restart storm: restarts that never advance the sealed checkpoint. Each
// restart notes the latest seal it saw; more than max_stalled restarts in
// a row without a new seal between them stop the supervisor.
struct StormGuard {
    int max_stalled = 1;
    int stalled = 0;
    std::string last_seal;
    bool first = true;
    // "" when this restart may go, else why not.
    std::string admit(const std::string &latest_seal);
};

// "a,b,c" from a list.
std::string joined(const std::vector<std::string> &v, char sep = ',');

}  // namespace shardnet::cli
