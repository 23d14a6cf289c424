// The receipt log in SQLite: RFC 9162's tree (common/merkle.hpp) with each
// perfect subtree stored once its last leaf is in. Appending leaf n stores
// (0, n) and, for every level l where n + 1 is a multiple of 2^l, the node
// (l, (n + 1) / 2^l - 1) from its two halves: O(log n) reads and writes.
#include <stdexcept>

#include "broker/receipts/receipts.hpp"
#include "broker/store/store.hpp"

namespace shardnet::broker::receipts {

namespace {

std::string bytes(const merkle::Hash &h) { return std::string(reinterpret_cast<const char *>(h.data()), h.size()); }

std::optional<merkle::Hash> hash_of(const std::string &b) {
    if (b.size() != 32) return std::nullopt;
    merkle::Hash h;
    std::copy(b.begin(), b.end(), h.begin());
    return h;
}

merkle::Hash must_read(Store &store, int level, long long index) {
    auto h = hash_of(store.receipts().log_node(level, index));
    if (!h)
        throw std::runtime_error("receipt log damaged: node " + std::to_string(level) + "/" + std::to_string(index) +
                                 " is missing from log_nodes");
    return *h;
}

}  // namespace

long long log_append(Store &store, const merkle::Hash &leaf) {
    const long long n = store.receipts().log_size();
    store.receipts().put_log_node(0, n, bytes(leaf));
    merkle::Hash right = leaf;
    for (int level = 1; level < 63 && ((n + 1) & ((1LL << level) - 1)) == 0; ++level) {
        const long long index = ((n + 1) >> level) - 1;
        const merkle::Hash left = must_read(store, level - 1, 2 * index);
        right = merkle::node_hash(left, right);
        store.receipts().put_log_node(level, index, bytes(right));
    }
    return n;
}

merkle::NodeSource log_source(Store &store) {
    return merkle::NodeSource{
        [&store](uint64_t index) { return must_read(store, 0, (long long)index); },
        [&store](unsigned level, uint64_t index) -> std::optional<merkle::Hash> { return must_read(store, int(level), (long long)index); },
    };
}

std::string read_chain_link(const boost::json::value &v, ChainLink &out) {
    const auto *o = v.if_object();
    if (!o) return "receipt: expected {\"seq\": N, \"digest\": HEX}";
    for (const auto &kv : *o)
        if (kv.key() != "seq" && kv.key() != "digest") return "receipt." + std::string(kv.key()) + ": unknown field";
    const auto *seq = o->if_contains("seq");
    const auto *digest = o->if_contains("digest");
    if (!seq || !seq->is_int64() || seq->as_int64() < 1 || seq->as_int64() > (1LL << 31))
        return "receipt.seq: expected an integer from 1 to 2^31";
    if (!digest || !digest->is_string() || !merkle::from_hex(digest->as_string()))
        return "receipt.digest: expected 64 lower-case hex digits (the SHA-256 of the sender's envelope)";
    out = ChainLink{seq->as_int64(), std::string(digest->as_string())};
    return "";
}

}  // namespace shardnet::broker::receipts
