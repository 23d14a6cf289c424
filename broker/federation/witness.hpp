// Brokers of a federation witness each other's receipt logs: each asks its
// peers for their signed log heads now and then, keeps the last one it saw
// of each, and holds every new one to it by an RFC 9162 consistency proof.
// A peer that shows a smaller log (a rollback) or one the proof does not join
// to the head it showed before (a second history) is a conflict: the earlier
// head stays, with the new one as evidence. `shard verify --witness` asks the
// other brokers what they witnessed of a broker, so that one broker cannot
// show one history to its users and another to its peers. What a peer
// answers is untrusted input.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/http_client.hpp"

namespace shardnet::broker {

// A head of a peer's log this broker saw (and kept).
struct WitnessedHead {
    long long size = 0;
    std::string root_hex;
};

// What one look at a peer's log found.
struct WitnessCheck {
    enum class Kind { ok, conflict, unreadable };
    Kind kind = Kind::unreadable;
    std::string why;        // conflict, unreadable: what ("rollback: size 3 after 5")
    long long size = 0;     // the head read (ok, conflict)
    std::string root_hex;
    std::string envelope;   // its signed envelope (JSON)
};

// The peer's consistency proof between two sizes of its log (GET
// /v1/log/proof/consistency): its path (hex), or "" with err.
using ConsistencyFetch = std::function<std::vector<std::string>(long long first, long long second, std::string &err)>;

// head: the peer's GET /v1/log/head; keys: its GET /v1/keys (the head must
// be signed by one of them); last: the head witnessed before (none: first look).
WitnessCheck check_peer_head(const HttpResponse &head, const HttpResponse &keys, const std::optional<WitnessedHead> &last,
                             const ConsistencyFetch &proof);

}  // namespace shardnet::broker
