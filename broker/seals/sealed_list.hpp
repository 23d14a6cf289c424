// A sealed checkpoint's file list at the broker (common/file_list.hpp): read
// from the ranks' commits, in list order, with the leaf index and inclusion
// proof of a rank's files against the root the seal recorded; and the seals
// that travel with a run to a peer broker (carried.cpp).
#pragma once
#include <boost/json/fwd.hpp>
#include <string>
#include <vector>

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

// The JSON of one rank's files in a list answer: each {path, sha256,
// bytes, rank, index, inclusion: [hex...]} against sorted's root; then
// the rank's entries of others (no leaf, no proof), as committed.
boost::json::array rank_files_json(const std::vector<file_list::Entry> &sorted, const std::vector<file_list::Entry> &others, long long rank);
// Entries [from, from + limit) of sorted as {path, sha256, bytes, rank}.
boost::json::array page_json(const std::vector<file_list::Entry> &sorted, std::size_t from, std::size_t limit);

}  // namespace sealed_list
}  // namespace shardnet::broker
