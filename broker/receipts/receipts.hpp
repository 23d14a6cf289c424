// Signed receipts at the broker (doc/receipts.md): the Merkle log kept in
// the store (its perfect subtrees as rows, so roots and proofs are O(log n)
// reads), and the link that continues a run's chain across brokers.
#pragma once
#include <boost/json/value.hpp>
#include <string>

#include "common/merkle.hpp"

namespace shardnet::broker {

class Store;

namespace receipts {

// Appends leaf to the log and stores every perfect subtree it completes
// (at most log2 n of them); the new leaf's index. Inside the transaction
// of the receipt it logs.
long long log_append(Store &store, const merkle::Hash &leaf);
// The log's hashes from the store (valid while store lives). A perfect
// subtree the store lacks is a damaged log: hashing on from the leaves
// would hide it, so that read throws.
merkle::NodeSource log_source(Store &store);

// Where a run's chain continues when the run comes from a peer broker: the
// sender's newest receipt of the run (seq and envelope digest), carried in
// the forwarded decision as {"seq": N, "digest": HEX}.
struct ChainLink {
    long long seq = 0;
    std::string digest;
    bool empty() const { return seq == 0; }
};
// A peer's link is untrusted input: "" or what is wrong, naming the field.
std::string read_chain_link(const boost::json::value &v, ChainLink &out);

}  // namespace receipts
}  // namespace shardnet::broker
