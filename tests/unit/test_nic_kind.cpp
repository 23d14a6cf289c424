#include <doctest/doctest.h>

#include "hwloc-probe/nic_kind.hpp"

using namespace shardnet::probe;

namespace {
NicEvidence ev(std::string ofed, std::vector<NicEvidence::Port> ports, std::vector<LinkType> netdevs) {
    return NicEvidence{std::move(ofed), std::move(ports), std::move(netdevs)};
}
constexpr auto IB = LinkType::infiniband, ETH = LinkType::ethernet, UNK = LinkType::unknown;
}  // namespace

TEST_CASE("netdev type from hwloc's Address") {
    CHECK(link_type_of_address("80:00:00:26:fe:80:00:00:00:00:00:00:24:8a:07:03:00:1e:39:fe") == IB);
    CHECK(link_type_of_address("78:e7:d1:21:55:30") == ETH);
    CHECK(link_type_of_address("") == UNK);
    CHECK(link_type_of_address("00:11") == UNK);
}

TEST_CASE("InfiniBand and RoCE from evidence, not the PCI class") {
    // ConnectX-4 in the 32em64t capture: PCI class 0207, ib0, port LID 0x1.
    CHECK(nic_kind(ev("mlx5_0", {{UNK, 1u}}, {IB})) == "infiniband");
    CHECK(nic_kind(ev("mlx5_0", {{UNK, 1u}}, {})) == "infiniband");       // LID alone
    CHECK(nic_kind(ev("mlx5_0", {{UNK, 0u}}, {IB})) == "infiniband");     // IPoIB netdev alone
    CHECK(nic_kind(ev("mlx5_1", {{UNK, 0u}}, {ETH})) == "roce");          // Ethernet netdev, LID 0
    CHECK(nic_kind(ev("mlx4_0", {}, {ETH, IB})) == "infiniband");         // VPI: one port each way
    // Live: sysfs link_layer decides.
    CHECK(nic_kind(ev("mlx5_0", {{IB, {}}}, {})) == "infiniband");
    CHECK(nic_kind(ev("mlx5_0", {{ETH, {}}}, {})) == "roce");
    CHECK(nic_kind(ev("mlx5_0", {{ETH, {}}, {IB, {}}}, {})) == "infiniband");
    // Nothing decides.
    CHECK(nic_kind(ev("mlx5_0", {}, {})) == "unknown");
    CHECK(nic_kind(ev("mlx5_0", {{UNK, 0u}}, {UNK})) == "unknown");
    CHECK(nic_kind(ev("", {}, {})) == "unknown");
}

TEST_CASE("single-fabric drivers decide by name") {
    CHECK(nic_kind(ev("usnic_0", {{UNK, 0u}}, {ETH})) == "usnic");  // Cisco usNIC: not RoCE
    CHECK(nic_kind(ev("qib0", {}, {})) == "infiniband");
    CHECK(nic_kind(ev("hfi1_0", {{UNK, 3u}}, {})) == "omnipath");
    CHECK(nic_kind(ev("rxe0", {}, {ETH})) == "roce");
    CHECK(nic_kind(ev("", {}, {ETH})) == "ethernet");
}
