#include "hwloc-probe/accel_class.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace shardnet::probe {

namespace {

struct IdRule { uint16_t vendor, device; const char *cls; };
// Only ids we are sure of; the model-name rules below cover the rest.
constexpr IdRule kIds[] = {
    {0x10de, 0x1db1, "V100"}, {0x10de, 0x1db4, "V100"}, {0x10de, 0x1db5, "V100"},
    {0x10de, 0x1db6, "V100"}, {0x10de, 0x1db8, "V100"}, {0x10de, 0x1df6, "V100"},
    {0x10de, 0x20b0, "A100"}, {0x10de, 0x20b2, "A100"}, {0x10de, 0x20b5, "A100"}, {0x10de, 0x20f1, "A100"},
    {0x10de, 0x2330, "H100-SXM"}, {0x10de, 0x2331, "H100-PCIe"},
    {0x10de, 0x2335, "H200-SXM"}, {0x10de, 0x233b, "H200-NVL"},
    {0x10de, 0x2901, "B200"},
    {0x1002, 0x74a1, "MI300X"}, {0x1002, 0x74a5, "MI325X"},
};

struct NameRule { const char *needle; const char *cls; };
// Ordered: the first needle found in the upper-cased model wins.
constexpr NameRule kNames[] = {
    {"GB200", "GB200"}, {"B300", "B300"}, {"B200", "B200"},
    {"H200 NVL", "H200-NVL"}, {"H200", "H200-SXM"},
    {"H100 PCIE", "H100-PCIe"}, {"H100 NVL", "H100-NVL"}, {"H100 SXM", "H100-SXM"}, {"H100 80GB HBM3", "H100-SXM"},
    {"A100", "A100"}, {"V100", "V100"},
    {"RTX PRO 6000", "RTX-PRO-6000"},
    {"MI355X", "MI355X"}, {"MI325X", "MI325X"}, {"MI300X", "MI300X"},
};

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::toupper(c)); });
    return s;
}

}  // namespace

std::string classify_accelerator(uint16_t vendor, uint16_t device, const std::string &model,
                                 std::optional<uint64_t>) {
    // The model string is the more specific evidence (it tells SXM from NVL
    // on the same die); ids decide when there is no name.
    const std::string m = upper(model);
    for (const auto &r : kNames)
        if (!m.empty() && m.find(r.needle) != std::string::npos) return r.cls;
    for (const auto &r : kIds)
        if (r.vendor == vendor && r.device == device) return r.cls;
    return "unknown";
}

bool is_accelerator(uint16_t vendor, uint16_t class_id) {
    if (class_id == 0x0302 || (class_id >> 8) == 0x12) return true;  // 3D controller, processing accelerator
    if (class_id == 0x0380) return vendor == 0x1002;                  // AMD Instinct as "display controller"
    // VGA: NVIDIA boards only; a server's management VGA (ASPEED, Matrox,
    // an old ATI) is not a compute device.
    return class_id == 0x0300 && vendor == 0x10de;
}

std::string vendor_name(uint16_t vendor) {
    switch (vendor) {
    case 0x10de: return "nvidia";
    case 0x1002: return "amd";
    case 0x8086: return "intel";
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04x", vendor);
    return buf;
}

}  // namespace shardnet::probe
