// Bad-node memory. A node that faulted a run (Slurm or its slurmd said it
// was down) is left out of every placement for detector.quarantine_seconds,
// whichever run asks, and the broker remembers it across its restarts: each
// fault is a row (store/node_store.cpp). After drain_faults faults
// within drain_window_seconds the broker drains the node in Slurm, with a
// reason that says so (detector.drain_bad_nodes, off by default). Admins
// list the memory and clear a node from it (GET /v1/bad-nodes,
// POST /v1/bad-nodes/{cluster}/{node}/clear, `shard nodes`).
#include <boost/json.hpp>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

#include "broker/core/api_util.hpp"
#include "broker/inventory/inventory_module.hpp"
#include "broker/slurm/slurm_view.hpp"
#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {
constexpr double kKeptSeconds = 30 * 86400.0;   // how long a fault stays listed

// A drain reason Slurm prints as given: printable, short, no quotes.
std::string reason_text(const std::string &s) {
    std::string out;
    for (char c : s) {
        if (out.size() >= 150) break;
        out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '"' || c == '\'') ? ' ' : c;
    }
    return out;
}
}  // namespace

void Inventory::quarantine(const std::string &cluster, const std::string &node, double now, const std::string &run, const std::string &cause) {
    // Only a plain Slurm node name is remembered (a job names its workers' nodes).
    if (!is_safe_name(cluster, 128) || !is_safe_name(node, 128)) return;
    const std::string key = cluster + "/" + node;
    {
        std::lock_guard<std::mutex> lock(quarantine_mu_);
        // Bounded: a node is put here only when Slurm or its slurmd says it is
        // down, but the name comes with a job's heartbeat.
        if (cfg_.quarantine_seconds > 0 && (quarantine_.size() < 100000 || quarantine_.count(key))) quarantine_[key] = now + cfg_.quarantine_seconds;
        // One death is one fault, however many of the run's workers (the
        // batch script, each step) were on the node.
        if (last_fault_.size() >= 100000 && !last_fault_.count(key)) last_fault_.clear();
        auto &last = last_fault_[key];
        if (last.first == run && now - last.second < 600) return;
        last = {run, now};
    }
    on_store([this, row = Store::NodeFaultRow{cluster, node, now, run, cause.substr(0, 500)}] {
        long long recent = 0;
        try {
            transact([&] { store_->nodes().add_node_fault(row); });
            if (!cfg_.drain_bad_nodes) return;
            // Faults of distinct runs: one run's death of a node counts once,
            // a broker restart's second look at it too.
            recent = store_->nodes().node_fault_runs(row.cluster, row.node, row.time - cfg_.drain_window_seconds);
        } catch (const std::exception &e) {
            log_warn("node fault not remembered: the store refused it", row.run, row.cluster + "/" + row.node + ": " + e.what());
            return;
        }
        if (recent < cfg_.drain_faults || !cfg_.clusters.count(row.cluster)) return;
        post_guarded(slurm_thread_, "drain a bad node", [this, row, recent] {
            // Slurm's own word first: a node it does not know, or has drained
            // already (an admin's reason stands), is left alone.
            std::string shown;
            if (slurm_->fresh(cfg_.clusters.at(row.cluster), {"scontrol", "-o", "show", "node", row.node}, shown) != 0 ||
                scontrol_field(shown, "NodeName") != row.node || scontrol_field(shown, "State").find("DRAIN") != std::string::npos)
                return;
            const std::string reason = reason_text("shardnet: " + std::to_string(recent) + " faults in " +
                                                   std::to_string(cfg_.drain_window_seconds) + " s; last: " + row.cause);
            std::string out;
            const int rc = slurm_->change(cfg_.clusters.at(row.cluster), {"scontrol", "update", "nodename=" + row.node, "state=drain",
                                                                          "reason=" + reason}, out);
            log_json(rc == 0 ? "warn" : "error", rc == 0 ? "bad node drained" : "bad node not drained",
                     json::object{{"cluster", row.cluster}, {"node", row.node}, {"faults", recent}, {"reason", reason},
                                  {"slurm", out.substr(0, 300)}});
        });
    });
}

