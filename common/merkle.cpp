#include "common/merkle.hpp"

#include <bit>
#include <cstring>
#include <openssl/evp.h>
#include <stdexcept>

namespace shardnet::merkle {

namespace {

// SHA-256 through EVP with the algorithm fetched once and a context kept
// per thread: hashing a million nodes must not fetch a million times.
class Sha256 {
public:
    Sha256() : md_(EVP_MD_fetch(nullptr, "SHA256", nullptr)), ctx_(EVP_MD_CTX_new()) {
        if (!md_ || !ctx_) throw std::runtime_error("OpenSSL has no SHA-256");
    }
    ~Sha256() { EVP_MD_CTX_free(ctx_); EVP_MD_free(md_); }
    Hash digest(uint8_t prefix, const void *a, std::size_t an, const void *b = nullptr, std::size_t bn = 0) {
        Hash out;
        unsigned len = 0;
        if (EVP_DigestInit_ex2(ctx_, md_, nullptr) != 1 || EVP_DigestUpdate(ctx_, &prefix, 1) != 1 ||
            (an && EVP_DigestUpdate(ctx_, a, an) != 1) || (bn && EVP_DigestUpdate(ctx_, b, bn) != 1) ||
            EVP_DigestFinal_ex(ctx_, out.data(), &len) != 1)
            throw std::runtime_error("SHA-256 failed");
        return out;
    }
    Hash plain(std::string_view s) {
        Hash out;
        unsigned len = 0;
        if (EVP_Digest(s.data(), s.size(), out.data(), &len, md_, nullptr) != 1) throw std::runtime_error("SHA-256 failed");
        return out;
    }

private:
    EVP_MD *md_;
    EVP_MD_CTX *ctx_;
};

Sha256 &sha() {
    thread_local Sha256 s;
    return s;
}

// The largest power of two strictly below n (n > 1).
uint64_t split(uint64_t n) { return std::bit_floor(n - 1); }

// MTH(D[start:start+size]) for the subtrees the RFC's recursions reach:
// start is a multiple of the largest power of two <= size, so a perfect
// size is a perfect subtree of the store.
Hash subtree(uint64_t start, uint64_t size, const NodeSource &src) {
    if (size == 1) return src.leaf(start);
    if (std::has_single_bit(size)) {
        const unsigned level = unsigned(std::countr_zero(size));
        if (src.perfect)
            if (auto h = src.perfect(level, start >> level)) return *h;
    }
    const uint64_t k = split(size);
    return node_hash(subtree(start, k, src), subtree(start + k, size - k, src));
}

void path(uint64_t m, uint64_t start, uint64_t n, const NodeSource &src, std::vector<Hash> &out) {
    if (n == 1) return;
    const uint64_t k = split(n);
    if (m < k) {
        path(m, start, k, src, out);
        out.push_back(subtree(start + k, n - k, src));
    } else {
        path(m - k, start + k, n - k, src, out);
        out.push_back(subtree(start, k, src));
    }
}

void subproof(uint64_t m, uint64_t start, uint64_t n, bool whole, const NodeSource &src, std::vector<Hash> &out) {
    if (m == n) {
        if (!whole) out.push_back(subtree(start, n, src));
        return;
    }
    const uint64_t k = split(n);
    if (m <= k) {
        subproof(m, start, k, whole, src, out);
        out.push_back(subtree(start + k, n - k, src));
    } else {
        subproof(m - k, start + k, n - k, false, src, out);
        out.push_back(subtree(start, k, src));
    }
}

bool lsb(uint64_t x) { return x & 1; }

}  // namespace

Hash leaf_hash(std::string_view data) { return sha().digest(0x00, data.data(), data.size()); }
Hash node_hash(const Hash &l, const Hash &r) { return sha().digest(0x01, l.data(), l.size(), r.data(), r.size()); }
Hash empty_root() { return sha().plain(""); }

std::string hex(const Hash &h) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string s(64, '0');
    for (std::size_t i = 0; i < h.size(); ++i) s[2 * i] = kHex[h[i] >> 4], s[2 * i + 1] = kHex[h[i] & 15];
    return s;
}

std::optional<Hash> from_hex(std::string_view s) {
    if (s.size() != 64) return std::nullopt;
    Hash h;
    for (std::size_t i = 0; i < 32; ++i) {
        int v = 0;
        for (char c : s.substr(2 * i, 2)) {
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return std::nullopt;
            v = v * 16 + d;
        }
        h[i] = uint8_t(v);
    }
    return h;
}

Hash root(uint64_t n, const NodeSource &src) { return n == 0 ? empty_root() : subtree(0, n, src); }

std::vector<Hash> inclusion_proof(uint64_t m, uint64_t n, const NodeSource &src) {
    if (m >= n) throw std::out_of_range("inclusion proof of leaf " + std::to_string(m) + " in a tree of " + std::to_string(n));
    std::vector<Hash> out;
    path(m, 0, n, src, out);
    return out;
}

