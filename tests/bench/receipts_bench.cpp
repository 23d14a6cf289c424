// Receipts: the cost of signing one (statement + envelope, what a seal
// adds before logging), verifying 10,000 as a chain (target <= 1 s), and
// the log at 1M leaves: root, inclusion and consistency proofs (size and
// time) from a store that keeps perfect subtrees (common/merkle.hpp).
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "common/merkle.hpp"
#include "common/receipt_verify.hpp"

using namespace shardnet;
using namespace shardnet::receipt;
using Clock = std::chrono::steady_clock;

namespace {
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }
}

int main(int argc, char **argv) {
    const int n_receipts = argc > 1 ? std::atoi(argv[1]) : 10000;
    const uint64_t n_leaves = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000000;
    SigningKey key;
    if (!SigningKey::from_seed(std::string(32, 'k'), key).empty()) return 1;

    // A chain of seals, 8 shards each, as a broker would sign them.
    std::vector<dsse::Envelope> envs;
    envs.reserve(std::size_t(n_receipts));
    auto t = Clock::now();
    for (int i = 0; i < n_receipts; ++i) {
        Receipt r;
        r.kind = Kind::checkpoint_sealed;
        r.run = "bench-run";
        r.broker = "bench";
        r.time = utc_time(1.7e9 + i);
        r.seq = i + 1;
        r.previous = i ? envelope_digest(envs.back()) : "";
        r.body = boost::json::object{{"checkpoint", "checkpoint-" + std::to_string(i)}, {"parent", nullptr}, {"step", i * 100}};
        std::vector<ShardFile> files;
        for (int s = 0; s < 8; ++s) files.push_back({"rank-" + std::to_string(s) + "/model.pt", std::string(64, 'a'), 1ull << 30, s, "n1"});
        r.subjects = shard_subjects(files);
        dsse::Envelope e;
        if (!sign_receipt(key, r, e).empty()) return 1;
        envs.push_back(std::move(e));
    }
    const double sign_us = us_since(t) / n_receipts;

    t = Clock::now();
    auto res = verify_chain(envs, {key});
    const double verify_s = us_since(t) / 1e6;
    if (!res.failures.empty() || res.receipts.size() != std::size_t(n_receipts)) {
        std::fprintf(stderr, "verification failed: %s\n", res.failures.empty() ? "" : res.failures[0].text().c_str());
        return 1;
    }

    // The log: appending a receipt's leaf (what logging adds to a seal).
    merkle::MemoryTree tree;
    t = Clock::now();
    for (uint64_t i = 0; i < n_leaves; ++i) tree.append_leaf_hash(merkle::leaf_hash(std::to_string(i)));
    const double append_us = us_since(t) / double(n_leaves);
    const auto src = tree.source();
    const int reps = 1000;
    t = Clock::now();
    merkle::Hash root{};
    for (int i = 0; i < reps; ++i) root = merkle::root(n_leaves - uint64_t(i % 7), src);
    const double root_us = us_since(t) / reps;
    root = merkle::root(n_leaves, src);
    tree.reset_reads();
    merkle::root(n_leaves, src);
    const std::size_t root_reads = tree.reads();
    // Without stored subtrees: every leaf read and hashed once.
    merkle::NodeSource leaves_only{src.leaf, nullptr};
    t = Clock::now();
    const merkle::Hash flat = merkle::root(n_leaves, leaves_only);
    const double flat_ms = us_since(t) / 1e3;
    if (flat != root) return 1;

    std::size_t inc_hashes = 0, cons_hashes = 0;
    t = Clock::now();
    for (int i = 0; i < reps; ++i) inc_hashes = merkle::inclusion_proof(uint64_t(i) * 997 % n_leaves, n_leaves, src).size();
    const double inc_us = us_since(t) / reps;
    const uint64_t leaf_i = 123457 % n_leaves;
    const auto inc = merkle::inclusion_proof(leaf_i, n_leaves, src);
    t = Clock::now();
    bool ok = true;
    for (int i = 0; i < reps; ++i) ok = ok && merkle::verify_inclusion(leaf_i, n_leaves, merkle::leaf_hash(std::to_string(leaf_i)), inc, root);
    const double inc_verify_us = us_since(t) / reps;
    const uint64_t old_size = n_leaves / 3 + 17;
    t = Clock::now();
    for (int i = 0; i < reps; ++i) cons_hashes = merkle::consistency_proof(old_size - uint64_t(i % 5), n_leaves, src).size();
    const double cons_us = us_since(t) / reps;
    const auto cons = merkle::consistency_proof(old_size, n_leaves, src);
    const merkle::Hash old_root = merkle::root(old_size, src);
    t = Clock::now();
    for (int i = 0; i < reps; ++i) ok = ok && merkle::verify_consistency(old_size, n_leaves, old_root, root, cons);
    const double cons_verify_us = us_since(t) / reps;
    if (!ok) return 1;
    inc_hashes = inc.size();
    cons_hashes = cons.size();

    std::printf("sign + envelope, per receipt (8 shards):   %.1f us\n", sign_us);
    std::printf("verify %d receipts as a chain:          %.3f s (target <= 1 s)\n", n_receipts, verify_s);
    std::printf("log append, per leaf:                     %.2f us\n", append_us);
    std::printf("root at %llu leaves (stored subtrees):  %.2f us, %zu hash reads\n", (unsigned long long)n_leaves, root_us, root_reads);
    std::printf("root at %llu leaves (from the leaves):  %.1f ms\n", (unsigned long long)n_leaves, flat_ms);
    std::printf("inclusion proof at %llu leaves:         %zu hashes (%zu bytes), %.2f us to make, %.2f us to verify\n",
                (unsigned long long)n_leaves, inc_hashes, inc_hashes * 32, inc_us, inc_verify_us);
    std::printf("consistency proof %llu -> %llu:     %zu hashes (%zu bytes), %.2f us to make, %.2f us to verify\n",
                (unsigned long long)old_size, (unsigned long long)n_leaves, cons_hashes, cons_hashes * 32, cons_us, cons_verify_us);
    return 0;
}
