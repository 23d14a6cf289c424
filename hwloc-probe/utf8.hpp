// Strings from a topology (model names, NIC names, UUIDs) reach the JSON
// descriptor; JSON must be UTF-8 (RFC 8259 section 8.1).
#pragma once
#include <string>
#include <string_view>

namespace shardnet::probe {

// S with every byte that does not start a well-formed UTF-8 sequence
// (Unicode 15, table 3-7: no overlongs, no surrogates, nothing above
// U+10FFFF) replaced by U+FFFD; valid input comes back unchanged.
std::string valid_utf8(std::string_view s);

// For one-line human output: valid_utf8, and each control character
// (C0, DEL) replaced by '?'.
std::string printable(std::string_view s);

}  // namespace shardnet::probe
