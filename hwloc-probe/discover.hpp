// Filling NodeInfo from the machine (or a saved hwloc XML), each source in
// its own function so that one failing source degrades, never aborts.
#pragma once
#include <string>

#include "node_info.hpp"

namespace shardnet::probe {

// hwloc: CPUs, NUMA, memory, PCI accelerators, NICs, NVSwitches. xml: a
// saved topology or "" for this machine. Returns "" or a clear error.
std::string discover_hwloc(const std::string &xml, NodeInfo &out);

// Live-only sources; each leaves its fields absent when it cannot tell.
void discover_meminfo(NodeInfo &out);
void discover_ib_sysfs(NodeInfo &out);
void discover_ucx(NodeInfo &out);
void discover_nvml(NodeInfo &out);

}  // namespace shardnet::probe
