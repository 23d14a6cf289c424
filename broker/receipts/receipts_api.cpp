// The receipts' API: the broker's public keys (GET /v1/keys), a run's
// receipts (GET /v1/runs/{id}/receipts), the log's signed head and its
// inclusion and consistency proofs (GET /v1/log/...). Answers come from the
// store thread; a head is signed when asked for and the log grew since the
// last one (never per receipt).
#include <boost/json.hpp>
#include <set>

#include "broker/core/api_util.hpp"
#include "broker/receipts/receipts.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/receipts/head_pin.hpp"
#include "common/tree_head.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {

ApiResponse no_receipts() {
    return error_response(404, "no_receipts", "this broker signs no receipts: its config has no \"receipts\" section "
                          "({\"key_file\": an Ed25519 private key, root 0600; see shardnet-broker(8))");
}

// A page of a run's receipts, unless the caller asks for fewer (up to 5 times more).
constexpr long long kReceiptsPage = 1000;

json::value time_or_null(double t) { return t > 0 ? json::value(receipt::utc_time(t)) : json::value(nullptr); }

json::array hex_array(const std::vector<merkle::Hash> &hs) {
    json::array a;
    for (const auto &h : hs) a.push_back(json::string(merkle::hex(h)));
    return a;
}

merkle::Hash hash_of(const std::string &raw) {
    merkle::Hash h{};
    std::copy_n(raw.begin(), std::min<std::size_t>(raw.size(), 32), h.begin());
    return h;
}

// A query parameter that must be an integer in lo..hi; the 400 names it.
std::optional<long long> int_param(const std::string &query, const char *name, long long lo, long long hi, ApiResponse &bad) {
    const std::string v = query_param(query, name);
    auto n = parse_int(v, lo, hi);
    if (!n)
        bad = error_response(400, "bad_field", std::string(name) + ": " + (v.empty() ? "missing" : "'" + v.substr(0, 40) + "'") +
                                                   "; expected an integer " + std::to_string(lo) + ".." + std::to_string(hi), name);
    return n;
}

}  // namespace

void Receipts::get_keys(const Reply &reply) {
    if (!cfg_.receipts.on()) return reply(no_receipts());
    on_store(reply, [this](const Reply &reply) {
        std::map<std::string, Store::KeyUse> uses;
        for (auto &u : store_->receipts().key_uses()) uses[u.keyid] = u;
        json::array keys;
        auto add = [&](const SigningKey &k, bool current) {
            const auto it = uses.find(k.keyid());
            const Store::KeyUse u = it == uses.end() ? Store::KeyUse{} : it->second;
            // Validity as this broker's log shows it: the first and last
            // receipt each key signed (a current key is valid on).
            keys.push_back(json::object{{"keyid", k.keyid()}, {"pem", k.public_pem()}, {"status", current ? "current" : "retired"},
                                        {"valid_from", time_or_null(u.first)}, {"valid_until", current ? json::value(nullptr) : time_or_null(u.last)},
                                        {"receipts", u.receipts}});
        };
        std::set<std::string> listed;
        auto add_once = [&](const SigningKey &k, bool current) { if (listed.insert(k.keyid()).second) add(k, current); };
        add_once(signer_.key(), true);
        for (const auto &k : signer_.retired()) add_once(k, false);
        // Every key that signed here before, rotated away (its public half
        // was kept with its uses).
        for (const auto &[keyid, u] : uses) {
            SigningKey k;
            if (!u.pem.empty() && !listed.count(keyid) && SigningKey::from_public_pem(u.pem, k).empty() && k.keyid() == keyid) add_once(k, false);
        }
        reply(ok_json(200, json::object{{"broker", cfg_.broker_name}, {"keys", std::move(keys)}}));
    });
}

