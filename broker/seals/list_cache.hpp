// A sealed list as GET .../files serves it, built once per seal: a seal
// never changes (its receipt signed the root), so the leaves, each rank's
// leaves and the Merkle tree its proofs come from are made at the first
// request and kept, a few lists at most (least recently used goes), and
// never re-read from the ranks' commits while kept. Requests for lists
// are costly (the store thread builds them): each token may hold only a
// few at once (util/token_gate.hpp), the rest answered 429 with Retry-After.
#pragma once
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/file_list.hpp"
#include "common/merkle.hpp"

namespace shardnet::broker::sealed_list {

struct Built {
    std::vector<file_list::Entry> sorted;                  // the leaves in list order (rank: the first that committed it)
    std::map<long long, std::vector<uint64_t>> by_rank;    // each rank's leaves in order: a leaf two ranks committed is in both
    std::vector<file_list::Entry> others;                  // committed files that are no leaf (no real digest), as committed
    merkle::MemoryTree tree;                               // every leaf hash, for proofs
    file_list::Summary summary;
    std::size_t files() const { return sorted.size() + others.size(); }
};

// The list of entries (each with its rank, repeats of a leaf by several
// ranks allowed) and others.
std::shared_ptr<const Built> build(std::vector<file_list::Entry> entries, std::vector<file_list::Entry> others);

class Cache {
public:
    // At most max_lists lists and max_files files in all; a list bigger
    // than max_files is built for its request and not kept.
    Cache(std::size_t max_lists, std::size_t max_files) : max_lists_(max_lists), max_files_(max_files) {}
    std::shared_ptr<const Built> find(const std::string &key);
    void put(const std::string &key, std::shared_ptr<const Built> list);
    std::size_t lists() const;
    std::size_t files() const;
    unsigned long long hits() const;
    unsigned long long builds() const;

private:
    using Order = std::list<std::pair<std::string, std::shared_ptr<const Built>>>;
    mutable std::mutex mu_;
    const std::size_t max_lists_, max_files_;
    Order order_;   // most recently used first
    std::unordered_map<std::string, Order::iterator> at_;
    std::size_t files_ = 0;
    unsigned long long hits_ = 0, builds_ = 0;
};

}  // namespace shardnet::broker::sealed_list
