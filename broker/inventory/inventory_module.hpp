// The inventory module: node descriptors and each node's offer, the
// nodes the detector saw down (quarantined, remembered in the store), the
// local clusters and whether their Slurm can be read, and the capacity
// search (local offers joined with the peers' answers). Its data is its
// own: only this module's code touches the offers and the quarantine.
#pragma once
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "broker/core/module.hpp"
#include "broker/inventory/placement.hpp"

namespace shardnet::broker {

class Inventory : Module {
public:
    explicit Inventory(Core &core) : Module(core) {}

    // POST /v1/nodes, GET /v1/nodes[/HOST] (inventory/nodes.cpp).
    void put_node(const ApiRequest &req, const Reply &reply, double now);
    void get_nodes(const std::string &host, const Reply &reply);
    // GET /v1/clusters (inventory/clusters.cpp).
    void list_clusters(const Reply &reply);
    // GET /v1/health: ok, and each cluster whose Slurm answers cannot be read.
    boost::json::object health() const;
    boost::json::object slurm_read_errors() const;
    // With a job's options (in the site's names, name_map.hpp): each
    // cluster's offer is what the job can have there (the idle nodes of its
    // partitions; refused, with the reason, where a name has no match), and
    // `fitted` gets the options in each cluster's own names. With_busy: the
    // nodes in use too (ClusterOffer::busy), where the job could wait.
    struct FittedOptions { boost::json::object options; std::vector<std::string> mapped; };
    // for_run: a requeue's run; the nodes it saw down on the broker's word
    // alone (seen_down, Slurm not agreeing yet) are left out of its offers,
    // never out of another run's.
    std::vector<ClusterOffer> local_offers(const std::string &ckpt_dir, const boost::json::object *site_options = nullptr,
                                           std::map<std::string, FittedOptions> *fitted = nullptr, bool with_busy = false,
                                           const std::string *for_run = nullptr);
    // Nodes the detector saw down, offered to no placement until the time
    // kept (detector.quarantine_seconds); "cluster/node" keys.
    // run and cause: what it faulted, remembered (inventory/bad_nodes.cpp).
    void quarantine(const std::string &cluster, const std::string &node, double now, const std::string &run = "",
                    const std::string &cause = "");
    // A node the detector saw down while faulting run: held for every run
    // (quarantine) only on Slurm's own word (slurm_state DOWN or FAIL:
    // Slurm sets DOWN itself once a node stays NOT_RESPONDING through
    // SlurmdTimeout). The broker's own observation (its connect to slurmd
    // refused: a flood of connections does that to a healthy node) is
    // asked of Slurm again every few seconds until Slurm calls it dead or
    // SlurmdTimeout and a minute pass (inventory/bad_nodes.cpp).
    void seen_down(const std::string &cluster, const std::string &node, double now, const std::string &run,
                   const std::string &cause, const std::string &slurm_state);
    void load_bad_nodes(double now);
    void list_bad_nodes(const Reply &reply);
    void clear_bad_node(const std::string &cluster, const std::string &node, const Reply &reply);
    std::set<std::string> quarantined(double now);   // "cluster/node" held now
    // fan_out: also ask the peers (never for a peer's own question).
    void capacity(const std::string &query, bool fan_out, const Reply &reply);
    // GET /v1/capacity?local=1 at every peer at once: their rows, and one
    // entry per peer (ok, or unknown with the reason).
    void peer_capacity(const std::string &query, boost::json::array &rows, boost::json::array &peers);
    // Every probed node's offer, by host: parsed from the stored descriptors
    // once, then kept up to date by POST /v1/nodes (store thread only).
    std::shared_ptr<const std::map<std::string, NodeOffer>> node_offers();

private:
    void confirm_down(const std::string &cluster);
    std::mutex quarantine_mu_;
    // Nodes only the broker saw down, per cluster, until Slurm calls them
    // dead or SlurmdTimeout and a minute pass (under quarantine_mu_).
    struct Suspected {
        std::string run, cause;          // the first run that saw it: named in its fault, if Slurm agrees
        int looks = 0;
        std::set<std::string> runs;      // every run that saw it: left out of their own placements meanwhile
    };
    std::map<std::string, std::map<std::string, Suspected>> suspected_;
    std::map<std::string, double> quarantine_;
    std::map<std::string, std::pair<std::string, double>> last_fault_;   // "cluster/node" -> the run and time of its last fault
    std::map<std::string, NodeOffer> offers_;
    bool offers_loaded_ = false;
    std::shared_ptr<const std::map<std::string, NodeOffer>> offers_snapshot_;   // a copy of offers_, until it changes
};

}  // namespace shardnet::broker