namespace {
constexpr double kRecheckSeconds = 5;     // the broker's own observation asked of Slurm again
constexpr double kGiveUpAfter = 60;       // past SlurmdTimeout: Slurm has had its say (it sets DOWN itself then)
constexpr std::size_t kMaxSuspected = 100000;   // nodes watched per cluster

// SlurmdTimeout from `scontrol show config` ("SlurmdTimeout = 10 sec"); Slurm's default 300.
double slurmd_timeout(const std::string &show_config) {
    const auto at = show_config.find("SlurmdTimeout");
    if (at == std::string::npos) return 300;
    const auto eq = show_config.find('=', at);
    if (eq == std::string::npos) return 300;
    const long long n = std::atoll(show_config.c_str() + eq + 1);
    return n > 0 && n < 86400 ? double(n) : 300;
}
}  // namespace

void Inventory::seen_down(const std::string &cluster, const std::string &node, double now, const std::string &run,
                          const std::string &cause, const std::string &slurm_state) {
    if (node_dead_in_slurm(slurm_state)) return quarantine(cluster, node, now, run, cause);
    if (!cfg_.clusters.count(cluster) || !is_safe_name(node, 128)) return;
    bool first = false;
    {
        std::lock_guard<std::mutex> lock(quarantine_mu_);
        auto &nodes = suspected_[cluster];
        // Bounded: a cluster's nodes, at most. One already watched keeps its count.
        if (nodes.size() >= kMaxSuspected && !nodes.count(node)) return;
        first = nodes.empty();
        // A new sighting watches it for another SlurmdTimeout and a minute:
        // a real death seen late in an earlier watch is still judged whole.
        auto &sus = nodes.try_emplace(node, Suspected{run, cause, 0, {}}).first->second;
        sus.runs.insert(run);
        sus.looks = 0;
    }
    log_json("info", "a node seen down by the broker only: held for other runs once Slurm says so",
             json::object{{"cluster", cluster}, {"node", node}, {"run", run}, {"slurm_state", valid_utf8(slurm_state)}});
    if (first) confirm_down(cluster);
}

void Inventory::confirm_down(const std::string &cluster) {
    // One look at the cluster's nodes every kRecheckSeconds while any is
    // suspected, whatever their number: the Slurm thread is never kept
    // busy by many. Time is counted in looks, kRecheckSeconds apart at
    // least (a late tick only makes it longer), the same on a busy host
    // and in a test that runs the clock ahead.
    retry_once("nodes-down:" + cluster, kRecheckSeconds, "nodes' deaths confirmed with Slurm", [this, cluster] {
        post_guarded(slurm_thread_, "nodes' deaths confirmed with Slurm", [this, cluster] {
            const std::string &conf = cfg_.clusters.at(cluster);
            std::string shown, config;
            slurm_->query(conf, {"scontrol", "show", "config"}, config);
            const double limit = slurmd_timeout(config);
            std::map<std::string, std::string> states;
            if (slurm_->fresh(conf, {"scontrol", "-o", "show", "node"}, shown) == 0) {
                std::istringstream lines(shown);
                for (std::string line; std::getline(lines, line);)
                    if (std::string n = scontrol_field(line, "NodeName"); !n.empty()) states[n] = scontrol_field(line, "State");
            }
            std::vector<std::pair<std::string, Suspected>> dead;
            bool more = false;
            {
                std::lock_guard<std::mutex> lock(quarantine_mu_);
                auto &nodes = suspected_[cluster];
                for (auto it = nodes.begin(); it != nodes.end();) {
                    const auto st = states.find(it->first);
                    const double waited = ++it->second.looks * kRecheckSeconds;
                    if (st != states.end() && node_dead_in_slurm(st->second)) {
                        dead.emplace_back(it->first, it->second);
                        dead.back().second.cause += "; Slurm says " + st->second;
                        it = nodes.erase(it);
                    } else if (waited >= limit + kGiveUpAfter) {
                        log_json("info", "a node seen down by the broker only is not held: Slurm did not call it dead",
                                 json::object{{"cluster", cluster}, {"node", it->first}, {"run", it->second.run},
                                              {"slurm_state", st == states.end() ? "" : valid_utf8(st->second)}});
                        it = nodes.erase(it);
                    } else {
                        ++it;
                    }
                }
                more = !nodes.empty();
                if (!more) suspected_.erase(cluster);
            }
            for (const auto &[node, sus] : dead) quarantine(cluster, node, wall_now(), sus.run, sus.cause);
            if (more) confirm_down(cluster);
        });
    });
}

