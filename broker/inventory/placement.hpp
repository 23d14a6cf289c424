// Placement: which cluster and nodes a run's next attempt goes to. A pure
// function over the requirements and what each cluster offers (idle nodes
// from Slurm, joined with their probe descriptors), so that the same code
// decides in the broker, in tests and in the 100k-node benchmark.
//
// Hard constraints per node: accelerator class (or a compatible one), GPUs
// per node, per-GPU memory, fabric, node memory, CPU architecture, CUDA
// driver version. Per cluster: allowed clusters and regions, whether it can
// read the checkpoint, enough fitting idle nodes. Preferences: the home
// cluster first, then fabric quality, then the home region, then the name
// (a deterministic tie-break). Every rejected cluster carries its reason.
#pragma once
#include <boost/json/fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardnet::broker {

struct Requirements {
    int nodes = 1;
    std::string accel_class;            // "": any (or none)
    int gpus_per_node = 0;
    double gpu_memory_gb = 0;           // per GPU
    std::string fabric;                 // nvlink, infiniband, roce, ethernet; "": any
    double memory_gb = 0;               // per node
    std::string arch;                   // x86_64, aarch64; "": any
    std::string min_cuda;               // "12.2": the CUDA driver version at least
    std::vector<std::string> clusters;  // allowed; empty: any
    std::vector<std::string> regions;   // allowed; empty: any
    bool containers = false;            // runs in an OCI image: only clusters with container support
    // The image's OCI layout (absolute, normalized): only clusters that
    // read it at that path (ClusterOffer::image_roots). "": not checked.
    // Not part of the requires JSON: read from the manifest
    // (image_requirements), which brokers of every version carry.
    std::string image_layout;
    bool needs_hardware() const;
};

// "" when ok, else what is wrong with this requirements object.
std::string requirements_from_json(const boost::json::object &o, Requirements &out);
boost::json::object requirements_to_json(const Requirements &r);

struct NodeOffer {
    enum class Oci : unsigned char { unknown, ready, missing };
    std::string name;
    bool described = false;             // a probe descriptor is known
    // Whether Slurm there runs OCI containers (the descriptor's
    // containers.ready: oci.conf and the runtime it names); unknown when the
    // descriptor does not say (an older probe), then taken as it may.
    Oci containers = Oci::unknown;
    std::string accel_class;            // of its accelerators ("" none)
    int gpus = 0;
    std::optional<double> gpu_memory_gb;
    unsigned fabric = 0;                // Fabric bits
    std::optional<double> memory_gb;
    std::string arch;
    double cuda = 0;                    // CUDA driver version as 12.2; 0 unknown
};
NodeOffer offer_from_descriptor(const std::string &name, const boost::json::object &descriptor);
// "" when the parts of a descriptor the broker reads have the shapes of
// shardnet-probe(8)'s descriptor; else what is wrong, and in `field` where.
std::string descriptor_shape_error(const boost::json::object &descriptor, std::string &field);

struct ClusterOffer {
    std::string name, region;
    bool reachable = true;              // its slurmctld answered
    bool reads_checkpoint = true;       // the checkpoint's storage is mounted there
    std::vector<NodeOffer> idle;        // idle nodes, any order
    std::string refused;                // why the job cannot go there at all ("no partition for gpu"); "" when it can
    bool containers = true;             // Slurm runs OCI containers there (clusters.NAME.containers)
    // Where OCI image layouts are readable at their own path
    // (clusters.NAME.image_roots); empty: anywhere.
    std::vector<std::string> image_roots{};
    // Nodes in use that free up when their jobs end (allocated, mixed,
    // completing; responding, not draining): only when a requeue asks
    // (local_offers' with_busy), for a new job that may wait in the queue.
    std::vector<NodeOffer> busy{};
    std::vector<std::string> held{};    // quarantined nodes (seen dead): never the job's
    // Nodes whose probe found no container runtime, in any state (a down
    // one may come back while a job waits): never a job's in an image.
    std::vector<std::string> no_runtime{};
};

struct Rejection { std::string cluster, reason; };
struct Placement {
    std::string cluster;                // "": nowhere
    std::vector<std::string> nodes;     // the chosen idle nodes, sorted
    // No idle room anywhere, but CLUSTER's idle and busy nodes that fit are
    // enough: the job waits in its queue for QUEUED nodes, never on EXCLUDE
    // (the failed node, quarantined ones, those in use that do not fit).
    int queued = 0;
    std::vector<std::string> exclude;
    std::string waits_because;          // CLUSTER's idle nodes that fit, too few (as a rejection says it)
    std::string fabric;                 // best fabric the chosen nodes share
    std::vector<Rejection> rejected;    // every other candidate, with why
};

enum Fabric : unsigned { f_nvlink = 1, f_infiniband = 2, f_roce = 4, f_ethernet = 8, f_xgmi = 16 };
// "NVSwitch", "InfiniBand", ... (the descriptor's fabric summary) -> bit; 0 unknown.
unsigned fabric_bit(std::string_view name);
// The bit a requirement names ("infiniband"); false when it names none.
bool fabric_required(std::string_view name, unsigned &bit);
// Fabric quality, higher is better: NVLink/XGMI 4, InfiniBand 3, RoCE 2, Ethernet 1, else 0.
int fabric_rank(unsigned fabric);
const char *fabric_name(unsigned bit);

// A run in an image (its manifest pins image_digest): containers, and the
// manifest's image_layout (shard run's pinned layout) when there. "" or
// what is wrong with image_layout.
std::string image_requirements(const boost::json::object &manifest, Requirements &r);

// Why CLUSTER cannot read the image's LAYOUT: its image_roots (ROOTS) do
// not hold it; "" when they do, or when either is empty (not checked).
std::string image_unreachable(const std::string &cluster, const std::string &layout, const std::vector<std::string> &roots);

// Why this node does not fit ("" when it does).
std::string node_misfit(const Requirements &req, const NodeOffer &n);

// exclude: a node of the home cluster that must not be used (the failed one).
// With no idle room anywhere, a cluster whose offer lists busy nodes may
// still be chosen to wait in (Placement::queued): the home cluster first.
Placement place(const Requirements &req, const std::vector<ClusterOffer> &clusters, const std::string &home_cluster,
                const std::string &home_region = "", const std::string &exclude = "");

}  // namespace shardnet::broker
