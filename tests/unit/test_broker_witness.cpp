// Brokers witness each other's logs (broker/federation/witness*.cpp): a
// peer's signed head is kept when it extends the one witnessed before (an
// RFC 9162 consistency proof), a rollback or a second history is a conflict
// kept as evidence, and GET /v1/witness shows both. Real heads and proofs
// (common/merkle, common/tree_head), signed with a test key.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "broker/federation/witness.hpp"
#include "common/dsse.hpp"
#include "common/merkle.hpp"
#include "common/signing_key.hpp"
#include "common/tree_head.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet;
using namespace shardnet::broker;
using namespace shardnet::broker::testing;
namespace json = boost::json;

namespace {

SigningKey key_of(char c) {
    SigningKey k;
    REQUIRE(SigningKey::from_seed(std::string(32, c), k) == "");
    return k;
}

// A peer's log of n leaves named by prefix ("a0", "a1", ...).
struct PeerLog {
    merkle::MemoryTree tree;
    PeerLog(int n, const std::string &prefix = "a") {
        for (int i = 0; i < n; ++i) tree.append(prefix + std::to_string(i));
    }
    merkle::Hash root() const { return merkle::root(tree.size(), tree.source()); }
    HttpResponse head(const SigningKey &k) const {
        receipt::TreeHead h{tree.size(), root(), "2026-12-03T08:00:00Z"};
        dsse::Envelope env;
        REQUIRE(receipt::sign_tree_head(k, h, env) == "");
        HttpResponse r;
        r.status = 200;
        r.body = json::serialize(json::object{{"tree_size", tree.size()}, {"root_hash", merkle::hex(root())},
                                              {"head", json::parse(dsse::to_json(env))}});
        return r;
    }
    std::vector<std::string> proof(long long first, long long second) const {
        std::vector<std::string> out;
        for (const auto &h : merkle::consistency_proof(uint64_t(first), uint64_t(second), tree.source())) out.push_back(merkle::hex(h));
        return out;
    }
};

// until: a valid_until for every key (its retirement), or none.
HttpResponse keys_of(const std::vector<SigningKey> &ks, const std::string &until = "") {
    json::array a;
    for (const auto &k : ks)
        a.push_back(json::object{{"keyid", k.keyid()}, {"pem", k.public_pem()},
                                 {"valid_until", until.empty() ? json::value(nullptr) : json::value(until)}});
    HttpResponse r;
    r.status = 200;
    r.body = json::serialize(json::object{{"keys", std::move(a)}});
    return r;
}

ConsistencyFetch proofs_of(const PeerLog &log) {
    return [&log](long long first, long long second, std::string &) { return log.proof(first, second); };
}

}  // namespace

TEST_CASE("a peer's head: kept at first sight, then held to it by a consistency proof") {
    const SigningKey k = key_of('k');
    PeerLog five(5), eight(8);
    WitnessCheck c = check_peer_head(five.head(k), keys_of({k}), std::nullopt, proofs_of(five));
    REQUIRE(c.kind == WitnessCheck::Kind::ok);
    CHECK(c.size == 5);
    const WitnessedHead kept{c.size, c.root_hex};
    c = check_peer_head(eight.head(k), keys_of({k}), kept, proofs_of(eight));
    CHECK(c.kind == WitnessCheck::Kind::ok);
    CHECK(c.size == 8);
    // The same head again: nothing to prove.
    CHECK(check_peer_head(five.head(k), keys_of({k}), kept, proofs_of(five)).kind == WitnessCheck::Kind::ok);
}

TEST_CASE("a rollback, a second root for a size, or a longer log that does not extend the kept one: conflicts") {
    const SigningKey k = key_of('k');
    PeerLog five(5), three(3), other5(5, "b"), other8(8, "b");
    const WitnessedHead kept{5, merkle::hex(five.root())};
    WitnessCheck c = check_peer_head(three.head(k), keys_of({k}), kept, proofs_of(three));
    CHECK(c.kind == WitnessCheck::Kind::conflict);
    CHECK(c.why == "rollback: a log of size 3 after one of size 5");
    c = check_peer_head(other5.head(k), keys_of({k}), kept, proofs_of(other5));
    CHECK(c.kind == WitnessCheck::Kind::conflict);
    CHECK(c.why.rfind("fork: two roots for size 5", 0) == 0);
    c = check_peer_head(other8.head(k), keys_of({k}), kept, proofs_of(other8));
    CHECK(c.kind == WitnessCheck::Kind::conflict);
    CHECK(c.why == "fork: the log of size 8 does not extend the one of size 5 witnessed before (the consistency proof fails)");
    CHECK_FALSE(c.envelope.empty());   // the evidence: the peer's own signed head
}

