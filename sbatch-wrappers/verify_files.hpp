// shard verify --checkpoint-dir with a seal that commits its files as a
// Merkle root (common/file_list.hpp): where the list comes from, a page at
// a time: the broker that sealed it (GET /v1/runs/RUN/checkpoints/NAME/files
// ?from=I), or a saved copy (--files FILE).
#pragma once
#include <functional>
#include <string>

#include "common/receipt_verify.hpp"

namespace shardnet::cli {

// One page of the list from a broker: the answer's JSON text for entries
// from on; "" or why it could not be had.
using FilesPageGet = std::function<std::string(const std::string &run, const std::string &checkpoint, unsigned long long from,
                                               std::string &body)>;

// Pages asked of a broker for (run, checkpoint): each answer must be of
// that run and checkpoint, start at the index asked, and be the seal of
// sealer (the broker whose receipt it is checked against): a seal carried
// to it from a peer (carried, sealed_by another) is refused, its receipt
// being the sender's claim.
receipt::ListPages pages_from_broker(const FilesPageGet &get, const std::string &run, const std::string &checkpoint,
                                     const std::string &sealer);
// The whole list from a file: an answer of GET .../files ({"files": [...]})
// or a bare array of {path, sha256, bytes}; one page.
receipt::ListPages pages_from_file(const std::string &path);

}  // namespace shardnet::cli
