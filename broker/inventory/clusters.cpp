// The local clusters as the broker sees them: GET /v1/clusters and the
// health check, each naming a cluster whose Slurm answers cannot be read.
#include <boost/json.hpp>

#include "broker/core/api_util.hpp"
#include "broker/inventory/inventory_module.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

// Each cluster whose Slurm answers cannot be read (slurm/read_errors.hpp):
// the broker is up, but judges none of its jobs until they can be.
json::object Inventory::slurm_read_errors() const {
    json::object out;
    const auto errors = slurm_->read_errors.by_conf();
    for (const auto &[name, conf] : cfg_.clusters)
        if (auto it = errors.find(conf); it != errors.end())
            out[name] = json::object{{"error", it->second.why}, {"since", it->second.since}, {"last", it->second.last},
                                     {"count", it->second.count}};
    return out;
}

json::object Inventory::health() const {
    json::object errors = slurm_read_errors();
    json::object out{{"ok", errors.empty()}};
    if (!errors.empty()) out["slurm_unreadable"] = std::move(errors);
    return out;
}

void Inventory::list_clusters(const Reply &reply) {
    json::array cs;
    const json::object errors = slurm_read_errors();
    for (const auto &[name, conf] : cfg_.clusters) {
        json::object c{{"name", name}, {"local", true}};
        if (auto *e = errors.if_contains(name)) c["slurm_unreadable"] = *e;
        cs.push_back(std::move(c));
    }
    reply(ok_json(200, json::object{{"broker_cluster", cfg_.cluster}, {"clusters", std::move(cs)}}));
}

}  // namespace shardnet::broker
