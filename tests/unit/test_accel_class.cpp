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
    CHECK(is_accelerator(0x0302, false));  // 3D controller
    CHECK(is_accelerator(0x1200, false));  // processing accelerator
    CHECK(is_accelerator(0x0300, true));   // VGA with a CUDA/OpenCL/RSMI device (a Radeon, a GeForce)
    CHECK(is_accelerator(0x0380, true));   // display controller with one (Instinct, Intel Max)
    CHECK_FALSE(is_accelerator(0x0300, false));  // a management VGA: no compute stack on it
    CHECK_FALSE(is_accelerator(0x0380, false));
    CHECK_FALSE(is_accelerator(0x0207, true));   // a NIC is not a GPU whatever sits on it
    CHECK_FALSE(is_accelerator(0x0680, false));  // a bridge (NVSwitch)
}

TEST_CASE("look-alike names do not borrow a class") {
    // Each was a substring match before: A30/RTX A1000 -> A100, GH200 ->
    // H200-SXM, Quadro GV100 / TITAN V -> V100.
    CHECK(classify_accelerator(0x10de, 0x20b7, "NVIDIA A30", {}) == "A30");
    CHECK(classify_accelerator(0x10de, 0x25b0, "NVIDIA RTX A1000", {}) == "RTX-A1000");
    CHECK(classify_accelerator(0x10de, 0x2342, "NVIDIA GH200 480GB", {}) == "GH200");
    CHECK(classify_accelerator(0x10de, 0x1dba, "Quadro GV100", {}) == "Quadro-GV100");
    CHECK(classify_accelerator(0x10de, 0x1d81, "NVIDIA TITAN V", {}) == "TITAN-V");
    CHECK(classify_accelerator(0x10de, 0x2236, "NVIDIA A10", {}) == "A10");
    CHECK(classify_accelerator(0x10de, 0x26b9, "NVIDIA L40S", {}) == "L40S");
    CHECK(classify_accelerator(0x10de, 0x26b5, "NVIDIA L40", {}) == "L40");
    // Names that merely contain a class's letters: unknown (with their ids in the descriptor).
    CHECK(classify_accelerator(0x10de, 0x1234, "NVIDIA A1000X", {}) == "unknown");
    CHECK(classify_accelerator(0x10de, 0x1234, "NVIDIA GV1000", {}) == "unknown");
    CHECK(classify_accelerator(0x10de, 0x1234, "XH200", {}) == "unknown");
    CHECK(classify_accelerator(0x10de, 0x1234, "NVIDIA H100", {}) == "unknown");  // SXM or PCIe: undecided
    // Two families in one name decide nothing; the id then does, when it is exact.
    CHECK(classify_accelerator(0x1002, 0x740c, "Aldebaran/MI200 [Instinct MI250X/MI250]", {}) == "unknown");
    CHECK(classify_accelerator(0x1002, 0x7408, "Aldebaran/MI200 [Instinct MI250X/MI250]", {}) == "MI250X");
}

TEST_CASE("PCI-database names (what hwloc gives without NVML) classify like NVML's") {
    CHECK(classify_accelerator(0x10de, 0, "GA100GL [A30 PCIe]", {}) == "A30");
    CHECK(classify_accelerator(0x10de, 0, "GH100 [GH200 120GB / 480GB]", {}) == "GH200");
    CHECK(classify_accelerator(0x10de, 0, "GH100 [H200 SXM 141GB]", {}) == "H200-SXM");
    CHECK(classify_accelerator(0x10de, 0, "GV100GL [Tesla V100 SXM3 32GB]", {}) == "V100");
    CHECK(classify_accelerator(0x10de, 0, "GV100GL [Quadro GV100]", {}) == "Quadro-GV100");
    CHECK(classify_accelerator(0x10de, 0, "GV100 [TITAN V]", {}) == "TITAN-V");
    CHECK(classify_accelerator(0x10de, 0, "GV100GL [Tesla GV100 SXM2-16GB SKU 890]", {}) == "unknown");
}

TEST_CASE("model words are whole words") {
    CHECK(model_words("Tesla V100-SXM3-32GB-H") == std::vector<std::string>{"TESLA", "V100", "SXM3", "32GB", "H"});
    CHECK(model_words("") .empty());
    CHECK(model_words("  a--b ") == std::vector<std::string>{"A", "B"});
}

TEST_CASE("NVSwitches by PCI id") {
    CHECK(is_nvswitch_id(0x10de, 0x1af1));
    CHECK(is_nvswitch_id(0x10de, 0x22a3));
    CHECK_FALSE(is_nvswitch_id(0x10de, 0x1db8));
    CHECK_FALSE(is_nvswitch_id(0x1002, 0x1af1));
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

TEST_CASE("a model name counts only on its maker's device") {
    // An NVIDIA name on a Habana (1da3) or AMD function, an AMD name on an
    // NVIDIA one: a relabelled or mis-captured device is unknown, not a class.
    CHECK(classify_accelerator(0x1da3, 0x1000, "Tesla V100-SXM3-32GB", std::nullopt) == "unknown");
    CHECK(classify_accelerator(0x1002, 0x0001, "NVIDIA H100 80GB HBM3", std::nullopt) == "unknown");
    CHECK(classify_accelerator(0x10de, 0x0001, "AMD Instinct MI300X", std::nullopt) == "unknown");
    CHECK(classify_accelerator(0x10de, 0x0000, "Tesla V100-SXM3-32GB", std::nullopt) == "V100");
    CHECK(classify_accelerator(0x1002, 0x0000, "AMD Instinct MI300X", std::nullopt) == "MI300X");
}
