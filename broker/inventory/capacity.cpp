// Inventory: every probed node's offer, the idle nodes of the local
// clusters joined with them (placement's input), and the capacity search
// over the local clusters and, with a deadline, the peer brokers.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <unistd.h>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include "common/http_client.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"
#include "broker/inventory/inventory_module.hpp"
#include "broker/peers/peer_answer.hpp"
#include "broker/peers/peer_link.hpp"
#include "broker/core/api_util.hpp"
#include "broker/slurm/slurm_job.hpp"
#include "broker/slurm/slurm_view.hpp"
#include "broker/slurm/name_map.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {


NodeOffer undescribed(const std::string &name) {
    NodeOffer n;
    n.name = name;
    return n;
}


// GET /v1/capacity's filters as requirements; a 400 naming the field
// when one is malformed.
struct CapacityQuery {
    Requirements req;
    std::string cluster, region;
    long long gpus = 0;
};
std::optional<ApiResponse> read_capacity_query(const std::string &query, CapacityQuery &q) {
    Requirements &req = q.req;
    const std::string cls = query_param(query, "class"), fabric = query_param(query, "fabric"),
                      region = q.region = query_param(query, "region"),
                      cluster = q.cluster = query_param(query, "cluster");
    for (const auto &[k, v] : {std::pair{"class", cls}, {"fabric", fabric}, {"region", region}, {"cluster", cluster}})
        if (!v.empty() && !is_safe_name(v))
            return error_response(400, "bad_field", std::string(k) + ": 1-64 of [A-Za-z0-9._-]", k);
    req.accel_class = cls;
    req.fabric = fabric;
    unsigned bit = 0;
    if (!fabric.empty() && !fabric_required(fabric, bit))
        return error_response(400, "bad_field", "fabric: expected nvlink, infiniband, roce, ethernet or xgmi", "fabric");
    if (auto v = query_param(query, "gpus_per_node"); !v.empty()) {
        auto n = parse_int(v, 0, 64);
        if (!n) return error_response(400, "bad_field", "gpus_per_node: expected 0..64", "gpus_per_node");
        req.gpus_per_node = int(*n);
    }
    if (auto v = query_param(query, "gpu_memory_gb"); !v.empty()) {
        auto n = parse_int(v, 0, 100000);
        if (!n) return error_response(400, "bad_field", "gpu_memory_gb: expected 0..100000", "gpu_memory_gb");
        req.gpu_memory_gb = double(*n);
    }
    if (auto v = query_param(query, "gpus"); !v.empty()) {
        auto n = parse_int(v, 0, 1000000);
        if (!n) return error_response(400, "bad_field", "gpus: expected 0..1000000", "gpus");
        q.gpus = *n;
    }
    // containers=1: the job runs in an OCI image; a cluster that runs
    // none is listed with why, never chosen.
    req.containers = query_param(query, "containers") == "1";   // and never a node whose probe found no runtime
    // image_layout=PATH (percent-encoded): the image's OCI layout; a
    // cluster whose image_roots do not hold it is listed with why.
    if (auto v = query_param(query, "image_layout"); !v.empty()) {
        auto path = percent_decode(v);
        if (!path) return error_response(400, "bad_field", "image_layout: bad percent-encoding", "image_layout");
        if (auto err = check_path_syntax(*path); !err.empty())
            return error_response(400, "bad_field", "image_layout: " + err, "image_layout");
        if (!is_valid_utf8(*path)) return error_response(400, "bad_field", "image_layout: not UTF-8", "image_layout");
        req.image_layout = *path;
    }
    return std::nullopt;
}

}  // namespace

std::shared_ptr<const std::map<std::string, NodeOffer>> Inventory::node_offers() {
    return store_wait([this] {
        if (!offers_loaded_) {
            for (auto &n : store_->nodes().list_nodes("")) {
                json::error_code ec;
                auto v = json::parse(n.descriptor, ec);
                if (!ec && v.is_object()) offers_.emplace(n.host, offer_from_descriptor(n.host, v.as_object()));
            }
            offers_loaded_ = true;
        }
        if (!offers_snapshot_) offers_snapshot_ = std::make_shared<const std::map<std::string, NodeOffer>>(offers_);
        return offers_snapshot_;
    });
}

