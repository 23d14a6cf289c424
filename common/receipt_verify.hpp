// Offline verification of receipts with nothing but the brokers' public
// keys: every signature, each run's hash chain (seq from 1, each naming the
// digest of the one before), the order they were given in, and a sealed
// checkpoint's shard files on disk against the digests it sealed.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/dsse.hpp"
#include "common/file_list.hpp"
#include "common/receipt.hpp"
#include "common/tree_head.hpp"

namespace shardnet::receipt {

struct Failure {
    std::size_t position = 0;   // the envelope's index in the input
    std::string run;            // "" when its payload could not be read
    long long seq = 0;
    std::string what;
    // "run R seq N: what", or "envelope #K: what" when the payload is not a
    // receipt; origin (a file name) is added when given.
    std::string text(const std::string &origin = "") const;
};

struct Verified {
    std::size_t position = 0;
    Receipt receipt;
    std::string digest;   // envelope_digest
    std::string keyid;    // the key that verified it
};

struct ChainResult {
    std::vector<Failure> failures;
    std::vector<Verified> receipts;   // those whose signature verified, in input order
};

// Keys pinned to a broker: keyid -> the broker id (a receipt's
// predicate.broker) that key speaks for.
using PinnedKeys = std::map<std::string, std::string>;

// When a key stopped signing, as its broker says (GET /v1/keys,
// valid_until, or a key file that carries it): keyid -> that time (RFC 3339
// UTC). A key that was retired signs nothing later.
using KeyRetirements = std::map<std::string, std::string>;

// Checks envs, in the order given (the order a broker lists a run's
// receipts in), against keys. A receipt whose signature does not verify
// takes no part in its chain: whatever names it as previous is reported as
// missing its predecessor. With pinned keys, a receipt signed by a key
// pinned to another broker than the one it names, or naming a broker that
// has pinned keys but signed by none of them, fails too: one site's key
// cannot speak for another's. A receipt whose time is after its key's
// valid_until (retired) fails as well, naming both times.
ChainResult verify_chain(const std::vector<dsse::Envelope> &envs, const std::vector<SigningKey> &keys, const PinnedKeys &pinned = {},
                         const KeyRetirements &retired = {});

// verify_tree_head, and a key that signed it still in force at the head's
// timestamp: a head signed by a retired key after its valid_until fails,
// naming both times (what a leaked old key would make).
std::string verify_tree_head_in_time(const dsse::Envelope &env, const std::vector<SigningKey> &keys, const KeyRetirements &retired,
                                     TreeHead &out);

// Re-hashes each shard a checkpoint-sealed receipt names, below dir: a
// missing file, another size or another digest is a failure naming the shard.
// For a receipt that lists its files as subjects (a broker before the
// file list's root); one with a root is checked by verify_checkpoint_list.
std::vector<Failure> verify_checkpoint_files(const Verified &sealed, const std::string &dir);

// The file list a checkpoint-sealed receipt commits to as a Merkle root
// (body.files); nullopt when it lists its files as subjects.
std::optional<file_list::Summary> sealed_list(const Receipt &r);

// A page of the list from wherever it is kept (the broker, a saved file):
// the entries from index from on, in list order; last set on the last
// page. "" or why it cannot be had.
using ListPages = std::function<std::string(uint64_t from, std::vector<file_list::Entry> &page, bool &last)>;
// The list, read a page at a time (memory O(page + log n)), recomputes the
// root, count and bytes the receipt sealed, and each file is re-hashed
// below dir ("": the list alone is checked). Failures name the file, or
// say how the list is not the sealed one; at most max_file_failures name
// a file, the rest are counted.
std::vector<Failure> verify_checkpoint_list(const Verified &sealed, const std::string &dir, const ListPages &pages,
                                            std::size_t max_file_failures = 50);

}  // namespace shardnet::receipt
