// Accelerator classes the broker matches on, from PCI ids and model names.
// A device neither table knows is "unknown": nothing is guessed.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace shardnet::probe {

// vendor/device: PCI ids; model: NVML/RSMI/PCI name or ""; memory when known.
std::string classify_accelerator(uint16_t vendor, uint16_t device, const std::string &model,
                                 std::optional<uint64_t> memory_bytes);

// Is this PCI function an accelerator (GPU or compute co-processor)?
bool is_accelerator(uint16_t vendor, uint16_t class_id);

std::string vendor_name(uint16_t vendor);

}  // namespace shardnet::probe
