#include "hwloc-probe/nic_kind.hpp"

#include <algorithm>

namespace shardnet::probe {

namespace {

bool starts_with(const std::string &s, const char *p) { return s.rfind(p, 0) == 0; }

}  // namespace

LinkType link_type_of_address(const std::string &address) {
    if (address.empty()) return LinkType::unknown;
    const size_t bytes = size_t(std::count(address.begin(), address.end(), ':')) + 1;
    if (bytes == 20) return LinkType::infiniband;  // INFINIBAND_ALEN
    if (bytes == 6) return LinkType::ethernet;     // ETH_ALEN
    return LinkType::unknown;
}

std::string nic_kind(const NicEvidence &e) {
    if (e.ofed.empty()) return e.netdevs.empty() ? "unknown" : "ethernet";
    if (starts_with(e.ofed, "hfi1_")) return "omnipath";
    if (starts_with(e.ofed, "qib")) return "infiniband";
    if (starts_with(e.ofed, "usnic_")) return "usnic";
    if (starts_with(e.ofed, "rxe")) return "roce";
    bool ib_port = false, eth_port = false;
    for (const auto &p : e.ports) {
        ib_port = ib_port || p.link_layer == LinkType::infiniband;
        eth_port = eth_port || p.link_layer == LinkType::ethernet;
    }
    if (ib_port) return "infiniband";
    if (eth_port) return "roce";
    const auto has = [&](LinkType t) { return std::find(e.netdevs.begin(), e.netdevs.end(), t) != e.netdevs.end(); };
    const bool lid = std::any_of(e.ports.begin(), e.ports.end(), [](const NicEvidence::Port &p) { return p.lid && *p.lid != 0; });
    if (has(LinkType::infiniband) || lid) return "infiniband";
    if (has(LinkType::ethernet)) return "roce";
    return "unknown";
}

}  // namespace shardnet::probe
