// What shardnet-probe learns about a node. Every optional field is absent
// when no source gave it: evidence, not guesses.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/oci_runtime.hpp"
#include "hwloc-probe/slurm_geometry.hpp"

namespace shardnet::probe {

struct NumaNode {
    unsigned index = 0;
    std::optional<uint64_t> memory_bytes;
    std::string cpus;  // list string, e.g. "0-5,12-17"
};

struct Accelerator {
    std::string vendor;        // "nvidia", "amd", "intel" or the PCI vendor id
    std::string pci_id;        // "10de:1db8"
    std::string pci_bus;       // "0000:34:00.0"
    std::string model;         // from NVML/RSMI/PCI names; "" if none
    std::string cls;           // e.g. "H200-SXM", or "unknown"
    std::optional<uint64_t> memory_bytes;
    std::optional<int> numa;   // nearest NUMA node
    std::string cpus;          // local CPUs (PU os indexes)
    std::string cores;         // local cores (logical indexes, as Slurm's gres.conf Cores= counts)
    std::string uuid;
    std::optional<int> nvlinks_up;     // NVML, live only
    std::optional<int> nvlinks_total;
    // GPUs and NVSwitches joined to this one by NVLink in hwloc's
    // "NVLinkBandwidth" distances (a saved topology; hwloc's NVML backend
    // writes them): evidence of NVLink where NVML was not asked.
    std::optional<int> nvlink_peers;
    std::string xgmi_hive;             // AMD: hwloc's RSMI XGMIHiveID, "" when none
};

struct NicPort {
    unsigned port = 0;
    std::string state;               // "ACTIVE", "DOWN", ...
    std::optional<double> rate_gbps;
};

struct Nic {
    std::string name;          // OpenFabrics device (mlx5_0) or netdev (eth0)
    std::string kind;          // "infiniband", "roce", "ethernet", "omnipath", "other"
    std::string pci_id;
    std::string pci_bus;
    std::optional<int> numa;
    std::string cpus;
    std::vector<std::string> netdevs;
    std::vector<NicPort> ports;
};

struct UcxResource {
    std::string transport;     // "rc_mlx5", "tcp", "cuda_ipc", ...
    std::string device;
};

struct NodeInfo {
    std::string host;
    std::string arch;
    std::string cpu_model;
    unsigned packages = 0, cores = 0, pus = 0;
    std::vector<NumaNode> numa;
    std::optional<uint64_t> memory_bytes;       // what Slurm will see
    std::string memory_source;                  // "meminfo" or "hwloc"
    std::optional<uint64_t> hwloc_memory_bytes;
    std::vector<Accelerator> accelerators;
    unsigned nvswitches = 0;
    std::vector<Nic> nics;
    std::optional<std::vector<UcxResource>> ucx;  // absent when probing a saved topology
    std::optional<SlurmGeometry> slurm;          // only when a Slurm line is asked for
    std::optional<std::string> nvidia_driver, cuda_driver, nccl, hwloc_version, ucx_version;
    std::optional<OciSupport> containers;       // live only: Slurm's OCI support here
};

}  // namespace shardnet::probe
