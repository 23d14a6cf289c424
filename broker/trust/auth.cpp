#include "broker/trust/auth.hpp"

#include <algorithm>
#include <openssl/crypto.h>

#include "common/digest.hpp"
#include "common/worker_token.hpp"

namespace shardnet::broker {

Auth::Auth(const std::vector<TokenEntry> &tokens, double rate, double burst, const std::vector<WorkerKey> &worker_keys)
    : worker_keys_(worker_keys), per_window_(std::max<long long>(1, static_cast<long long>(std::min(rate / 10.0, burst)))) {
    for (const auto &t : tokens) {
        auto b = std::make_unique<Bucket>();
        b->entry = t;
        by_hash_[t.sha256] = std::move(b);
    }
}

namespace {
// A connection that changes its token forgets what the old one was allowed.
void remember(ConnCache &c, const std::string &bearer, const void *bucket) {
    c.bearer = bearer;
    c.entry = bucket;
    c.window = -1;
    c.prepaid = 0;
    c.run.clear();
    c.run_attempt = 0;
    c.run_generation = 0;
    c.worker.clear();
}
}  // namespace

Auth::Verdict Auth::check(const std::string &bearer, const TokenEntry *&entry, double now, ConnCache *cache) {
    if (bearer.empty()) return Verdict::missing;
    Bucket *b = nullptr;
    // The connection's own last token: what it is compared with is what this
    // client sent before, no secret of anyone else's, so a plain (fast)
    // comparison leaks nothing. A new token is checked in full below.
    if (cache && cache->auth == this && cache->epoch == epoch_.load(std::memory_order_acquire) && cache->bearer == bearer) {
        b = static_cast<Bucket *>(const_cast<void *>(cache->entry));
    } else if (bearer.compare(0, 5, "snw2.") == 0 || bearer.compare(0, 5, "snr2.") == 0) {
        b = derived(bearer, now);
        if (!b) return Verdict::invalid;
        if (cache) { remember(*cache, bearer, b); cache->auth = this; cache->epoch = epoch_.load(std::memory_order_acquire); }
    } else {
        const std::string h = sha256_hex(bearer);
        auto it = by_hash_.find(h);
        // The map finds by hash; the final comparison runs in constant time.
        if (it == by_hash_.end() || CRYPTO_memcmp(it->first.data(), h.data(), h.size()) != 0) return Verdict::invalid;
        b = it->second.get();
        if (cache) { remember(*cache, bearer, b); cache->auth = this; cache->epoch = epoch_.load(std::memory_order_acquire); }
    }
    const long long window = static_cast<long long>(now * 10);
    if (cache && cache->window == window && cache->prepaid > 0) {
        --cache->prepaid;
        entry = &b->entry;
        return Verdict::ok;
    }
    long long seen = b->window.load(std::memory_order_relaxed);
    if (seen != window && b->window.compare_exchange_strong(seen, window)) b->used.store(0, std::memory_order_relaxed);
    // Take a small batch for this connection (at most 1/64 of the window),
    // but only once it has shown it sends more than one: a connection's
    // first request takes one, so that clients that connect per request
    // are not charged for requests they never make.
    const bool again = cache && cache->window >= 0;
    const int batch = again ? int(std::clamp<long long>(per_window_ / 64, 1, 32)) : 1;
    if (b->used.fetch_add(batch, std::memory_order_relaxed) + batch > per_window_) return Verdict::rate_limited;
    if (cache) { cache->window = window; cache->prepaid = batch - 1; }
    entry = &b->entry;
    return Verdict::ok;
}

void Auth::sweep(double now, std::size_t keep, double idle_seconds) {
    std::lock_guard<std::mutex> lock(derived_mu_);
    if (derived_.size() <= keep || now - last_sweep_ < 60) return;
    last_sweep_ = now;
    retired_before_ = std::move(retired_);
    retired_.clear();
    const long long idle_window = static_cast<long long>((now - idle_seconds) * 10);
    for (auto it = derived_.begin(); it != derived_.end();) {
        if (it->second->window.load(std::memory_order_relaxed) < idle_window) {
            retired_.push_back(std::move(it->second));
            it = derived_.erase(it);
        } else {
            ++it;
        }
    }
    epoch_.fetch_add(1, std::memory_order_acq_rel);
}

std::size_t Auth::derived_tokens() {
    std::lock_guard<std::mutex> lock(derived_mu_);
    return derived_.size();
}

Auth::Bucket *Auth::derived(const std::string &bearer, double now) {
    WorkerTokenClaim claim;
    if (!parse_worker_token(bearer, claim)) return nullptr;
    const WorkerKey *signer = nullptr;
    for (const auto &k : worker_keys_)
        if (verify_worker_token(k.key, claim)) signer = &k;
    if (!signer) return nullptr;
    std::lock_guard<std::mutex> lock(derived_mu_);
    // One bucket per job and attempt: the token's whole claim is the key.
    auto &slot = derived_[bearer.substr(0, bearer.size() - claim.run.size() - 66) + '\0' + claim.run];
    if (!slot) {
        slot = std::make_unique<Bucket>();
        slot->window.store(static_cast<long long>(now * 10), std::memory_order_relaxed);   // never idle when new
        TokenEntry e;
        e.name = signer->name + "/" + claim.cluster + "/" + std::to_string(claim.job);
        e.scope = Scope::worker;
        e.run = claim.run;
        e.attempt = claim.attempt;
        e.bound = true;
        e.world = claim.world;
        e.uid = claim.uid;
        e.job = claim.job;
        e.cluster = claim.cluster;
        e.read_only = claim.reader;
        if (claim.reader) e.name += "/reader";
        slot->entry = std::move(e);
    }
    return slot.get();
}

}  // namespace shardnet::broker
