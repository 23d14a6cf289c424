// SHA-256 as the project writes it everywhere: lower-case hex (Nettle).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace shardnet {

std::string to_hex(const uint8_t *bytes, std::size_t n);
std::string sha256_hex(std::string_view data);

}  // namespace shardnet
