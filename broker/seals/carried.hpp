// Sealed checkpoints that travel with a run handed to a peer broker: the
// decision carries the run's newest seals (name, attempt, ranks, parent,
// the broker that sealed it, the file list with its Merkle root, and the
// seal's receipt), so that the peer serves their digests to the run's
// tokens (GET .../files) and a resume there is checked against them. A
// peer's body is untrusted input: read() checks every field, the sizes,
// and that the list is the root it claims.
#pragma once
#include <boost/json/fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "broker/store/store.hpp"
#include "common/file_list.hpp"

namespace shardnet::broker::carried {

// What a decision carries at most: the newest kMaxSent seals, kMaxSentFiles
// files and kMaxSentBytes of JSON in all, so that it stays well inside a
// peer's body limit (1 MiB by default) beside the script and environment;
// a seal that would pass them is left out, named in the sender's log. A
// receiver takes at most kMaxReceived seals and kMaxFiles files.
constexpr std::size_t kMaxSent = 2, kMaxSentFiles = 2048, kMaxSentBytes = 384 << 10;
constexpr std::size_t kMaxReceived = 4, kMaxFiles = 4096;

struct Seal {
    std::string name, parent, sealed_by;
    long long attempt = 0, ranks = 0;
    file_list::Summary list;
    long long receipt_seq = 0;   // the seal's receipt in the sealer's chain (0: none signed)
    std::string receipt_digest;
    std::vector<file_list::Entry> files;   // in list order, each with its rank
};

// The run's newest seals at this broker (its own, or carried here before),
// newest first, as the decision's "sealed" array. left_out: a line per seal
// not carried and why.
boost::json::array outgoing(Store &store, const std::string &run, const std::string &broker_name, std::vector<std::string> &left_out);

// A decision's "sealed": "" and out filled, or what is wrong, naming the
// entry and field ("sealed[0].files[3].sha256: ...").
std::string read(const boost::json::value &v, std::vector<Seal> &out);

Store::CarriedSealRow row_of(const Seal &s, const std::string &run, double received);

}  // namespace shardnet::broker::carried