void Inventory::load_bad_nodes(double now) {
    store_->nodes().forget_node_faults(now - kKeptSeconds);
    if (cfg_.quarantine_seconds <= 0) return;
    std::lock_guard<std::mutex> lock(quarantine_mu_);
    for (const auto &f : store_->nodes().node_faults(now - cfg_.quarantine_seconds)) {
        double &until = quarantine_[f.cluster + "/" + f.node];
        until = std::max(until, f.time + cfg_.quarantine_seconds);
    }
}

void Inventory::list_bad_nodes(const Reply &reply) {
    on_store(reply, [this](const Reply &reply) {
        const double now = wall_now();
        std::map<std::pair<std::string, std::string>, json::object> nodes;
        for (const auto &f : store_->nodes().node_faults(now - kKeptSeconds)) {
            auto &o = nodes[{f.cluster, f.node}];
            const long long n = o.contains("faults") ? o["faults"].as_int64() + 1 : 1;
            const long long recent = (o.contains("recent_faults") ? o["recent_faults"].as_int64() : 0) +
                                     (f.time >= now - cfg_.drain_window_seconds ? 1 : 0);
            o = json::object{{"cluster", f.cluster}, {"node", f.node}, {"faults", n}, {"last", f.time}, {"last_run", f.run},
                             {"last_cause", f.cause}, {"recent_faults", recent}};
        }
        json::array out;
        std::lock_guard<std::mutex> lock(quarantine_mu_);
        for (auto &[key, o] : nodes) {
            auto it = quarantine_.find(key.first + "/" + key.second);
            const bool held = it != quarantine_.end() && it->second > now;
            o["held"] = held;
            if (held) o["held_until"] = it->second;
            out.push_back(std::move(o));
        }
        reply(ok_json(200, json::object{{"nodes", std::move(out)}, {"quarantine_seconds", cfg_.quarantine_seconds},
                                        {"drain_bad_nodes", cfg_.drain_bad_nodes}, {"drain_faults", cfg_.drain_faults},
                                        {"drain_window_seconds", cfg_.drain_window_seconds}}));
    });
}

void Inventory::clear_bad_node(const std::string &cluster, const std::string &node, const Reply &reply) {
    if (!is_safe_name(cluster, 128) || !is_safe_name(node, 128))
        return reply(error_response(400, "bad_field", "cluster and node: 1-128 of [A-Za-z0-9._-]"));
    on_store(reply, [this, cluster, node](const Reply &reply) {
        long long n = 0;
        try {
            transact([&] { n = store_->nodes().clear_node_faults(cluster, node); });
        } catch (const std::exception &e) {
            return reply(store_error_response(e));
        }
        {   // memory after the store: a refused delete leaves both as they were
            std::lock_guard<std::mutex> lock(quarantine_mu_);
            quarantine_.erase(cluster + "/" + node);
            last_fault_.erase(cluster + "/" + node);
        }
        log_json("info", "bad node cleared", json::object{{"cluster", cluster}, {"node", node}, {"faults", n}});
        reply(ok_json(200, json::object{{"cluster", cluster}, {"node", node}, {"cleared_faults", n},
                                        {"note", "placement may use the node again; a node Slurm drains stays drained until an admin resumes it"}}));
    });
}

}  // namespace shardnet::broker
