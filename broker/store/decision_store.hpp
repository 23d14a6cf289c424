// Requeue decisions (store/decision_store.cpp): Store::decisions(). This
// broker's own, written before they are acted on and kept while a peer is
// handed one; those received from peers; and what federation reads of them
// (where a run went, who may read it) and of the peers' log heads.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/store/store_part.hpp"

namespace shardnet::broker {

class DecisionStore : StorePart {
public:
    explicit DecisionStore(Store &store) : StorePart(store) {}

    // A requeue decision, written before it is acted on. False when a
    // decision with this id exists already (it is applied at most once).
    // nonce goes into the comment of the job the decision submits.
    bool insert_decision(const std::string &id, const std::string &run, long long from, long long to,
                         const std::string &cluster, const std::string &exclude, long long old_job, double now,
                         const std::string &nonce = "");
    // Local decisions written but never acted on (the broker stopped): taken up at start.
    struct WrittenDecision { std::string id, run; long long from_attempt; std::string cluster, exclude; long long old_job; };
    std::vector<WrittenDecision> written_decisions();
    // Decisions that found no place (state 'unplaced') made since `since`:
    // their retries (every 30 s for an hour) go on after a restart.
    // peers_refused: every peer broker refused it (state 'unplaced_here'):
    // tried again on this broker's own clusters only, after a restart too.
    struct UnplacedDecision { WrittenDecision d; double created; bool peers_refused = false; };
    std::vector<UnplacedDecision> unplaced_decisions(double since);
    // A decision's state ('written' until acted on) and nonce, or none.
    std::optional<std::pair<std::string, std::string>> get_decision(const std::string &id);
    void apply_decision(const std::string &id, const std::string &state, long long new_job);
    // A decision handed to a peer broker: kept 'forwarding' with what was
    // sent until the peer acknowledges it (then apply_decision 'delivered').
    void forward_decision(const std::string &id, const std::string &peer, const std::string &payload);
    struct Forwarding { std::string id, run, peer, payload; };
    std::vector<Forwarding> forwarding_decisions();
    // Decisions from peer brokers: false when this id was received before.
    // result holds, until the decision is answered, what the broker will
    // mark its job with (a nonce in its comment).
    bool insert_received(const std::string &id, const std::string &from, const std::string &run, long long to, double now,
                         const std::string &result = "{}");
    struct Received { std::string state, result, from, run; long long to = 0; };   // result: JSON
    std::optional<Received> get_received(const std::string &id);
    void finish_received(const std::string &id, const std::string &state, const std::string &result);
    // The peer this broker's last accepted decision for run sent it to,
    // the attempt it runs there and the peer's job; none: it never moved.
    struct MovedRow { std::string peer; long long attempt = 0, job = 0; };
    std::optional<MovedRow> moved_to(const std::string &run);
    // Whether peer took run (accepted a decision of ours) or handed it here
    // (a decision we applied): it may read the run's story.
    bool story_peer(const std::string &run, const std::string &peer);
    // Whether run went to (a decision forwarded to) or came from (a decision
    // received from) the broker called peer: that peer may read its receipts.
    bool run_crossed(const std::string &run, const std::string &peer);
    // The peers' log heads witnessed here (federation/witness.hpp): the last
    // consistent one of each, and the first conflict since (JSON; "": none).
    struct WitnessedRow { std::string peer; long long size = 0; std::string root, envelope; double seen = 0; std::string conflict; };
    std::optional<WitnessedRow> witnessed_head(const std::string &peer);
    std::vector<WitnessedRow> witnessed_heads();
    void put_witnessed_head(const WitnessedRow &r);   // keeps a conflict noted before
    void witness_conflict(const std::string &peer, const std::string &evidence);   // the first one stays
};

}  // namespace shardnet::broker
