// Base64 (RFC 4648) as DSSE envelopes carry payloads and signatures: written
// in the standard alphabet with padding; read in either the standard or the
// URL-safe alphabet (DSSE's protocol says verifiers must accept both), with
// or without padding, and nothing else (no whitespace, no stray bytes).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace shardnet {

std::string base64_encode(std::string_view bytes);
// The bytes, or nullopt when text is not base64 of either alphabet (mixed
// alphabets, a bad length, bits after the last byte or misplaced '=').
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace shardnet
