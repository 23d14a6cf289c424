// The versioned JSON node descriptor (see doc/node-descriptor.md) and the
// outputs derived from it.
#pragma once
#include <boost/json.hpp>
#include <string>

#include "hwloc-probe/node_info.hpp"

namespace shardnet::probe {

inline constexpr const char *kSchema = "shardnet.node/1";

// The fabric summary the broker matches on: "NVSwitch", "NVLink", "XGMI",
// "InfiniBand", "RoCE", "OmniPath", "Ethernet", "PCIe-only".
std::vector<std::string> fabric_summary(const NodeInfo &n);

// The descriptor; probed_at (seconds) is the one field outside the hash.
boost::json::object to_descriptor(const NodeInfo &n, double probed_at);

// sha256 over the serialized descriptor without "hash" and "probed_at".
std::string content_hash(const boost::json::object &descriptor);

// Human summary (--pretty).
std::string pretty(const NodeInfo &n);

// Slurm: a NodeName line, and gres.conf lines with Cores= locality.
std::string slurm_node_line(const NodeInfo &n);
std::string gres_conf(const NodeInfo &n);

// --check: "" when the live node still has what the recorded descriptor
// lists, else a one-line reason naming the first thing missing or degraded.
std::string check_against(const boost::json::object &recorded, const NodeInfo &live);

}  // namespace shardnet::probe
