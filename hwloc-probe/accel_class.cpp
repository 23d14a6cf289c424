#include "hwloc-probe/accel_class.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <initializer_list>

namespace shardnet::probe {

namespace {

// Every id below is quoted from the PCI ID database, pci.ids version
// 2026.08.22 (https://github.com/pciutils/pciids, file pci.ids), as
// "vendor device  name". Ids whose entry names more than one product
// ("[Instinct MI250X/MI250]", "[H100]", "[H100 96GB]") are left out: a
// device with them is "unknown" unless its model name decides.
struct IdRule { uint16_t vendor, device; const char *cls; };
constexpr IdRule kIds[] = {
    // 10de NVIDIA Corporation
    {0x10de, 0x1d81, "TITAN-V"},       // 1d81  GV100 [TITAN V]
    {0x10de, 0x1dba, "Quadro-GV100"},  // 1dba  GV100GL [Quadro GV100]
    {0x10de, 0x1db1, "V100"},          // 1db1  GV100GL [Tesla V100 SXM2 16GB]
    {0x10de, 0x1db2, "V100"},          // 1db2  GV100GL [Tesla V100 DGXS 16GB]
    {0x10de, 0x1db3, "V100"},          // 1db3  GV100GL [Tesla V100 FHHL 16GB]
    {0x10de, 0x1db4, "V100"},          // 1db4  GV100GL [Tesla V100 PCIe 16GB]
    {0x10de, 0x1db5, "V100"},          // 1db5  GV100GL [Tesla V100 SXM2 32GB]
    {0x10de, 0x1db6, "V100"},          // 1db6  GV100GL [Tesla V100 PCIe 32GB]
    {0x10de, 0x1db7, "V100"},          // 1db7  GV100GL [Tesla V100 DGXS 32GB]
    {0x10de, 0x1db8, "V100"},          // 1db8  GV100GL [Tesla V100 SXM3 32GB]
    {0x10de, 0x1df5, "V100"},          // 1df5  GV100GL [Tesla V100 SXM2 16GB]
    {0x10de, 0x20b0, "A100"},          // 20b0  GA100 [A100 SXM4 40GB]
    {0x10de, 0x20b1, "A100"},          // 20b1  GA100 [A100 PCIe 40GB]
    {0x10de, 0x20b2, "A100"},          // 20b2  GA100 [A100 SXM4 80GB]
    {0x10de, 0x20b3, "A100"},          // 20b3  GA100 [A100-SXM-64GB]
    {0x10de, 0x20b5, "A100"},          // 20b5  GA100 [A100 PCIe 80GB]
    {0x10de, 0x20f1, "A100"},          // 20f1  GA100 [A100 PCIe 40GB]
    {0x10de, 0x20b7, "A30"},           // 20b7  GA100GL [A30 PCIe]
    {0x10de, 0x2235, "A40"},           // 2235  GA102GL [A40]
    {0x10de, 0x2236, "A10"},           // 2236  GA102GL [A10]
    {0x10de, 0x25b0, "RTX-A1000"},     // 25b0  GA107GL [RTX A1000]
    {0x10de, 0x26b5, "L40"},           // 26b5  AD102GL [L40]
    {0x10de, 0x26b9, "L40S"},          // 26b9  AD102GL [L40S]
    {0x10de, 0x2330, "H100-SXM"},      // 2330  GH100 [H100 SXM5 80GB]
    {0x10de, 0x2337, "H100-SXM"},      // 2337  GH100 [H100 SXM5 64GB]
    {0x10de, 0x2338, "H100-SXM"},      // 2338  GH100 [H100 SXM5 96GB]
    {0x10de, 0x2339, "H100-SXM"},      // 2339  GH100 [H100 SXM5 94GB]
    {0x10de, 0x2331, "H100-PCIe"},     // 2331  GH100 [H100 PCIe]
    {0x10de, 0x2335, "H200-SXM"},      // 2335  GH100 [H200 SXM 141GB]
    {0x10de, 0x233b, "H200-NVL"},      // 233b  GH100 [H200 NVL]
    {0x10de, 0x2342, "GH200"},         // 2342  GH100 [GH200 120GB / 480GB]
    {0x10de, 0x2348, "GH200"},         // 2348  GH100 [GH200 144G HBM3e]
    {0x10de, 0x2901, "B200"},          // 2901  GB100 [B200]
    {0x10de, 0x2909, "B200"},          // 2909  GB100 [HGX B200 168GB]
    {0x10de, 0x2941, "GB200"},         // 2941  GB100 [HGX GB200]
    {0x10de, 0x3182, "B300"},          // 3182  GB110 [B300 SXM6 AC]
    {0x10de, 0x2bb1, "RTX-PRO-6000"},  // 2bb1  GB202GL [RTX PRO 6000 Blackwell Workstation Edition]
    {0x10de, 0x2bb4, "RTX-PRO-6000"},  // 2bb4  GB202GL [RTX PRO 6000 Blackwell Max-Q Workstation Edition]
    {0x10de, 0x2bb5, "RTX-PRO-6000"},  // 2bb5  GB202GL [RTX PRO 6000 Blackwell Server Edition]
    // 1002 Advanced Micro Devices, Inc. [AMD/ATI]
    {0x1002, 0x7408, "MI250X"},        // 7408  Aldebaran/MI200 [Instinct MI250X]
    {0x1002, 0x740f, "MI210"},         // 740f  Aldebaran/MI200 [Instinct MI210]
    {0x1002, 0x74a0, "MI300A"},        // 74a0  Aqua Vanjaram [Instinct MI300A]
    {0x1002, 0x74a1, "MI300X"},        // 74a1  Aqua Vanjaram [Instinct MI300X]
    {0x1002, 0x74a9, "MI300X"},        // 74a9  Aqua Vanjaram [Instinct MI300X HF]
    {0x1002, 0x74bd, "MI300X"},        // 74bd  Aqua Vanjaram [Instinct MI300X HF]
    {0x1002, 0x74b5, "MI300X"},        // 74b5  Aqua Vanjaram [Instinct MI300X VF]
    {0x1002, 0x74a5, "MI325X"},        // 74a5  Aqua Vanjaram [Instinct MI325X]
    {0x1002, 0x74b9, "MI325X"},        // 74b9  Aqua Vanjaram [Instinct MI325X VF]
    {0x1002, 0x75a3, "MI355X"},        // 75a3  Aqua Vanjaram [Instinct MI355X]
};

// Model-name rules: a rule matches when all its words are whole words of
// the model. Rules of one family are ordered specific to general and the
// first match wins; a name matching two families (pci.ids's
// "[Instinct MI250X/MI250]") decides nothing. The words are those of the
// product names in the pci.ids entries above, which are also the names
// NVML and ROCm SMI report ("NVIDIA H100 80GB HBM3" is NVML's H100 SXM5,
// as on the DGX H100; "Tesla V100-SXM3-32GB-H" is the DGX-2H fixture's).
struct NameRule { int family; std::initializer_list<const char *> words; const char *cls; };
// Families 1-17 are NVIDIA's, 18 on AMD's: a name only counts on its maker's device.
constexpr int kFirstAmdFamily = 18;
const NameRule kNames[] = {
    {1, {"GB200"}, "GB200"},
    {2, {"GH200"}, "GH200"},
    {3, {"B300"}, "B300"},
    {4, {"B200"}, "B200"},
    {5, {"H200", "NVL"}, "H200-NVL"}, {5, {"H200"}, "H200-SXM"},
    {6, {"H100", "PCIE"}, "H100-PCIe"}, {6, {"H100", "NVL"}, "H100-NVL"}, {6, {"H100", "SXM5"}, "H100-SXM"},
    {6, {"H100", "SXM"}, "H100-SXM"}, {6, {"H100", "HBM3"}, "H100-SXM"},
    {7, {"A100"}, "A100"},
    {8, {"A30"}, "A30"},
    {9, {"A10"}, "A10"},
    {10, {"A40"}, "A40"},
    {11, {"L40S"}, "L40S"},
    {12, {"L40"}, "L40"},
    {13, {"RTX", "A1000"}, "RTX-A1000"},
    {14, {"RTX", "PRO", "6000"}, "RTX-PRO-6000"},
    {15, {"V100"}, "V100"},
    {16, {"QUADRO", "GV100"}, "Quadro-GV100"},
    {17, {"TITAN", "V"}, "TITAN-V"},
    {18, {"MI355X"}, "MI355X"},
    {19, {"MI325X"}, "MI325X"},
    {20, {"MI300X"}, "MI300X"},
    {21, {"MI300A"}, "MI300A"},
    {22, {"MI250X"}, "MI250X"}, {23, {"MI250"}, "MI250"},
    {24, {"MI210"}, "MI210"},
};

std::string class_from_name(const std::string &model, uint16_t vendor) {
    const auto words = model_words(model);
    const auto has = [&](const char *w) { return std::find(words.begin(), words.end(), w) != words.end(); };
    const char *found = nullptr;
    int found_family = 0;
    for (const auto &r : kNames) {
        if (r.family == found_family) continue;  // that family already decided
        if (vendor != (r.family >= kFirstAmdFamily ? 0x1002 : 0x10de)) continue;
        if (!std::all_of(r.words.begin(), r.words.end(), has)) continue;
        if (found) return "";  // two families: the name is ambiguous
        found = r.cls;
        found_family = r.family;
    }
    return found ? found : "";
}

}  // namespace

std::vector<std::string> model_words(const std::string &model) {
    std::vector<std::string> words;
    std::string w;
    for (unsigned char c : model) {
        if (std::isalnum(c)) {
            w += char(std::toupper(c));
        } else if (!w.empty()) {
            words.push_back(std::move(w));
            w.clear();
        }
    }
    if (!w.empty()) words.push_back(std::move(w));
    return words;
}

std::string classify_accelerator(uint16_t vendor, uint16_t device, const std::string &model,
                                 std::optional<uint64_t>) {
    if (auto cls = class_from_name(model, vendor); !cls.empty()) return cls;
    for (const auto &r : kIds)
        if (r.vendor == vendor && r.device == device) return r.cls;
    return "unknown";
}

bool is_accelerator(uint16_t class_id, bool compute_evidence) {
    if (class_id == 0x0302 || (class_id >> 8) == 0x12) return true;  // 3D controller, processing accelerator
    if (class_id == 0x0300 || class_id == 0x0380) return compute_evidence;
    return false;
}

bool is_nvswitch_id(uint16_t vendor, uint16_t device) {
    // pci.ids 2026.08.22: 10de 1af1  GA100 [A100 NVSwitch]; 10de 22a3  GH100 [H100 NVSwitch].
    // 10de 1ac2 is not in pci.ids: it is the DGX-2's first-generation
    // NVSwitch as hwloc's capture of a DGX-2 records it (its test topology
    // nvidiaDGX2.xml: class 0680, subtype "NVSwitch", twelve of them).
    return vendor == 0x10de && (device == 0x1ac2 || device == 0x1af1 || device == 0x22a3);
}

std::string vendor_name(uint16_t vendor) {
    switch (vendor) {
    case 0x10de: return "nvidia";
    case 0x1002: return "amd";
    case 0x8086: return "intel";
    case 0x1da3: return "habana";   // pci.ids: Habana Labs Ltd. (Intel Gaudi)
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04x", vendor);
    return buf;
}

}  // namespace shardnet::probe