std::vector<ClusterOffer> Inventory::local_offers(const std::string &ckpt_dir, const json::object *site_options,
                                                std::map<std::string, FittedOptions> *fitted, bool with_busy,
                                                const std::string *for_run) {
    const auto node_map = node_offers();
    const auto &described = *node_map;
    std::vector<ClusterOffer> offers;
    std::set<std::string> held = quarantined(wall_now());
    if (for_run) {
        std::lock_guard<std::mutex> lock(quarantine_mu_);
        for (const auto &[cluster, nodes] : suspected_)
            for (const auto &[node, sus] : nodes)
                if (sus.runs.count(*for_run)) held.insert(cluster + "/" + node);
    }
    const bool some_without_runtime = with_busy && std::any_of(described.begin(), described.end(), [](const auto &d) {
        return d.second.containers == NodeOffer::Oci::missing;
    });
    for (const auto &[name, conf] : cfg_.clusters) {
        ClusterOffer c;
        c.name = name;
        const auto info = cfg_.cluster_info.find(name);
        if (info != cfg_.cluster_info.end()) {
            c.region = info->second.region;
            c.containers = info->second.containers;
            c.image_roots = info->second.image_roots;
            if (!info->second.ckpt_roots.empty() && !ckpt_dir.empty())
                c.reads_checkpoint = std::any_of(info->second.ckpt_roots.begin(), info->second.ckpt_roots.end(),
                                                 [&](const std::string &r) { return path_is_under(ckpt_dir, r); });
        }
        // The job's partitions and GPU types, in this cluster's names: only
        // their nodes count.
        std::set<std::string> partitions;
        std::vector<std::string> gpu_types;
        if (site_options) {
            FittedOptions f{*site_options, {}};
            if (info != cfg_.cluster_info.end()) c.refused = local_names(info->second.names, f.options, &f.mapped);
            for (auto &p : job_partitions(f.options)) partitions.insert(p);
            gpu_types = job_gpu_types(f.options);
            if (fitted) (*fitted)[name] = std::move(f);
            if (!c.refused.empty()) { offers.push_back(std::move(c)); continue; }
        }
        std::string out;
        auto has_types = [&](const std::string &gres) {
            return std::all_of(gpu_types.begin(), gpu_types.end(), [&](const std::string &t) { return node_has_gpu_type(gres, t); });
        };
        for (const auto &h : held)
            if (h.rfind(name + "/", 0) == 0) c.held.push_back(h.substr(name.size() + 1));
        // The nodes of the job's partitions and GPU types, each once (a node
        // in several partitions), none seen dead (Slurm may not know yet).
        auto read_nodes = [&](const std::string &text, std::vector<NodeOffer> &into, std::set<std::string> &seen) {
            std::istringstream lines(text);
            for (std::string line; std::getline(lines, line);) {
                std::istringstream is(line);
                std::string n, partition, gres, state;
                if (!(is >> n)) continue;
                is >> partition >> gres >> state;
                if (!partitions.empty() && !partitions.count(partition)) continue;
                if (!has_types(gres)) continue;
                // In use, and free when its jobs end: not draining, not silent.
                if (&into == &c.busy && state != "alloc" && state != "mix" && state != "comp") continue;
                if (!seen.insert(n).second) continue;
                if (held.count(name + "/" + n)) continue;
                auto d = described.find(n);
                into.push_back(d != described.end() ? d->second : undescribed(n));
            }
        };
        std::set<std::string> seen;
        // Nodes of this cluster whose probe found no container runtime,
        // whatever their state: one more sinfo, only when some node has said so.
        if (some_without_runtime) {
            std::string all;
            if (slurm_->query(conf, {"sinfo", "-h", "-N", "-o", "%N"}, all) == 0) {
                std::istringstream is(all);
                std::set<std::string> once;
                for (std::string n; is >> n;)
                    if (auto d = described.find(n); d != described.end() && d->second.containers == NodeOffer::Oci::missing && once.insert(n).second)
                        c.no_runtime.push_back(n);
            }
        }
        if (slurm_->query(conf, {"sinfo", "-h", "-N", "-t", "idle", "-o", "%N %R %G"}, out) != 0) {
            c.reachable = false;
        } else {
            read_nodes(out, c.idle, seen);
            std::string busy;
            if (with_busy && slurm_->query(conf, {"sinfo", "-h", "-N", "-t", "alloc,mix,comp", "-o", "%N %R %G %t"}, busy) == 0)
                read_nodes(busy, c.busy, seen);
            // A partition this cluster has not (idle or not): no place for
            // the job, said so, rather than an sbatch that fails.
            if (!partitions.empty() && c.idle.empty()) {
                std::string all;
                std::set<std::string> known;
                if (slurm_->query(conf, {"sinfo", "-h", "-o", "%R"}, all) == 0) {
                    std::istringstream is(all);
                    for (std::string p; is >> p;) known.insert(p);
                    std::string missing;
                    for (const auto &p : partitions)
                        if (!known.count(p)) missing += (missing.empty() ? "" : ",") + p;
                    if (missing.size() && std::none_of(partitions.begin(), partitions.end(), [&](const std::string &p) { return known.count(p) > 0; }))
                        c.refused = "no partition " + missing + " (and no mapping for it in clusters." + name + ".names.partition)";
                }
            }
            // A GPU type no node of this cluster has: no place either.
            if (!gpu_types.empty() && c.idle.empty() && c.refused.empty()) {
                std::string all;
                if (slurm_->query(conf, {"sinfo", "-h", "-N", "-o", "%G"}, all) == 0) {
                    std::istringstream is(all);
                    bool any = false;
                    for (std::string g; is >> g;) any = any || has_types(g);
                    if (!any) {
                        std::string types;
                        for (const auto &t : gpu_types) types += (types.empty() ? "" : ",") + t;
                        c.refused = "no GPU of type " + types + " (and no mapping for it in clusters." + name + ".names.gpu_type)";
                    }
                }
            }
        }
        offers.push_back(std::move(c));
    }
    return offers;
}

