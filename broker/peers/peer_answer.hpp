// Answers from peer brokers, read as untrusted input. A peer may be broken,
// out of date or hostile: a wrong shape or type is an error that names the
// field ("clusters[1].idle_nodes: expected an integer"), never an
// exception; what is kept is rebuilt from the fields this broker knows,
// with bounded sizes, so that nothing a peer sends reaches our own answers,
// events or logs unchecked.
#pragma once
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstddef>
#include <string>

#include "common/http_client.hpp"

namespace shardnet::broker {

inline constexpr std::size_t kPeerNameMax = 256;    // brokers, clusters, regions, classes, fabrics, nodes
inline constexpr std::size_t kPeerTextMax = 4096;   // a message or a reason
inline constexpr std::size_t kPeerRowsMax = 4096;   // capacity rows from one peer
inline constexpr std::size_t kPeerListMax = 1024;   // nodes, rejected clusters

// GET /v1/capacity?local=1 at a peer.
struct PeerCapacity {
    std::string error;         // empty: ok; else why the peer counts as unknown
    boost::json::array rows;   // when ok: its clusters, rebuilt
};
PeerCapacity parse_peer_capacity(const HttpResponse &r);

// The answer to POST /v1/decisions: 200 (accepted) or 409 (refused).
struct PeerDecision {
    enum class Kind { accepted, refused, bad };
    Kind kind = Kind::bad;
    std::string error, field;        // bad: "FIELD: why", and FIELD
    long long job = 0;               // accepted: the peer's new job
    std::string cluster;             // accepted: where it runs
    std::string why;                 // refused: the peer's message and its clusters' reasons
    boost::json::object evidence;    // what was taken from the answer
};
// status 200 or 409, or an answer refused by the client (too_large).
PeerDecision parse_peer_decision(const HttpResponse &r);

}  // namespace shardnet::broker
