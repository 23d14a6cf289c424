// What fabric a NIC's OpenFabrics (verbs) device is on, from evidence that
// decides it; the PCI class does not: a ConnectX is class 0207 or 0280 in
// InfiniBand mode as often as 0c06, and 0200 in Ethernet (RoCE) mode.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace shardnet::probe {

enum class LinkType { unknown, ethernet, infiniband };

struct NicEvidence {
    std::string ofed;  // OpenFabrics device name (mlx5_0, qib0, hfi1_0, usnic_0), "" when none
    struct Port {
        LinkType link_layer = LinkType::unknown;  // sysfs ports/N/link_layer (live only)
        std::optional<unsigned> lid;              // hwloc's PortNLID
    };
    std::vector<Port> ports;
    std::vector<LinkType> netdevs;  // each netdev of the PCI function, by its hardware address type
};

// "infiniband", "roce", "omnipath", "usnic", "ethernet" (no verbs device) or
// "unknown" when nothing decides. In order:
//  - no verbs device: "ethernet" when it has a netdev;
//  - the driver's device name where the hardware has one fabric only:
//    hfi1_ (Intel Omni-Path, drivers/infiniband/hw/hfi1), qib (QLogic
//    TrueScale InfiniBand, hw/qib), usnic_ (Cisco usNIC: UDP on Ethernet,
//    hw/usnic), rxe (soft RoCE, sw/rxe);
//  - a port's link layer ("InfiniBand" / "Ethernet" in sysfs);
//  - an IPoIB netdev (ARPHRD_INFINIBAND: a 20-byte hardware address) or a
//    port with a non-zero LID (LIDs are InfiniBand subnet addresses; RoCE
//    ports have LID 0): "infiniband";
//  - an Ethernet netdev (6-byte address) on the function and no InfiniBand
//    evidence: "roce".
std::string nic_kind(const NicEvidence &e);

// A netdev's type from hwloc's "Address" info: 20 bytes is IPoIB, 6 Ethernet.
LinkType link_type_of_address(const std::string &address);

}  // namespace shardnet::probe
