#include <doctest/doctest.h>

#include "discover.hpp"

using namespace shardnet::probe;

#ifndef FIXTURES
#error FIXTURES must name tests/fixtures
#endif

// tests/fixtures/sysfs: the class links of a node with a virtio NIC (its
// netdev one level below the PCI function), a dual-port ConnectX HCA with
// its IPoIB interface, a RoCE function and the loopback interface.
TEST_CASE("NICs are named from sysfs class links, by PCI function") {
    const OsdevMap m = discover_sysfs_osdevs(std::string(FIXTURES) + "/sysfs");
    REQUIRE(m.size() == 3);  // lo is virtual: no PCI function

    const auto &virtio = m.at("0000:00:03.0");
    CHECK(virtio.netdevs == std::vector<std::string>{"eth0"});
    CHECK(virtio.ofed.empty());
    CHECK(virtio.ports.empty());

    const auto &hca = m.at("0000:3b:00.0");  // behind a bridge: the last bus id in the path
    CHECK(hca.ofed == "mlx5_0");
    CHECK(hca.ports == std::vector<unsigned>{1, 2});
    CHECK(hca.netdevs == std::vector<std::string>{"ib0"});

    const auto &roce = m.at("0000:3a:00.1");
    CHECK(roce.ofed == "mlx5_1");
    CHECK(roce.ports == std::vector<unsigned>{1});
    CHECK(roce.netdevs == std::vector<std::string>{"enp58s0f1np1"});
}

TEST_CASE("a missing sysfs gives no NICs, not an error") {
    CHECK(discover_sysfs_osdevs("/nonexistent").empty());
}
