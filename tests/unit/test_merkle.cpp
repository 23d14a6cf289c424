#include <doctest/doctest.h>
#include <nettle/sha2.h>
#include <string>
#include <vector>

#include "common/merkle.hpp"

using namespace shardnet::merkle;

namespace {

// RFC 9162 2.1 written out a second time, on the data, with another SHA-256
// (Nettle's): the reference the store-backed code is checked against.
std::string sha(const std::string &s) {
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, s.size(), reinterpret_cast<const uint8_t *>(s.data()));
    std::string out(32, '\0');
    sha256_digest(&c, 32, reinterpret_cast<uint8_t *>(out.data()));
    return out;
}
using D = std::vector<std::string>;
D slice(const D &d, std::size_t a, std::size_t b) { return D(d.begin() + long(a), d.begin() + long(b)); }
std::size_t k_of(std::size_t n) { std::size_t k = 1; while (k * 2 < n) k *= 2; return k; }
std::string mth(const D &d) {
    if (d.empty()) return sha("");
    if (d.size() == 1) return sha(std::string(1, '\0') + d[0]);
    const std::size_t k = k_of(d.size());
    return sha("\x01" + mth(slice(d, 0, k)) + mth(slice(d, k, d.size())));
}
D path(std::size_t m, const D &d) {
    if (d.size() == 1) return {};
    const std::size_t k = k_of(d.size());
    D p = m < k ? path(m, slice(d, 0, k)) : path(m - k, slice(d, k, d.size()));
    p.push_back(m < k ? mth(slice(d, k, d.size())) : mth(slice(d, 0, k)));
    return p;
}
D subproof(std::size_t m, const D &d, bool b) {
    if (m == d.size()) return b ? D{} : D{mth(d)};
    const std::size_t k = k_of(d.size());
    D p = m <= k ? subproof(m, slice(d, 0, k), b) : subproof(m - k, slice(d, k, d.size()), false);
    p.push_back(m <= k ? mth(slice(d, k, d.size())) : mth(slice(d, 0, k)));
    return p;
}
std::string str(const Hash &h) { return std::string(h.begin(), h.end()); }
D strs(const std::vector<Hash> &v) {
    D out;
    for (const auto &h : v) out.push_back(str(h));
    return out;
}
Hash flip(Hash h) { h[7] ^= 1; return h; }

