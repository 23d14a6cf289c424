#include <doctest/doctest.h>

#include "hwloc-probe/discover.hpp"

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

// tests/fixtures/sysfs/bus/pci/devices: an MI300X in an XGMI hive with the
// amdgpu driver's files, and an AMD device with no hive and a VRAM file
// that does not parse.
TEST_CASE("AMD GPUs take name, id, VRAM and XGMI hive from amdgpu's sysfs files") {
    NodeInfo n;
    Accelerator mi, other, nv;
    mi.vendor = "amd", mi.pci_bus = "0000:05:00.0", mi.model = "Device 74a1";
    other.vendor = "amd", other.pci_bus = "0000:06:00.0", other.model = "Device 1234";
    nv.vendor = "nvidia", nv.pci_bus = "0000:05:00.0", nv.model = "GH100";  // same bus id, not AMD: untouched
    n.accelerators = {mi, other, nv};
    discover_amdgpu_sysfs(n, std::string(FIXTURES) + "/sysfs");
    const auto &a = n.accelerators;
    CHECK(a[0].model == "AMD Instinct MI300X");
    CHECK(a[0].uuid == "7c3a1e5b2d4f6a8b");
    REQUIRE(a[0].memory_bytes);
    CHECK(*a[0].memory_bytes == 206141652992ull);
    CHECK(a[0].xgmi_hive == "5219823736453457");
    CHECK(a[1].model == "Device 1234");
    CHECK_FALSE(a[1].memory_bytes);
    CHECK(a[1].xgmi_hive.empty());  // hive 0: not in one
    CHECK(a[2].model == "GH100");
    CHECK(a[2].uuid.empty());
}

// tests/fixtures/sysfs-nvswitch: two NVIDIA NVSwitches (DGX-2's 10de:1ac2,
// H100's 10de:22a3), an H200 GPU and an Intel function with a look-alike
// device id.
TEST_CASE("NVSwitches are counted by PCI id from sysfs when hwloc counted none") {
    NodeInfo n;
    Accelerator gpu;
    gpu.vendor = "nvidia";
    n.accelerators.push_back(gpu);
    discover_nvswitch_sysfs(n, std::string(FIXTURES) + "/sysfs-nvswitch");
    CHECK(n.nvswitches == 2);
    // hwloc's count stands when it has one; no NVIDIA GPU, no look.
    NodeInfo counted = n;
    counted.nvswitches = 12;
    discover_nvswitch_sysfs(counted, std::string(FIXTURES) + "/sysfs-nvswitch");
    CHECK(counted.nvswitches == 12);
    NodeInfo none;
    discover_nvswitch_sysfs(none, std::string(FIXTURES) + "/sysfs-nvswitch");
    CHECK(none.nvswitches == 0);
}
