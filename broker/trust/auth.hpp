// Bearer tokens: looked up by their SHA-256 (tokens themselves are never
// stored), compared in constant time, each with its own rate bucket.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/config/config.hpp"
#include "common/digest.hpp"

namespace shardnet::broker {

using shardnet::sha256_hex;   // common/digest.hpp: how token hashes are written in the config

// What a connection remembers between requests: agents keep their
// connection, token and run, so each token is hashed once per connection,
// and the run's attempt is read under a lock only when runs changed.
struct ConnCache {
    std::string bearer;
    const void *entry = nullptr;   // Auth::Bucket*, valid for `auth`
    const void *auth = nullptr;    // the Auth that vouched (a reload changes it)
    unsigned long long epoch = 0;  // and its sweep (entry is valid while they match)
    // Requests taken from the token's rate window in advance, so that
    // connections do not all touch one counter per request.
    long long window = -1;
    int prepaid = 0;
    // The last run this connection reported for, valid while the broker's
    // run generation is unchanged.
    std::string run;
    long long run_attempt = 0;
    unsigned long long run_generation = 0;
    long long run_policy = 0;   // the checkpoint policy version its agent had then
    // The worker (NODE/STEP) of the run and attempt above that this
    // connection last reported as, admitted then (service_admission.cpp).
    std::string worker;
};

class Auth {
public:
    Auth(const std::vector<TokenEntry> &tokens, double rate, double burst,
         const std::vector<WorkerKey> &worker_keys = {});

    enum class Verdict { ok, missing, invalid, rate_limited };
    // entry is set when the verdict is ok, and valid while the caller's
    // request runs. cache may be null.
    Verdict check(const std::string &bearer, const TokenEntry *&entry, double now, ConnCache *cache = nullptr);
    // Forgets derived tokens idle for idle_seconds once more than keep are
    // known (each job's token makes one): memory stays bounded however many
    // jobs came and went. A forgotten token is verified again when it comes
    // back. At most once a minute; cheap when there is nothing to do.
    void sweep(double now, std::size_t keep = 50000, double idle_seconds = 600);
    std::size_t derived_tokens();

private:
    struct Bucket {
        TokenEntry entry;
        // Rate limit in fixed 100 ms windows, lock-free: the hot path is
        // one fetch_add.
        std::atomic<long long> window{0};
        std::atomic<long long> used{0};
    };
    Bucket *derived(const std::string &bearer, double now);

    std::unordered_map<std::string, std::unique_ptr<Bucket>> by_hash_;
    std::vector<WorkerKey> worker_keys_;
    // Buckets of derived worker tokens, one per run and attempt, made on
    // first sight (once per connection: the ConnCache keeps it after).
    std::mutex derived_mu_;
    std::unordered_map<std::string, std::unique_ptr<Bucket>> derived_;
    // Swept buckets are freed two sweeps (a minute or more) later: a request
    // that was using one has long finished, and connections that cached one
    // see the epoch moved and look their token up again.
    std::atomic<unsigned long long> epoch_{1};
    std::vector<std::unique_ptr<Bucket>> retired_, retired_before_;
    double last_sweep_ = 0;
    long long per_window_;
};

}  // namespace shardnet::broker
