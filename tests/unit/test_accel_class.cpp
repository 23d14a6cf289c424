#include <doctest/doctest.h>

#include "hwloc-probe/accel_class.hpp"
#include "hwloc-probe/descriptor.hpp"

using namespace shardnet::probe;

TEST_CASE("classes from model names") {
    CHECK(classify_accelerator(0x10de, 0, "NVIDIA H200", {}) == "H200-SXM");
    CHECK(classify_accelerator(0x10de, 0, "NVIDIA H200 NVL", {}) == "H200-NVL");
    CHECK(classify_accelerator(0x10de, 0, "NVIDIA H100 80GB HBM3", {}) == "H100-SXM");
    CHECK(classify_accelerator(0x10de, 0, "NVIDIA H100 PCIe", {}) == "H100-PCIe");
    CHECK(classify_accelerator(0x10de, 0, "NVIDIA B200", {}) == "B200");
    CHECK(classify_accelerator(0x10de, 0, "NVIDIA B300 SXM6 AC", {}) == "B300");
    CHECK(classify_accelerator(0x10de, 0, "NVIDIA GB200", {}) == "GB200");
    CHECK(classify_accelerator(0x10de, 0, "NVIDIA RTX PRO 6000 Blackwell Server Edition", {}) == "RTX-PRO-6000");
    CHECK(classify_accelerator(0x10de, 0, "NVIDIA A100-SXM4-80GB", {}) == "A100");
    CHECK(classify_accelerator(0x10de, 0, "Tesla V100-SXM3-32GB-H", {}) == "V100");
    CHECK(classify_accelerator(0x1002, 0, "AMD Instinct MI300X", {}) == "MI300X");
    CHECK(classify_accelerator(0x1002, 0, "AMD Instinct MI325X", {}) == "MI325X");
    CHECK(classify_accelerator(0x1002, 0, "AMD Instinct MI355X", {}) == "MI355X");
}

TEST_CASE("classes from PCI ids when there is no name; unknown otherwise") {
    CHECK(classify_accelerator(0x10de, 0x2335, "", {}) == "H200-SXM");
    CHECK(classify_accelerator(0x10de, 0x2330, "", {}) == "H100-SXM");
    CHECK(classify_accelerator(0x10de, 0x1db8, "", {}) == "V100");
    CHECK(classify_accelerator(0x1002, 0x74a1, "", {}) == "MI300X");
    CHECK(classify_accelerator(0x10de, 0x06d2, "", {}) == "unknown");  // Tesla M2070: not a class we match
    CHECK(classify_accelerator(0x10de, 0x06d2, "Tesla M2070", {}) == "unknown");
}

TEST_CASE("which PCI functions are accelerators") {
    CHECK(is_accelerator(0x10de, 0x0302));
    CHECK(is_accelerator(0x10de, 0x0300));
    CHECK(is_accelerator(0x1002, 0x1200));
    CHECK(is_accelerator(0x1002, 0x0380));
    CHECK_FALSE(is_accelerator(0x1002, 0x0300));  // an ATI management VGA
    CHECK_FALSE(is_accelerator(0x102b, 0x0300));  // Matrox
    CHECK_FALSE(is_accelerator(0x15b3, 0x0207));  // a Mellanox NIC
}

TEST_CASE("fabric summary") {
    NodeInfo n;
    CHECK(fabric_summary(n).empty());
    n.accelerators.resize(8);
    CHECK(fabric_summary(n) == std::vector<std::string>{"PCIe-only"});
    n.nvswitches = 4;
    n.nics.push_back(Nic{"mlx5_0", "infiniband", "", "", {}, "", {}, {}});
    n.nics.push_back(Nic{"eth0", "ethernet", "", "", {}, "", {}, {}});
    CHECK(fabric_summary(n) == std::vector<std::string>{"NVSwitch", "InfiniBand", "Ethernet"});
    n.nvswitches = 0;
    n.accelerators[0].nvlinks_up = 18;
    CHECK(fabric_summary(n)[0] == "NVLink");
    NodeInfo amd;
    amd.accelerators.resize(8);
    for (auto &a : amd.accelerators) a.xgmi_hive = "0x3f7a";
    CHECK(fabric_summary(amd) == std::vector<std::string>{"XGMI"});
}

TEST_CASE("content hash ignores only the hash and the probe time") {
    NodeInfo n;
    n.host = "h";
    n.pus = 4;
    auto a = to_descriptor(n, 1.0), b = to_descriptor(n, 2.0);
    CHECK(a.at("hash") == b.at("hash"));
    n.pus = 3;
    CHECK(to_descriptor(n, 1.0).at("hash") != a.at("hash"));
    CHECK(content_hash(a) == a.at("hash").as_string());
}
