// The Merkle tree of an append-only log as RFC 9162 (Certificate
// Transparency 2.0) section 2.1 defines it, with SHA-256:
//   leaf = SHA-256(0x00 || data), node = SHA-256(0x01 || left || right),
//   MTH(D[n]) splits at k, the largest power of two below n;
//   MTH of no leaves = SHA-256("").
// Proofs are made from a NodeSource (the log's store), so a broker can back
// it with its database; verification follows RFC 9162 2.1.3.2 and 2.1.4.2
// step by step and needs nothing but the proof.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardnet::merkle {

using Hash = std::array<uint8_t, 32>;

Hash leaf_hash(std::string_view data);
Hash node_hash(const Hash &left, const Hash &right);
Hash empty_root();
std::string hex(const Hash &h);
std::optional<Hash> from_hex(std::string_view s);

// Where the tree's hashes come from. Every hash a root or a proof needs is
// either a perfect subtree (2^level leaves from index << level: never
// changes once its last leaf is in) or is folded from O(log n) of them, so
// a store that keeps perfect subtrees answers roots and proofs with
// O(log n) reads. perfect() may return nullopt for a subtree it does not
// keep; it is then hashed from its halves, down to leaf(), the one read a
// store must answer.
struct NodeSource {
    std::function<Hash(uint64_t index)> leaf;
    std::function<std::optional<Hash>(unsigned level, uint64_t index)> perfect;   // may be empty
};

// MTH(D[0:n]) with n leaves (RFC 9162 2.1.1).
Hash root(uint64_t n, const NodeSource &src);
// PATH(m, D[0:n]), the inclusion proof of leaf m < n, from the leaf up (2.1.3.1).
std::vector<Hash> inclusion_proof(uint64_t m, uint64_t n, const NodeSource &src);
// PROOF(m, D[0:n]) for 0 < m < n (2.1.4.1); empty for m == 0 or m == n.
std::vector<Hash> consistency_proof(uint64_t m, uint64_t n, const NodeSource &src);

// RFC 9162 2.1.3.2: does path prove leaf (a leaf hash) at index in the tree
// of tree_size leaves with root?
bool verify_inclusion(uint64_t index, uint64_t tree_size, const Hash &leaf, const std::vector<Hash> &path, const Hash &root);
// RFC 9162 2.1.4.2 for 0 < first < second. Outside the RFC's algorithm: a
// tree is consistent with itself (same size and root, empty proof) and
// every tree extends the empty one (first == 0, its root SHA-256(""),
// empty proof); anything else, first > second included, fails.
bool verify_consistency(uint64_t first, uint64_t second, const Hash &first_root, const Hash &second_root,
                        const std::vector<Hash> &proof);

// An in-memory log that keeps every perfect subtree as leaves are appended
// (2n hashes for n leaves): the reference store, the benchmark's, and what
// a database-backed one mirrors (one row per completed subtree).
class MemoryTree {
public:
    void append_leaf_hash(const Hash &h);
    void append(std::string_view data) { append_leaf_hash(leaf_hash(data)); }
    uint64_t size() const { return levels_.empty() ? 0 : levels_[0].size(); }
    // A NodeSource over this tree (valid while the tree lives).
    NodeSource source() const;
    std::size_t reads() const { return reads_; }   // hashes read through source() so far
    void reset_reads() { reads_ = 0; }

private:
    std::vector<std::vector<Hash>> levels_;   // levels_[l][i]: perfect subtree (l, i)
    mutable std::size_t reads_ = 0;
};

// MTH of leaves given one at a time, in order, with O(log n) hashes held:
// the root of a list too long to keep (a sealed checkpoint's files). Holds
// the perfect subtrees of the leaves so far, one per set bit of the count;
// the root folds them from the smallest up, as MTH's split does.
class RootBuilder {
public:
    void add_leaf_hash(const Hash &h);
    void add(std::string_view data) { add_leaf_hash(leaf_hash(data)); }
    uint64_t size() const { return size_; }
    Hash root() const;

private:
    std::vector<Hash> stack_;   // perfect subtrees, largest first
    uint64_t size_ = 0;
};

}  // namespace shardnet::merkle
