// A sealed checkpoint's file list, committed as one Merkle root (RFC 9162
// hashing, common/merkle.hpp) so that a seal's receipt stays the same size
// however many files the checkpoint has (doc/receipts.md, "The file list").
// A leaf is one file's manifest line without its newline,
//   "<sha256, 64 lower-case hex> <bytes, decimal> <path>",
// and the leaves go in path order (byte-wise; equal paths by the whole
// line), so that anyone holding the list recomputes the root.
#pragma once
#include <boost/json/fwd.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/merkle.hpp"

namespace shardnet::file_list {

struct Entry {
    std::string path, sha256;
    unsigned long long bytes = 0;
    long long rank = -1;   // -1: not known (not part of the leaf)
};

// What a seal commits to: the root of the sorted leaves, how many, and
// their bytes in all.
struct Summary {
    merkle::Hash root = merkle::empty_root();
    uint64_t count = 0;
    unsigned long long bytes = 0;
};

constexpr std::size_t kMaxPath = 4096;
constexpr unsigned long long kMaxBytes = 1ULL << 50;

std::string leaf_data(const Entry &e);
merkle::Hash leaf(const Entry &e);
// The list's order: by path byte-wise, then by the whole leaf.
bool before(const Entry &a, const Entry &b);
// Sorts entries so, and drops repeats of a leaf (one file committed by two
// ranks is one leaf; the first rank's entry stays).
void sort(std::vector<Entry> &entries);
// Puts entries in the list's order, repeats of a leaf kept (stable).
void order(std::vector<Entry> &entries);
// In entries already in order (repeats kept): the first path committed
// with two different leaves, as "path P: rank A committed sha256 X (N
// bytes), rank B sha256 Y (M bytes)"; "" when every path is one leaf.
std::string path_conflict(const std::vector<Entry> &ordered);
// e's leaf index in a sorted list, if it is a leaf of it.
std::optional<uint64_t> index_of(const std::vector<Entry> &sorted, const Entry &e);
// "" when e can be a leaf, else what is wrong ("path: ..."): the path as
// path_error has it; a digest of 64 lower-case hex digits; at most 2^50
// bytes.
std::string entry_error(const Entry &e);
// "" when path is a file's one name inside the checkpoint directory, else
// what is wrong ("path: ..."): 1-4096 bytes without control characters,
// relative, each component a name: no empty one ("a//b", a trailing "/"),
// no "." and no "..". One file has one path, so one leaf (no aliases).
std::string path_error(const std::string &path);
// The summary of entries already in order.
Summary summarize(const std::vector<Entry> &sorted);
// Every leaf hash of entries already in order (for proofs).
merkle::MemoryTree tree_of(const std::vector<Entry> &sorted);

// One entry of a list read from outside ({"path", "sha256", "bytes"[,
// "rank", "index", "inclusion"]}), at names the entry in errors
// ("files[3]"): "" or what is wrong, naming the field.
std::string read_entry(const boost::json::value &v, const std::string &at, Entry &out);

// A list checked as it arrives, a page at a time, in memory O(log n): each
// entry valid and after the one before; the summary at the end.
class Folder {
public:
    // "" or why the entry is refused (at names it).
    std::string add(const Entry &e, const std::string &at);
    Summary summary() const;
    uint64_t count() const { return tree_.size(); }

private:
    merkle::RootBuilder tree_;
    Entry last_;
    unsigned long long bytes_ = 0;
};

// The summary as a JSON object {"merkle_root", "count", "bytes"} (a seal
// receipt's body.files), and back ("" or what is wrong, under at).
boost::json::object summary_json(const Summary &s);
std::string read_summary(const boost::json::value &v, const std::string &at, Summary &out);

}  // namespace shardnet::file_list