TEST_CASE("what cannot be read is not witnessed (and is no conflict): a head signed by no listed key, bad answers, no proof") {
    const SigningKey k = key_of('k'), other = key_of('o');
    PeerLog five(5), eight(8);
    CHECK(check_peer_head(five.head(other), keys_of({k}), std::nullopt, proofs_of(five)).kind == WitnessCheck::Kind::unreadable);
    HttpResponse bad;
    bad.status = 200;
    bad.body = R"({"head": 5})";
    CHECK(check_peer_head(bad, keys_of({k}), std::nullopt, proofs_of(five)).why.rfind("GET /v1/log/head: head:", 0) == 0);
    HttpResponse silent;
    silent.error = "Connection refused";
    CHECK(check_peer_head(silent, keys_of({k}), std::nullopt, proofs_of(five)).why == "GET /v1/log/head: Connection refused");
    HttpResponse keys = keys_of({k});
    keys.body = R"({"keys":[{"pem":"not a key"}]})";
    CHECK(check_peer_head(five.head(k), keys, std::nullopt, proofs_of(five)).why == "GET /v1/keys: keys[].pem: expected a public key (PEM)");
    const WitnessedHead kept{5, merkle::hex(five.root())};
    const WitnessCheck c = check_peer_head(eight.head(k), keys_of({k}), kept, [](long long, long long, std::string &err) {
        err = "HTTP 500";
        return std::vector<std::string>{};
    });
    CHECK(c.kind == WitnessCheck::Kind::unreadable);
    CHECK(c.why == "no consistency proof from size 5 to 8: HTTP 500");
}

TEST_CASE("a head signed by a key the peer retired before the head's time is not witnessed; one signed before is") {
    const SigningKey k = key_of('k');
    PeerLog five(5);   // its head is timed 2026-12-03T08:00:00Z
    WitnessCheck c = check_peer_head(five.head(k), keys_of({k}, "2026-12-01T00:00:00Z"), std::nullopt, proofs_of(five));
    CHECK(c.kind == WitnessCheck::Kind::unreadable);
    CHECK(c.why.find("2026-12-01T00:00:00Z") != std::string::npos);
    CHECK(c.why.find("2026-12-03T08:00:00Z") != std::string::npos);
    CHECK(check_peer_head(five.head(k), keys_of({k}, "2026-12-04T00:00:00Z"), std::nullopt, proofs_of(five)).kind ==
          WitnessCheck::Kind::ok);
    CHECK(check_peer_head(five.head(k), keys_of({k}, "yesterday"), std::nullopt, proofs_of(five)).why ==
          "GET /v1/keys: keys[].valid_until: expected RFC 3339 UTC or null");
    // Retired without a valid_until (it signed no receipt there): valid for no head.
    HttpResponse retired = keys_of({k});
    json::value v = json::parse(retired.body);
    v.at("keys").as_array()[0].as_object()["status"] = "retired";
    retired.body = json::serialize(v);
    CHECK(check_peer_head(five.head(k), retired, std::nullopt, proofs_of(five)).kind == WitnessCheck::Kind::unreadable);
    v.at("keys").as_array()[0].as_object()["status"] = "current";
    retired.body = json::serialize(v);
    CHECK(check_peer_head(five.head(k), retired, std::nullopt, proofs_of(five)).kind == WitnessCheck::Kind::ok);
}

TEST_CASE("a broker witnesses its peer: GET /v1/witness shows the head; a fork is kept as evidence beside the head, and counted") {
    ServiceFixture f({{"c1", "/fake/c1.conf"}}, {BrokerConfig::Peer{"beta", "https://beta.test", "", "to-beta", ""}});
    f.cfg.witness_seconds = 0;   // rounds are run by hand here
    f.start();
    const SigningKey k = key_of('k');
    PeerLog log(5);
    std::mutex mu;
    auto now_log = [&] { std::lock_guard<std::mutex> lock(mu); return &log; };
    f.peers->on("https://beta.test/v1/log/head", [&](const HttpRequest &) { return now_log()->head(k); });
    f.peers->on("https://beta.test/v1/keys", [&](const HttpRequest &) { return keys_of({k}); });
    f.svc->witness_round(1000.0);
    auto w = json::parse(f.call("GET", "/v1/witness").body).as_object();
    REQUIRE(w.at("heads").as_array().size() == 1);
    const json::object &h = w.at("heads").at(0).as_object();
    CHECK(h.at("peer").as_string() == "beta");
    CHECK(h.at("tree_size").as_int64() == 5);
    CHECK(h.at("conflict").is_null());
    CHECK(h.at("head").as_object().contains("signatures"));
    CHECK(f.peers->requests("https://beta.test/v1/log/head")[0].bearer == "to-beta");

    // The log grows: the proof is asked for and checked.
    PeerLog grown(9);
    f.peers->on("https://beta.test/v1/log/proof/consistency?first=5&second=9", [&](const HttpRequest &) {
        HttpResponse r;
        r.status = 200;
        r.body = json::serialize(json::object{{"path", json::value_from(grown.proof(5, 9))}});
        return r;
    });
    {
        std::lock_guard<std::mutex> lock(mu);
        log = PeerLog(9);
    }
    f.svc->witness_round(1060.0);
    w = json::parse(f.call("GET", "/v1/witness").body).as_object();
    CHECK(w.at("heads").at(0).at("tree_size").as_int64() == 9);
    CHECK(w.at("heads").at(0).at("conflict").is_null());

    // Another history of size 9: the head of 9 stays, the fork is the evidence.
    {
        std::lock_guard<std::mutex> lock(mu);
        log = PeerLog(9, "b");
    }
    f.svc->witness_round(1120.0);
    w = json::parse(f.call("GET", "/v1/witness").body).as_object();
    const json::object &after = w.at("heads").at(0).as_object();
    CHECK(after.at("tree_size").as_int64() == 9);
    CHECK(after.at("root_hash").as_string() == merkle::hex(grown.root()));
    REQUIRE(after.at("conflict").is_object());
    CHECK(after.at("conflict").at("why").as_string().rfind("fork: two roots for size 9", 0) == 0);
    CHECK(f.svc->metrics().find("shardnet_witness_conflicts_total 1") != std::string::npos);
}
