// The store's side of nodes: their descriptors (inventory/nodes.cpp), and
// bad-node memory (inventory/bad_nodes.cpp): each node fault a run saw,
// with its cause and time (migration 13), so that the broker remembers
// across runs, jobs and its own restarts.
#include <sqlite3.h>

#include "broker/store/node_store.hpp"
#include "broker/store/sql.hpp"

namespace shardnet::broker {

using namespace sql;

namespace sql {

std::span<const Sql> node_statements() {
    static const Sql table[] = {
        {"upsert_node", "INSERT INTO nodes (host, hash, descriptor, updated) VALUES (?,?,?,?) "
                        "ON CONFLICT (host) DO UPDATE SET hash = excluded.hash, descriptor = excluded.descriptor, updated = excluded.updated"},
        {"list_nodes", "SELECT host, hash, descriptor, updated FROM nodes WHERE ?1 = '' OR host = ?1 ORDER BY host"},
        {"add_node_fault", "INSERT INTO node_faults (cluster, node, time, run, cause) VALUES (?,?,?,?,?)"},
        {"node_faults", "SELECT cluster, node, time, run, cause FROM node_faults WHERE time >= ? ORDER BY cluster, node, time"},
        {"clear_node_faults", "DELETE FROM node_faults WHERE cluster = ? AND node = ?"},
        {"forget_node_faults", "DELETE FROM node_faults WHERE time < ?"},
        {"node_fault_runs", "SELECT COUNT(DISTINCT run) FROM node_faults WHERE cluster = ? AND node = ? AND time >= ?"},
    };
    return table;
}

}  // namespace sql

void NodeStore::upsert_node(const std::string &host, const std::string &hash, const std::string &descriptor, double now) {
    auto *s = stmt("upsert_node");
    Done done{s};
    Binder(s).text(host).text(hash).text(descriptor).real(now);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing node " + host, rc);
}

std::vector<NodeStore::NodeRow> NodeStore::list_nodes(const std::string &host) {
    auto *s = stmt("list_nodes");
    Done done{s};
    Binder(s).text(host);
    std::vector<NodeRow> out;
    while (row(s))
        out.push_back(NodeRow{col_text(s, 0), col_text(s, 1), col_text(s, 2), sqlite3_column_double(s, 3)});
    return out;
}

void NodeStore::add_node_fault(const NodeFaultRow &r) {
    auto *s = stmt("add_node_fault");
    Done done{s};
    Binder(s).text(r.cluster).text(r.node).real(r.time).text(r.run).text(r.cause);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing a node's fault", rc);
}

std::vector<NodeStore::NodeFaultRow> NodeStore::node_faults(double since) {
    auto *s = stmt("node_faults");
    Done done{s};
    Binder(s).real(since);
    std::vector<NodeFaultRow> out;
    while (row(s)) out.push_back(NodeFaultRow{col_text(s, 0), col_text(s, 1), sqlite3_column_double(s, 2), col_text(s, 3), col_text(s, 4)});
    return out;
}

long long NodeStore::clear_node_faults(const std::string &cluster, const std::string &node) {
    auto *s = stmt("clear_node_faults");
    Done done{s};
    Binder(s).text(cluster).text(node);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("clearing a node's faults", rc);
    return sqlite3_changes64(db());
}

long long NodeStore::node_fault_runs(const std::string &cluster, const std::string &node, double since) {
    auto *s = stmt("node_fault_runs");
    Done done{s};
    Binder(s).text(cluster).text(node).real(since);
    return row(s) ? sqlite3_column_int64(s, 0) : 0;
}

void NodeStore::forget_node_faults(double before) {
    auto *s = stmt("forget_node_faults");
    Done done{s};
    Binder(s).real(before);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("forgetting old node faults", rc);
}

}  // namespace shardnet::broker
