// SHA-256 as the project writes it everywhere: lower-case hex (Nettle).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace shardnet {

std::string to_hex(const uint8_t *bytes, std::size_t n);
std::string sha256_hex(std::string_view data);
// A file's SHA-256, read in blocks (checkpoint shards are gigabytes), and
// its size in bytes. "" with err naming the file when it cannot be read.
std::string sha256_file_hex(const std::string &path, unsigned long long &bytes, std::string &err);

}  // namespace shardnet
