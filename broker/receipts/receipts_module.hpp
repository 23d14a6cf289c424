// The receipts module (doc/receipts.md): signs and logs each receipt inside
// the store transaction of the record it attests, keeps the signing key
// (receipts::Signer), and answers the receipts' API: keys, a run's
// receipts, the log's head and proofs, and the ranks' reports that an
// attempt's first receipt waits for.
#pragma once
#include <boost/json/object.hpp>
#include <string>
#include <vector>

#include "broker/core/module.hpp"
#include "broker/receipts/receipts.hpp"
#include "broker/receipts/signer.hpp"
#include "common/receipt.hpp"

namespace shardnet::broker {

class Receipts : Module {
public:
    explicit Receipts(Core &core) : Module(core), signer_(*core.store_, core.cfg_.receipts) {}
    // A reloaded config's key signs from now on (store thread).
    void rotate(const ReceiptKeys &fresh) { signer_.rotate(fresh); }

    // Signed receipts (receipts/receipts.cpp, doc/receipts.md): each is
    // written inside the store transaction of the record it attests, on the
    // store thread, and appended to the log in it; nothing when the config
    // has no receipts key. The digest of the receipt written ("" when off).
    // from: where the chain continues when its newest receipt is a peer's.
    std::string write_receipt(receipt::Kind kind, const std::string &run, long long attempt, boost::json::object body,
                              std::vector<receipt::Subject> subjects, double now, const receipts::ChainLink &from = {});
    // What the broker knew when it made an attempt (its job, the planned
    // nodes, the decision, where a peer's chain goes on), kept for the
    // attempt's receipt, in the transaction of the attempt's job; replace
    // false: unless it has one (an admin's heartbeat naming a job). cause may carry
    // "user" and "uid": the owner as resolved for a peer's run, which is in
    // memory only after the transaction (they move to "owner").
    void note_attempt_start(const std::string &run, long long attempt, const std::string &cluster, long long job,
                            const std::vector<std::string> &nodes, const boost::json::object &cause, const receipts::ChainLink &from,
                            double now, bool replace = true);
    // The attempt-started receipt (once per attempt, once it has a job):
    // owner, cluster and job, each rank's node and environment as reported
    // (POST /v1/runs/RUN/ranks), the nodes with their descriptor hashes, the
    // decision. when_complete: only once every rank has reported; else now,
    // with what is known (something else of the attempt is being attested).
    // world_hint: the ranks a report's sender knows of (an admin's word).
    void attempt_started(const std::string &run, long long attempt, double now, bool when_complete, long long world_hint = 0);
    // POST /v1/runs/RUN/ranks (receipts/ranks.cpp): an agent's ranks and
    // what each runs with.
    void report_ranks(const std::string &id, const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now);
    // Whether attempt is the run's current one (memory).
    bool attempt_current(const std::string &run, long long attempt);
    // A seal: every shard file of the ranks' commits is a subject.
    void receipt_sealed(const std::string &run, long long attempt, const std::string &name, const std::string &parent, double now);
    // The newest receipt of run here (seq and digest; empty: none, or off).
    receipts::ChainLink last_receipt_link(const std::string &run);
    // The API (receipts/receipts_api.cpp).
    void get_keys(const Reply &reply);
    // A page of a run's receipts (after=SEQ, limit=N); with proofs=1 each
    // with its inclusion proof against one signed head (size=S, default the
    // log's size now), so that a verifier asks once per page, not per receipt.
    void get_receipts(const std::string &id, const std::string &query, const TokenEntry &who, const Reply &reply);
    void get_log_head(const Reply &reply);
    void get_log_proof(bool inclusion, const std::string &query, const Reply &reply);

private:
    receipts::Signer signer_;   // the receipts key and the head pin (store thread only; receipts/signer.hpp)
};

}  // namespace shardnet::broker