std::vector<Hash> consistency_proof(uint64_t m, uint64_t n, const NodeSource &src) {
    if (m > n) throw std::out_of_range("consistency proof from size " + std::to_string(m) + " to the smaller " + std::to_string(n));
    std::vector<Hash> out;
    if (m > 0 && m < n) subproof(m, 0, n, true, src, out);
    return out;
}

bool verify_inclusion(uint64_t index, uint64_t tree_size, const Hash &leaf, const std::vector<Hash> &proof, const Hash &root_hash) {
    // 1. leaf_index must be below tree_size.
    if (index >= tree_size) return false;
    // 2. fn = leaf_index, sn = tree_size - 1; 3. r = hash.
    uint64_t fn = index, sn = tree_size - 1;
    Hash r = leaf;
    // 4. For each p in the inclusion path:
    for (const Hash &p : proof) {
        if (sn == 0) return false;                      // a. more path than tree
        if (lsb(fn) || fn == sn) {                      // b.
            r = node_hash(p, r);                        //   i.
            if (!lsb(fn))                               //  ii.
                while (!lsb(fn) && fn != 0) fn >>= 1, sn >>= 1;
        } else {
            r = node_hash(r, p);                        //   otherwise i.
        }
        fn >>= 1, sn >>= 1;                             // c.
    }
    // 5. sn == 0 and r == root_hash.
    return sn == 0 && r == root_hash;
}

bool verify_consistency(uint64_t first, uint64_t second, const Hash &first_root, const Hash &second_root,
                        const std::vector<Hash> &proof) {
    if (proof.empty()) {
        if (first == second) return first_root == second_root;
        return first == 0 && first_root == empty_root();
    }
    if (first == 0 || first >= second) return false;
    // 1. (an empty path was handled above) 2. A power-of-two first is a
    // perfect subtree the proof leaves out: its root starts the path.
    std::vector<Hash> path;
    path.reserve(proof.size() + 1);
    if (std::has_single_bit(first)) path.push_back(first_root);
    path.insert(path.end(), proof.begin(), proof.end());
    // 3. fn = first - 1, sn = second - 1. 4. Shift while LSB(fn) is set.
    uint64_t fn = first - 1, sn = second - 1;
    while (lsb(fn)) fn >>= 1, sn >>= 1;
    // 5. fr = sr = the first value.
    Hash fr = path[0], sr = path[0];
    // 6. For each subsequent value c:
    for (std::size_t i = 1; i < path.size(); ++i) {
        const Hash &c = path[i];
        if (sn == 0) return false;                      // a.
        if (lsb(fn) || fn == sn) {                      // b.
            fr = node_hash(c, fr);                      //   i.
            sr = node_hash(c, sr);                      //  ii.
            if (!lsb(fn))                               // iii.
                while (!lsb(fn) && fn != 0) fn >>= 1, sn >>= 1;
        } else {
            sr = node_hash(sr, c);                      //   otherwise i.
        }
        fn >>= 1, sn >>= 1;                             // c.
    }
    // 7. fr == first_hash, sr == second_hash, sn == 0.
    return fr == first_root && sr == second_root && sn == 0;
}

void MemoryTree::append_leaf_hash(const Hash &h) {
    if (levels_.empty()) levels_.emplace_back();
    levels_[0].push_back(h);
    // Each append completes one perfect subtree per trailing one bit of the
    // new size: fold them upwards.
    for (std::size_t l = 0; levels_[l].size() % 2 == 0; ++l) {
        if (l + 1 == levels_.size()) levels_.emplace_back();
        const auto &row = levels_[l];
        levels_[l + 1].push_back(node_hash(row[row.size() - 2], row.back()));
    }
}

NodeSource MemoryTree::source() const {
    NodeSource s;
    s.leaf = [this](uint64_t i) {
        ++reads_;
        return levels_.at(0).at(i);
    };
    s.perfect = [this](unsigned level, uint64_t i) -> std::optional<Hash> {
        if (level >= levels_.size() || i >= levels_[level].size()) return std::nullopt;
        ++reads_;
        return levels_[level][i];
    };
    return s;
}

void RootBuilder::add_leaf_hash(const Hash &h) {
    stack_.push_back(h);
    ++size_;
    // Each trailing one bit of the new count completes a pair of equal subtrees.
    for (uint64_t n = size_; (n & 1) == 0; n >>= 1) {
        const Hash right = stack_.back();
        stack_.pop_back();
        stack_.back() = node_hash(stack_.back(), right);
    }
}

Hash RootBuilder::root() const {
    if (stack_.empty()) return empty_root();
    Hash r = stack_.back();
    for (std::size_t i = stack_.size() - 1; i-- > 0;) r = node_hash(stack_[i], r);
    return r;
}

}  // namespace shardnet::merkle
