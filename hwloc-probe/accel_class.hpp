// Accelerator classes the broker matches on, from PCI ids and model names.
// A device neither table knows is "unknown": nothing is guessed.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardnet::probe {

// vendor/device: PCI ids; model: NVML/RSMI/OpenCL/PCI-database name or "".
// The model name decides when its whole words name exactly one class (it
// tells SXM from NVL on the same die); else the exact PCI id; else "unknown".
std::string classify_accelerator(uint16_t vendor, uint16_t device, const std::string &model,
                                 std::optional<uint64_t> memory_bytes);

// The upper-cased words of a model name, split at anything not a letter or
// digit: "Tesla V100-SXM3-32GB-H" -> TESLA V100 SXM3 32GB H.
std::vector<std::string> model_words(const std::string &model);

// Is this PCI function an accelerator? 3D controllers (0x0302) and
// processing accelerators (0x12xx) are; display-class functions (VGA 0x0300,
// other display 0x0380) only with evidence of a compute stack on them
// (an accelerator OS device, or a GPU compute driver bound): a server's
// management VGA (ASPEED, Matrox) has neither.
bool is_accelerator(uint16_t class_id, bool compute_evidence);

// NVSwitch PCI functions by id, for topologies whose NVSwitches carry no
// hwloc "NVSwitch" subtype (that needs hwloc's NVML backend).
bool is_nvswitch_id(uint16_t vendor, uint16_t device);

std::string vendor_name(uint16_t vendor);

}  // namespace shardnet::probe