void Receipts::get_receipts(const std::string &id, const std::string &query, const TokenEntry &who, const Reply &reply) {
    if (!cfg_.receipts.on()) return reply(no_receipts());
    ApiResponse bad;
    long long after = 0, limit = kReceiptsPage, size = 0;
    if (!query_param(query, "after").empty()) {
        auto a = int_param(query, "after", 0, 1LL << 53, bad);
        if (!a) return reply(bad);
        after = *a;
    }
    if (!query_param(query, "limit").empty()) {
        auto l = int_param(query, "limit", 1, kReceiptsPage * 5, bad);
        if (!l) return reply(bad);
        limit = *l;
    }
    const std::string proofs = query_param(query, "proofs");
    if (!proofs.empty() && proofs != "1")
        return reply(error_response(400, "bad_field", "proofs: expected 1 (each receipt with its inclusion proof)", "proofs"));
    // Proofs cost O(log n) reads each on the store thread: pages of at most the default.
    if (!proofs.empty() && limit > kReceiptsPage)
        return reply(error_response(400, "bad_field", "limit: at most " + std::to_string(kReceiptsPage) + " with proofs=1", "limit"));
    if (!query_param(query, "size").empty()) {
        if (proofs.empty()) return reply(error_response(400, "bad_field", "size: only with proofs=1", "size"));
        auto n = int_param(query, "size", 1, 1LL << 62, bad);
        if (!n) return reply(bad);
        size = *n;
    }
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        // A peer is asked below (runs it moved to or from it); anyone else
        // who may not see the run learns nothing of it.
        if (it == runs.end() || (who.scope != Scope::peer && !may_see(who, id, &it->second)))
            return reply(error_response(404, "no_run", "no run " + id));
    }
    on_store(reply, [this, id, after, limit, size, with_proofs = !proofs.empty(),
                     peer = who.scope == Scope::peer ? who.name : std::string()](const Reply &reply) {
        if (!peer.empty() && !store_->decisions().run_crossed(id, peer)) return reply(error_response(404, "no_run", "no run " + id));
        // One more than the page: whether another follows.
        auto rows = store_->receipts().list_receipts(id, after, limit + 1);
        const bool more = (long long)rows.size() > limit;
        if (more) rows.pop_back();
        json::object answer{{"run", id}, {"broker", cfg_.broker_name}};
        long long n = 0;
        std::optional<merkle::NodeSource> src;
        if (with_proofs) {
            // The head the proofs are against: the one of the size asked
            // for (signed when an earlier page was), else the log's now.
            std::optional<Store::TreeHeadRow> h;
            if (size > 0) {
                if (size > store_->receipts().log_size())
                    return reply(error_response(400, "bad_field", "size: " + std::to_string(size) + " is past the log's size", "size"));
                h = store_->receipts().tree_head(size);
                if (!h) return reply(error_response(400, "bad_field", "size: no head of size " + std::to_string(size) + " was signed", "size"));
            } else {
                h = signer_.current_head(wall_now());
            }
            n = h->size;
            answer["log"] = json::object{{"tree_size", h->size}, {"root_hash", merkle::hex(hash_of(h->root))}, {"head", json::parse(h->envelope)}};
            src = receipts::log_source(*store_);
        }
        // Against a head, the run's receipts end where the head does (a run's
        // receipts are logged in seq order): one logged since has no proof in
        // it, and would look dropped from the log. The next head shows it.
        bool cut = false;
        if (src)
            for (std::size_t i = 0; i < rows.size(); ++i)
                if (rows[i].log_index >= n) { rows.resize(i); cut = true; break; }
        json::array out;
        for (const auto &r : rows) {
            json::error_code ec;
            json::value env = json::parse(r.envelope, ec);
            if (ec) throw std::runtime_error("receipt " + std::to_string(r.seq) + " of run " + id + " is not JSON in the store");
            json::object o{{"seq", r.seq}, {"kind", r.kind}, {"attempt", r.attempt}, {"time", receipt::utc_time(r.time)},
                           {"digest", r.digest}, {"log_index", r.log_index}, {"envelope", std::move(env)}};
            if (src)
                o["inclusion"] = json::object{{"leaf_hash", merkle::hex(src->leaf(uint64_t(r.log_index)))},
                                              {"path", hex_array(merkle::inclusion_proof(uint64_t(r.log_index), uint64_t(n), *src))}};
            out.push_back(std::move(o));
        }
        answer["receipts"] = std::move(out);
        answer["next_after"] = more && !cut && !rows.empty() ? json::value(rows.back().seq) : json::value(nullptr);
        reply(ok_json(200, std::move(answer)));
    });
}

void Receipts::get_log_head(const Reply &reply) {
    if (!cfg_.receipts.on()) return reply(no_receipts());
    on_store(reply, [this](const Reply &reply) {
        const Store::TreeHeadRow h = signer_.current_head(wall_now());
        reply(ok_json(200, json::object{{"tree_size", h.size}, {"root_hash", merkle::hex(hash_of(h.root))},
                                        {"head", json::parse(h.envelope)}}));
    });
}

void Receipts::get_log_proof(bool inclusion, const std::string &query, const Reply &reply) {
    if (!cfg_.receipts.on()) return reply(no_receipts());
    ApiResponse bad;
    const char *a = inclusion ? "index" : "first", *b = inclusion ? "size" : "second";
    const auto x = int_param(query, a, 0, 1LL << 62, bad);
    if (!x) return reply(bad);
    const auto n = int_param(query, b, 1, 1LL << 62, bad);
    if (!n) return reply(bad);
    if (inclusion ? *x >= *n : *x > *n)
        return reply(error_response(400, "bad_field", std::string(a) + ": " + std::to_string(*x) + (inclusion ? " is not below " : " is above ") +
                                                          b + " " + std::to_string(*n), a));
    on_store(reply, [this, inclusion, x = *x, n = *n, b](const Reply &reply) {
        const long long size = store_->receipts().log_size();
        if (n > size)
            return reply(error_response(400, "bad_field", std::string(b) + ": " + std::to_string(n) + " is past the log's size " + std::to_string(size), b));
        const merkle::NodeSource src = receipts::log_source(*store_);
        json::object out;
        // The signed head of that size, when one was signed.
        auto head_of = [&](long long s) { auto h = store_->receipts().tree_head(s); return h ? json::parse(h->envelope) : json::value(nullptr); };
        if (inclusion) {
            out = json::object{{"leaf_index", x}, {"tree_size", n}, {"leaf_hash", merkle::hex(src.leaf(uint64_t(x)))},
                               {"path", hex_array(merkle::inclusion_proof(uint64_t(x), uint64_t(n), src))}, {"head", head_of(n)}};
        } else {
            out = json::object{{"first", x}, {"second", n}, {"path", hex_array(merkle::consistency_proof(uint64_t(x), uint64_t(n), src))},
                               {"first_head", head_of(x)}, {"second_head", head_of(n)}};
        }
        reply(ok_json(200, out));
    });
}

}  // namespace shardnet::broker
