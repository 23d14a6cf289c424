// Nodes (store/node_store.cpp): Store::nodes(). Their descriptors as the
// probe posts them (inventory/nodes.cpp), and bad-node memory.
#pragma once
#include <string>
#include <vector>

#include "broker/store/store_part.hpp"

namespace shardnet::broker {

class NodeStore : StorePart {
public:
    explicit NodeStore(Store &store) : StorePart(store) {}

    void upsert_node(const std::string &host, const std::string &hash, const std::string &descriptor, double now);
    struct NodeRow { std::string host, hash, descriptor; double updated = 0; };
    std::vector<NodeRow> list_nodes(const std::string &host = "");
    // Bad-node memory (inventory/bad_nodes.cpp): one row per node fault.
    struct NodeFaultRow { std::string cluster, node; double time = 0; std::string run, cause; };
    void add_node_fault(const NodeFaultRow &r);
    std::vector<NodeFaultRow> node_faults(double since);   // by cluster, node, time
    long long clear_node_faults(const std::string &cluster, const std::string &node);
    void forget_node_faults(double before);
    long long node_fault_runs(const std::string &cluster, const std::string &node, double since);   // distinct runs
};

}  // namespace shardnet::broker
