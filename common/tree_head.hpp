// A signed tree head of the receipt log (doc/receipts.md): the log's size
// and Merkle root (common/merkle.hpp) at a time, as a DSSE envelope of
// payloadType kTreeHeadType signed by the broker's key. Receipts are shown
// to be in the log by inclusion proofs against a head, and a later head is
// shown to extend an earlier one by a consistency proof.
#pragma once
#include <string>
#include <string_view>

#include "common/dsse.hpp"
#include "common/merkle.hpp"

namespace shardnet::receipt {

inline constexpr const char *kTreeHeadType = "application/vnd.shardnet.treehead+json";

struct TreeHead {
    unsigned long long tree_size = 0;
    merkle::Hash root_hash{};
    std::string timestamp;   // RFC 3339 UTC (utc_time)
};

// {"tree_size":N,"root_hash":"HEX","timestamp":"..."}
std::string tree_head_json(const TreeHead &h);
std::string parse_tree_head(std::string_view payload, TreeHead &out);
std::string sign_tree_head(const SigningKey &key, const TreeHead &h, dsse::Envelope &out);
// Its signature against keys, its payloadType and its fields; "" or what is wrong.
std::string verify_tree_head(const dsse::Envelope &env, const std::vector<SigningKey> &keys, TreeHead &out);

}  // namespace shardnet::receipt
