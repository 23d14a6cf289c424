// A sealed checkpoint's file list at the broker (common/file_list.hpp): read
// from the ranks' commits, in list order, with the leaf index and inclusion
// proof of a rank's files against the root the seal recorded; and the seals
// that travel with a run to a peer broker (carried.cpp).
#pragma once
#include <boost/json/fwd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "broker/seals/list_cache.hpp"
#include "common/file_list.hpp"

namespace shardnet::broker {

class Store;

namespace sealed_list {

// Every file of the ranks' commits of (run, attempt, name) that can be a
// leaf, with its rank. A commit taken before the broker held digests to
// the leaf's rules (no real sha256) is counted in unattested, its first
// 100 entries listed there as {path, rank}. A commit row that is no file
// list is a damaged store: throws.
struct Committed {
    std::vector<file_list::Entry> entries;   // unsorted, ranks' order
    long long ranks = 0;   // commits read
    long long unattested_count = 0;
    boost::json::array *unattested = nullptr;   // filled when given
    std::vector<file_list::Entry> others;        // those that are no leaf, as committed (never a match for a real digest)
};
void read_commits(Store &store, const std::string &run, long long attempt, const std::string &name, Committed &out);

// A checkpoint whose ranks committed one path with two different files:
// it is not sealed (what() names the path and both ranks).
struct Conflict : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// A commit of a sealed name with other files than its seal's (held_seal.hpp).
struct SealedOtherwise : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// Orders entries (file_list::order), throws Conflict on a path committed
// as two different files, then drops the repeats of a leaf.
void sort_checked(std::vector<file_list::Entry> &entries);

// The JSON of one rank's files [from, from + limit) in a list answer:
// first its leaves, each {path, sha256, bytes, rank, index, inclusion:
// [hex...]} against the list's root (a leaf two ranks committed is in
// both ranks' files), then its entries of others (no leaf, no proof), as
// committed. total: how many files the rank has.
boost::json::array rank_files_json(const Built &list, long long rank, std::size_t from, std::size_t limit, std::size_t &total);
// Entries [from, from + limit) of sorted as {path, sha256, bytes, rank}.
boost::json::array page_json(const std::vector<file_list::Entry> &sorted, std::size_t from, std::size_t limit);

}  // namespace sealed_list
}  // namespace shardnet::broker