std::set<std::string> Inventory::quarantined(double now) {
    std::lock_guard<std::mutex> lock(quarantine_mu_);
    std::set<std::string> held;
    for (auto it = quarantine_.begin(); it != quarantine_.end();)
        if (it->second <= now) it = quarantine_.erase(it);
        else held.insert((it++)->first);
    return held;
}

void Inventory::capacity(const std::string &query, bool fan_out, const Reply &reply) {
    post_answering(query_pool_, "capacity", reply, [this, query, fan_out](const Reply &reply) {
        CapacityQuery q;
        if (auto bad = read_capacity_query(query, q)) return reply(std::move(*bad));
        const Requirements &req = q.req;
        const std::string &cluster = q.cluster, &region = q.region;
        const long long gpus = q.gpus;
        const bool containers = req.containers;
        Requirements runtime_blind = req;   // a node fits but for its runtime: counted apart
        runtime_blind.containers = false;
        const double now = wall_now();
        // Node names and states for the dashboard's users and admins; a
        // peer (fan_out false) gets the rows only, never who is where.
        const bool with_nodes = fan_out && query_param(query, "nodes") == "1";
        const auto node_map = node_offers();
        const auto &described = *node_map;
        json::array rows;
        long long idle_gpus = 0;
        for (const auto &[name, conf] : cfg_.clusters) {
            std::string reg;
            if (auto it = cfg_.cluster_info.find(name); it != cfg_.cluster_info.end()) reg = it->second.region;
            if ((!cluster.empty() && cluster != name) || (!region.empty() && region != reg)) continue;
            if (auto it = cfg_.cluster_info.find(name); containers && it != cfg_.cluster_info.end() && !it->second.containers) {
                rows.push_back(json::object{{"broker", cfg_.broker_name}, {"cluster", name}, {"region", reg}, {"status", "refused"},
                                            {"reason", "runs no containers (clusters." + name + ".containers is false)"}});
                continue;
            }
            if (auto it = cfg_.cluster_info.find(name); it != cfg_.cluster_info.end())
                if (auto why = image_unreachable(name, req.image_layout, it->second.image_roots); !why.empty()) {
                    rows.push_back(json::object{{"broker", cfg_.broker_name}, {"cluster", name}, {"region", reg}, {"status", "refused"},
                                                {"reason", why}});
                    continue;
                }
            std::string out;
            if (slurm_->query(conf, {"sinfo", "-h", "-N", "-o", "%N %T"}, out) != 0) {
                rows.push_back(json::object{{"broker", cfg_.broker_name}, {"cluster", name}, {"region", reg},
                                            {"status", "unknown"}, {"reason", "slurmctld did not answer"}});
                continue;
            }
            // Groups of like nodes: class, GPUs per node, GPU memory, fabric;
            // with nodes=1 (the dashboard's row that opens), each group's
            // nodes by Slurm's name, their state, and whether a descriptor
            // of that host is here (GET /v1/nodes/HOST).
            struct Group { long long idle = 0, total = 0; json::array nodes; };
            std::map<std::tuple<std::string, int, long long, std::string>, Group> groups;
            std::istringstream is(out);
            std::set<std::string> seen;
            long long no_runtime = 0;   // nodes left out only for want of a container runtime
            json::array without;        // every node whose probe found none (containers=1): shard run's --exclude
            for (std::string node, state; is >> node >> state;) {
                if (!seen.insert(node).second) continue;
                auto d = described.find(node);
                const NodeOffer o = d != described.end() ? d->second : undescribed(node);
                if (containers && o.containers == NodeOffer::Oci::missing && without.size() < kPeerListMax) without.push_back(json::value(node));
                if (!node_misfit(req, o).empty()) {
                    // Left out for want of a runtime only: it fits otherwise.
                    if (containers && o.containers == NodeOffer::Oci::missing) no_runtime += node_misfit(runtime_blind, o).empty();
                    continue;
                }
                auto key = std::make_tuple(o.described ? (o.accel_class.empty() ? "none" : o.accel_class) : "unknown", o.gpus,
                                           o.gpu_memory_gb ? (long long)(*o.gpu_memory_gb + 0.5) : -1LL,
                                           o.described ? fabric_name(o.fabric) : "unknown");
                auto &g = groups[key];
                ++g.total;
                if (state == "idle") { ++g.idle; idle_gpus += o.gpus; }
                if (with_nodes && g.nodes.size() < 10000)
                    g.nodes.push_back(json::object{{"name", node}, {"state", state}, {"described", d != described.end()}});
            }
            if (groups.empty() && no_runtime > 0) {
                rows.push_back(json::object{{"broker", cfg_.broker_name}, {"cluster", name}, {"region", reg}, {"status", "refused"},
                                            {"reason", std::to_string(no_runtime) + " node(s), none with a container runtime "
                                                       "(their probes found no usable oci.conf)"}});
                continue;
            }
            for (auto &[k, g] : groups) {
                const auto &[c, gpn, mem, fab] = k;
                json::object row{{"broker", cfg_.broker_name}, {"cluster", name}, {"region", reg}, {"status", "ok"},
                                 {"accelerator_class", c}, {"gpus_per_node", gpn},
                                 {"gpu_memory_gb", mem < 0 ? json::value(nullptr) : json::value(mem)},
                                 {"fabric", fab}, {"idle_nodes", g.idle}, {"total_nodes", g.total}};
                if (with_nodes) row["nodes"] = std::move(g.nodes);
                // This broker's callers submit there themselves: the nodes
                // a job in an image must not get (never sent to a peer).
                if (fan_out && !without.empty()) row["no_runtime"] = without;
                rows.push_back(std::move(row));
            }
        }
        json::array peers;
        // A peer is asked for its own clusters only (local=1 first: the value
        // that counts), with the filters checked above and nothing else of
        // the caller's, so brokers can never ask each other in a circle.
        if (fan_out && query_param(query, "local") != "1") {
            std::string forwarded = "local=1";
            for (const char *k : {"class", "fabric", "region", "cluster", "gpus_per_node", "gpu_memory_gb", "gpus", "containers", "image_layout"})
                if (auto v = query_param(query, k); !v.empty()) forwarded += std::string("&") + k + "=" + v;
            peer_capacity(forwarded, rows, peers);
        }
        reply(ok_json(200, json::object{{"broker", cfg_.broker_name}, {"queried_at", now}, {"clusters", std::move(rows)},
                                        {"peers", std::move(peers)}, {"local_idle_gpus", idle_gpus},
                                        {"fits", gpus == 0 || idle_gpus >= gpus}}));
    });
}

void Inventory::peer_capacity(const std::string &query, json::array &rows, json::array &peers) {
    // Every peer at once, each with a deadline: a silent peer is unknown,
    // never available; so is one whose answer cannot be read.
    std::vector<std::future<HttpResponse>> answers;
    for (const auto &p : cfg_.peers)
        answers.push_back(std::async(std::launch::async, [this, &p, query] {
            HttpRequest r;
            r.method = "GET";
            r.url = p.url + "/v1/capacity?" + query;
            r.bearer = p.token;
            r.ca_file = p.ca_file;
            r.timeout_ms = 1500;
            HttpResponse res = peers_->send(r);
            return res;
        }));
    for (std::size_t i = 0; i < answers.size(); ++i) {
        PeerCapacity c = parse_peer_capacity(answers[i].get());
        if (!c.error.empty()) {
            peers.push_back(json::object{{"name", cfg_.peers[i].name}, {"status", "unknown"}, {"reason", c.error}});
            continue;
        }
        peers.push_back(json::object{{"name", cfg_.peers[i].name}, {"status", "ok"}});
        for (auto &row : c.rows) rows.push_back(std::move(row));
    }
}

}  // namespace shardnet::broker
