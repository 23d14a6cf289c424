#include "sbatch-wrappers/launch_plan.hpp"

#include <algorithm>
#include <boost/json.hpp>

#include "common/parse_util.hpp"

namespace shardnet::cli {

namespace json = boost::json;

namespace {

bool has(const std::vector<std::string> &v, const std::string &x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

std::optional<Placement> place(const std::vector<std::string> &nodes, const std::string &batch_host, std::size_t world_nodes,
                               const std::vector<std::string> &dead) {
    std::vector<std::string> order;
    for (const auto &n : nodes)
        if (n != batch_host && !has(dead, n)) order.push_back(n);
    if (has(nodes, batch_host) && !has(dead, batch_host)) order.push_back(batch_host);
    if (world_nodes == 0 || order.size() < world_nodes) return std::nullopt;
    Placement p;
    p.active.assign(order.begin(), order.begin() + long(world_nodes));
    p.spares.assign(order.begin() + long(world_nodes), order.end());
    return p;
}

std::optional<Placement> replace(const Placement &p, const std::vector<std::string> &dead, std::vector<std::string> &took) {
    Placement out;
    std::vector<std::string> spares;
    for (const auto &s : p.spares)
        if (!has(dead, s)) spares.push_back(s);
    took.clear();
    std::size_t next = 0;
    for (const auto &n : p.active) {
        if (!has(dead, n)) { out.active.push_back(n); continue; }
        if (next >= spares.size()) return std::nullopt;
        took.push_back(spares[next]);
        out.active.push_back(spares[next++]);
    }
    out.spares.assign(spares.begin() + long(next), spares.end());
    return out;
}

namespace {

// The node an event of `kind` names for this attempt (evidence.node, a
// worker NODE/STEP or a node), when `also` holds of its evidence; or "".
template <class Also>
std::string node_of_event(const json::value &event, const char *kind_wanted, long long attempt, Also also) {
    if (!event.is_object()) return "";
    const auto &o = event.as_object();
    const auto *kind = o.if_contains("kind");
    const auto *ev = o.if_contains("evidence");
    if (!kind || !kind->is_string() || kind->as_string() != kind_wanted || !ev || !ev->is_object()) return "";
    const auto &e = ev->as_object();
    const auto *att = e.if_contains("attempt");
    const auto *node = e.if_contains("node");
    if (!also(e) || !att || !att->is_int64() || att->as_int64() != attempt || !node || !node->is_string()) return "";
    std::string n(node->as_string());
    n = n.substr(0, n.find('/'));   // a worker: NODE/STEP
    return shardnet::is_safe_name(n, 128) ? n : "";
}

}  // namespace

std::string dead_node_of(const json::value &event, long long attempt) {
    return node_of_event(event, "FAULT", attempt, [](const json::object &e) {
        const auto *failure = e.if_contains("node_failure");
        return failure && failure->is_bool() && failure->as_bool();
    });
}

std::string straggler_of(const json::value &event, long long attempt) {
    return node_of_event(event, "STRAGGLER", attempt, [](const json::object &) { return true; });
}

std::string sealed_of(const json::value &event) {
    if (!event.is_object()) return "";
    const auto &o = event.as_object();
    const auto *kind = o.if_contains("kind");
    const auto *ev = o.if_contains("evidence");
    if (!kind || !kind->is_string() || kind->as_string() != "SEALED" || !ev || !ev->is_object()) return "";
    const auto *c = ev->as_object().if_contains("checkpoint");
    if (!c || !c->is_string() || !shardnet::is_safe_name(std::string(c->as_string()), 128)) return "";
    return std::string(c->as_string());
}

std::string StormGuard::admit(const std::string &latest_seal) {
    if (first || latest_seal != last_seal) {
        first = false;
        stalled = 0;
        last_seal = latest_seal;
        return "";
    }
    if (++stalled <= max_stalled) return "";
    return "restart storm: " + std::to_string(stalled + 1) + " restarts in a row without a new sealed checkpoint (last: " +
           (latest_seal.empty() ? std::string("none") : latest_seal) + ")";
}

std::string joined(const std::vector<std::string> &v, char sep) {
    std::string s;
    for (const auto &x : v) s += (s.empty() ? "" : std::string(1, sep)) + x;
    return s;
}

}  // namespace shardnet::cli
