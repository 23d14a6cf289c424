// Filling NodeInfo from the machine (or a saved hwloc XML), each source in
// its own function so that one failing source degrades, never aborts.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "hwloc-probe/nic_kind.hpp"
#include "hwloc-probe/node_info.hpp"

namespace shardnet::probe {

// The network interfaces and OpenFabrics (InfiniBand/RoCE) devices of one
// PCI function.
struct PciOsdevs {
    std::vector<std::string> netdevs;  // eth0, ib0, ...
    std::string ofed;                  // mlx5_0, "" when none
    std::vector<unsigned> ports;       // the OpenFabrics device's ports
    // Evidence for nic_kind: each port's link layer (ports/N/link_layer) and
    // each netdev's type (class/net/X/type: 1 Ethernet, 32 InfiniBand).
    std::vector<LinkType> port_link_layers;  // parallel to ports
    std::vector<LinkType> netdev_types;      // parallel to netdevs
};
using OsdevMap = std::map<std::string, PciOsdevs>;  // by PCI bus id "0000:3b:00.0"

// This machine's, from the links in SYSFS/class/{net,infiniband}: the same
// files hwloc's OS-device discovery reads. The live probe turns that
// discovery off, as it also walks every block device through udev.
OsdevMap discover_sysfs_osdevs(const std::string &sysfs = "/sys");

// The kernel driver bound to PCI function BUS (SYSFS/bus/pci/devices/BUS/
// driver), "" when none.
std::string pci_driver(const std::string &bus, const std::string &sysfs = "/sys");

// hwloc: CPUs, NUMA, memory, PCI accelerators, NICs, NVSwitches. xml: a
// saved topology (its OS devices name the NICs) or "" for this machine
// (discover_sysfs_osdevs names them). Returns "" or a clear error.
std::string discover_hwloc(const std::string &xml, NodeInfo &out);

// Live-only sources; each leaves its fields absent when it cannot tell.
void discover_meminfo(NodeInfo &out);
void discover_ib_sysfs(NodeInfo &out);
// Sets UCX_MODULES (unless set) so that UCX skips its verbs modules on a node
// without verbs devices. Call before any thread starts: it changes environ.
void ucx_skip_absent_modules();
void discover_ucx(NodeInfo &out);
void discover_nvml(NodeInfo &out);
// AMD GPUs from the amdgpu driver's own files under SYSFS/bus/pci/devices/BUS
// (what ROCm SMI reads): product name, unique id, VRAM and XGMI hive.
void discover_amdgpu_sysfs(NodeInfo &out, const std::string &sysfs = "/sys");
// NVSwitches by PCI id (SYSFS/bus/pci/devices/*/{vendor,device}), for a node
// where hwloc dropped them (class 0680 without a backend's subtype). Only
// when an NVIDIA accelerator was found and hwloc counted none.
void discover_nvswitch_sysfs(NodeInfo &out, const std::string &sysfs = "/sys");

}  // namespace shardnet::probe
