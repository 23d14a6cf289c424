#include "broker/federation/witness.hpp"

#include <boost/json.hpp>

#include "common/dsse.hpp"
#include "common/merkle.hpp"
#include "common/receipt_verify.hpp"
#include "common/signing_key.hpp"
#include "common/tree_head.hpp"

namespace shardnet::broker {

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxKeys = 64;          // keys a peer may list
constexpr std::size_t kMaxProof = 128;        // hashes in a consistency proof (a log of 2^64 needs 2 x 64)

WitnessCheck unreadable(const std::string &why) {
    WitnessCheck c;
    c.kind = WitnessCheck::Kind::unreadable;
    c.why = why;
    return c;
}

std::string answer_error(const HttpResponse &r, const char *what) {
    if (r.too_large) return std::string(what) + ": " + r.error;
    if (r.status == 0) return std::string(what) + ": " + (r.error.empty() ? "no answer" : r.error);
    return std::string(what) + ": HTTP " + std::to_string(r.status);
}

// The peer's keys as it lists them (GET /v1/keys): {keys: [{pem,
// valid_until}, ...]}; a retired key's valid_until goes into retired.
std::string read_keys(const HttpResponse &r, std::vector<SigningKey> &keys, receipt::KeyRetirements &retired) {
    if (!r.ok()) return answer_error(r, "GET /v1/keys");
    json::error_code ec;
    json::value v = json::parse(r.body, ec);
    const json::value *list = !ec && v.is_object() ? v.as_object().if_contains("keys") : nullptr;
    if (!list || !list->is_array() || list->as_array().size() > kMaxKeys) return "GET /v1/keys: keys: expected an array of at most 64";
    for (const auto &k : list->as_array()) {
        const json::value *pem = k.is_object() ? k.as_object().if_contains("pem") : nullptr;
        SigningKey key;
        if (!pem || !pem->is_string() || !SigningKey::from_public_pem(std::string(pem->as_string()), key).empty())
            return "GET /v1/keys: keys[].pem: expected a public key (PEM)";
        if (const json::value *until = k.as_object().if_contains("valid_until"); until && !until->is_null()) {
            if (!until->is_string() || !receipt::is_utc_time(until->as_string()))
                return "GET /v1/keys: keys[].valid_until: expected RFC 3339 UTC or null";
            retired[key.keyid()] = std::string(until->as_string());
        } else if (const json::value *status = k.as_object().if_contains("status"); status && *status == "retired") {
            // Retired having signed no receipt there (no last use to date it):
            // valid for no head at all.
            retired[key.keyid()] = "1970-01-01T00:00:00Z";
        }
        keys.push_back(std::move(key));
    }
    return "";
}

}  // namespace

WitnessCheck check_peer_head(const HttpResponse &head, const HttpResponse &keys_answer, const std::optional<WitnessedHead> &last,
                             const ConsistencyFetch &proof) {
    if (!head.ok()) return unreadable(answer_error(head, "GET /v1/log/head"));
    std::vector<SigningKey> keys;
    receipt::KeyRetirements retired;
    if (std::string err = read_keys(keys_answer, keys, retired); !err.empty()) return unreadable(err);
    json::error_code ec;
    json::value v = json::parse(head.body, ec);
    const json::value *env_v = !ec && v.is_object() ? v.as_object().if_contains("head") : nullptr;
    if (!env_v) return unreadable("GET /v1/log/head: head: expected a signed head (a DSSE envelope)");
    dsse::Envelope env;
    if (std::string err = dsse::from_json_value(*env_v, env); !err.empty()) return unreadable("GET /v1/log/head: head: " + err);
    receipt::TreeHead h;
    // A head signed by a key after the peer retired it is none of its log's
    // (what a leaked old key would make).
    if (std::string err = receipt::verify_tree_head_in_time(env, keys, retired, h); !err.empty())
        return unreadable("GET /v1/log/head: head: " + err);
    if (h.tree_size > (1ULL << 62)) return unreadable("GET /v1/log/head: head: tree_size too large");
    WitnessCheck c;
    c.size = (long long)h.tree_size;
    c.root_hex = merkle::hex(h.root_hash);
    c.envelope = json::serialize(*env_v);
    c.kind = WitnessCheck::Kind::ok;
    if (!last) return c;
    const auto old_root = merkle::from_hex(last->root_hex);
    if (!old_root) return unreadable("the head kept of this peer is unreadable");
    if (c.size < last->size) {
        c.kind = WitnessCheck::Kind::conflict;
        c.why = "rollback: a log of size " + std::to_string(c.size) + " after one of size " + std::to_string(last->size);
        return c;
    }
    if (c.size == last->size) {
        if (c.root_hex == last->root_hex) return c;
        c.kind = WitnessCheck::Kind::conflict;
        c.why = "fork: two roots for size " + std::to_string(c.size) + " (" + last->root_hex.substr(0, 16) + "..., now " +
                c.root_hex.substr(0, 16) + "...)";
        return c;
    }
    std::string err;
    const std::vector<std::string> path = proof(last->size, c.size, err);
    if (!err.empty()) return unreadable("no consistency proof from size " + std::to_string(last->size) + " to " + std::to_string(c.size) + ": " + err);
    if (path.size() > kMaxProof) return unreadable("a consistency proof of " + std::to_string(path.size()) + " hashes");
    std::vector<merkle::Hash> hashes;
    for (const auto &x : path) {
        auto hsh = merkle::from_hex(x);
        if (!hsh) return unreadable("a consistency proof with a hash that is not 64 hex digits");
        hashes.push_back(*hsh);
    }
    if (!merkle::verify_consistency(uint64_t(last->size), uint64_t(c.size), *old_root, h.root_hash, hashes)) {
        c.kind = WitnessCheck::Kind::conflict;
        c.why = "fork: the log of size " + std::to_string(c.size) + " does not extend the one of size " + std::to_string(last->size) +
                " witnessed before (the consistency proof fails)";
    }
    return c;
}

}  // namespace shardnet::broker
