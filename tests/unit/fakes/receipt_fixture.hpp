// The receipts tests' fixture (test_broker_receipts.cpp,
// test_broker_sealed_lists.cpp): a service that signs receipts, with users
// alice and bob, and the helpers that read and verify what it signed.
#pragma once
#include <doctest/doctest.h>
#include <sqlite3.h>

#include "common/digest.hpp"
#include "common/receipt_verify.hpp"
#include "common/tree_head.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

namespace shardnet::broker::testing {

namespace receipts_fixture {
namespace json = boost::json;

inline const std::string kConf = "/fake/c1.conf";

inline SigningKey test_key(char seed = 'k') {
    SigningKey k;
    REQUIRE(SigningKey::from_seed(std::string(32, seed), k) == "");
    return k;
}

// A fixture whose broker signs receipts; alice and bob are users of this host.
struct ReceiptFixture : ServiceFixture {
    SigningKey key = test_key();
    explicit ReceiptFixture(std::map<std::string, std::string> clusters = {}) : ServiceFixture(std::move(clusters)) {
        cfg.receipts.key = key;
        cfg.tokens.push_back(TokenEntry{"alice", sha256_hex("alice-t"), Scope::user, "", 0, "daemon"});
        cfg.tokens.push_back(TokenEntry{"bob", sha256_hex("bob-t"), Scope::user, "", 0, "bin"});
        cfg.tokens.push_back(TokenEntry{"site", sha256_hex("worker-t"), Scope::worker, ""});
    }
    json::object get(const std::string &path, const std::string &token = "admin-t") {
        auto r = call("GET", path, "", token);
        INFO(path << ": " << r.body);
        REQUIRE(r.status == 200);
        return json::parse(r.body).as_object();
    }
    // The run's envelopes, in the broker's order.
    std::vector<dsse::Envelope> envelopes(const std::string &run) {
        std::vector<dsse::Envelope> out;
        const json::object list = get("/v1/runs/" + run + "/receipts");   // kept: the loop reads into it
        for (const auto &r : list.at("receipts").as_array()) {
            dsse::Envelope e;
            REQUIRE(dsse::from_json_value(r.at("envelope"), e) == "");
            out.push_back(std::move(e));
        }
        return out;
    }
    std::vector<std::string> kinds(const std::string &run) {
        std::vector<std::string> out;
        const json::object list = get("/v1/runs/" + run + "/receipts");
        for (const auto &r : list.at("receipts").as_array()) out.emplace_back(r.at("kind").as_string());
        return out;
    }
};

inline std::string sha(const std::string &s) { return sha256_hex(s); }

inline std::string commit(long long attempt, int rank, int world, const std::string &shard = "model") {
    const std::string p = "rank-" + std::to_string(rank) + "/" + shard + ".pt";
    return R"({"attempt":)" + std::to_string(attempt) + R"(,"rank":)" + std::to_string(rank) + R"(,"world_size":)" + std::to_string(world) +
           R"(,"files":[{"path":")" + p + R"(","sha256":")" + sha(p) + R"(","bytes":)" + std::to_string(100 + rank) + "}]}";
}

inline receipt::ChainResult verified(const std::vector<dsse::Envelope> &envs, const SigningKey &key) {
    auto res = receipt::verify_chain(envs, {key});
    for (const auto &f : res.failures) FAIL_CHECK(f.text());
    return res;
}

inline merkle::Hash hash(const json::value &v) {
    auto h = merkle::from_hex(v.as_string());
    REQUIRE(h);
    return *h;
}

inline receipt::TreeHead head_of(const json::value &env, const SigningKey &key) {
    dsse::Envelope e;
    REQUIRE(dsse::from_json_value(env, e) == "");
    receipt::TreeHead h;
    REQUIRE(receipt::verify_tree_head(e, {key}, h) == "");
    return h;
}

}  // namespace receipts_fixture

}  // namespace shardnet::broker::testing