std::string unhex(const std::string &h) {
    std::string out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(char(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
}

}  // namespace

TEST_CASE("the empty tree's hash is SHA-256 of nothing; leaves and nodes are prefixed") {
    CHECK(hex(empty_root()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    MemoryTree t;
    CHECK(root(0, t.source()) == empty_root());
    CHECK(str(leaf_hash("ab")) == sha(std::string("\0ab", 3)));
    CHECK(str(node_hash(leaf_hash("a"), leaf_hash("b"))) == sha("\x01" + str(leaf_hash("a")) + str(leaf_hash("b"))));
    CHECK(from_hex(hex(leaf_hash("x"))) == leaf_hash("x"));
    CHECK(!from_hex("E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"));
}

TEST_CASE("Certificate Transparency's reference tree: roots for sizes 1..8 and two inclusion paths") {
    const D data = {"", "\x00", "\x10", "\x20\x21", "\x30\x31", "\x40\x41\x42\x43", "\x50\x51\x52\x53\x54\x55\x56\x57",
                    "\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f"};
    D fixed = data;
    fixed[1] = std::string(1, '\0');   // "\x00" above is an empty C string
    const char *roots[] = {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                           "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
                           "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
                           "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                           "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
                           "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
                           "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
                           "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};
    MemoryTree t;
    for (std::size_t n = 1; n <= 8; ++n) {
        t.append(fixed[n - 1]);
        CHECK(hex(root(n, t.source())) == roots[n - 1]);
    }
    const D p0 = {unhex("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
                  unhex("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                  unhex("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")};
    const D p5 = {unhex("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
                  unhex("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
                  unhex("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")};
    CHECK(strs(inclusion_proof(0, 8, t.source())) == p0);
    CHECK(strs(inclusion_proof(5, 8, t.source())) == p5);
}

TEST_CASE("roots and proofs for every n in 1..64, every leaf and every old size match the RFC's definitions; tampered proofs fail") {
    D data;
    MemoryTree t;
    std::vector<Hash> roots{empty_root()};
    // With no stored subtrees every hash is made from the leaves: the same answers.
    NodeSource leaves_only;
    leaves_only.leaf = [&](uint64_t i) { return t.source().leaf(i); };
    for (std::size_t n = 1; n <= 64; ++n) {
        data.push_back("leaf " + std::to_string(n - 1) + std::string(n % 5, 'x'));
        t.append(data.back());
        CAPTURE(n);
        const Hash r = root(n, t.source());
        roots.push_back(r);
        REQUIRE(str(r) == mth(data));
        CHECK(root(n, leaves_only) == r);
        for (std::size_t m = 0; m < n; ++m) {
            CAPTURE(m);
            const auto p = inclusion_proof(m, n, t.source());
            REQUIRE(strs(p) == path(m, data));
            CHECK(inclusion_proof(m, n, leaves_only) == p);
            const Hash leaf = leaf_hash(data[m]);
            CHECK(verify_inclusion(m, n, leaf, p, r));
            CHECK(!verify_inclusion(m, n, flip(leaf), p, r));
            CHECK(!verify_inclusion(m, n, leaf, p, flip(r)));
            CHECK(!verify_inclusion(n, n, leaf, p, r));
            if (n > 1) CHECK(!verify_inclusion(m ^ 1, n, leaf, p, r));
            for (std::size_t i = 0; i < p.size(); ++i) {
                auto bad = p;
                bad[i] = flip(bad[i]);
                CHECK(!verify_inclusion(m, n, leaf, bad, r));
            }
            auto longer = p;
            longer.push_back(r);
            CHECK(!verify_inclusion(m, n, leaf, longer, r));
            if (!p.empty()) CHECK(!verify_inclusion(m, n, leaf, std::vector<Hash>(p.begin(), p.end() - 1), r));
        }
        for (std::size_t m = 0; m <= n; ++m) {
            CAPTURE(m);
            const auto p = consistency_proof(m, n, t.source());
            REQUIRE(strs(p) == (m == 0 || m == n ? D{} : subproof(m, data, true)));
            CHECK(consistency_proof(m, n, leaves_only) == p);
            CHECK(verify_consistency(m, n, roots[m], r, p));
            // Every tree extends the empty one: nothing to tamper with.
            if (m == n || m == 0) continue;
            CHECK(!verify_consistency(m, n, flip(roots[m]), r, p));
            CHECK(!verify_consistency(m, n, roots[m], flip(r), p));
            CHECK(!verify_consistency(n, m, r, roots[m], p));
            CHECK(!verify_consistency(m, n, roots[m], r, {}));
            for (std::size_t i = 0; i < p.size(); ++i) {
                auto bad = p;
                bad[i] = flip(bad[i]);
                CHECK(!verify_consistency(m, n, roots[m], r, bad));
            }
            if (!p.empty()) CHECK(!verify_consistency(m, n, roots[m], r, std::vector<Hash>(p.begin(), p.end() - 1)));
            if (m + 1 < n && !p.empty()) CHECK(!verify_consistency(m + 1, n, roots[m + 1], r, p));
        }
    }
}

TEST_CASE("with stored subtrees a root or a proof reads O(log n) hashes") {
    MemoryTree t;
    for (int i = 0; i < 100000; ++i) t.append("r" + std::to_string(i));
    t.reset_reads();
    root(100000, t.source());
    CHECK(t.reads() <= 17);
    t.reset_reads();
    inclusion_proof(4242, 100000, t.source());
    CHECK(t.reads() <= 2 * 17);
    t.reset_reads();
    consistency_proof(77777, 100000, t.source());
    CHECK(t.reads() <= 2 * 17);
}
