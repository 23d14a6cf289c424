// shard verify --witness (sbatch-wrappers/witness_cmd.cpp): a broker's head
// as this user verified it against the heads other brokers witnessed of it.
// Real trees, proofs and signed heads; the broker's consistency proofs come
// from the tree it really holds.
#include <boost/json.hpp>
#include <doctest/doctest.h>

#include "common/dsse.hpp"
#include "common/merkle.hpp"
#include "common/signing_key.hpp"
#include "common/tree_head.hpp"
#include "sbatch-wrappers/witness_cmd.hpp"

using namespace shardnet;
using namespace shardnet::cli;
namespace json = boost::json;

namespace {

struct Log {
    merkle::MemoryTree tree;
    Log(int n, const std::string &p = "a") { for (int i = 0; i < n; ++i) tree.append(p + std::to_string(i)); }
    merkle::Hash root(uint64_t n) const { return merkle::root(n, tree.source()); }
    std::string head(const SigningKey &k, uint64_t n) const {
        receipt::TreeHead h{n, root(n), "2026-12-03T08:00:00Z"};
        dsse::Envelope env;
        REQUIRE(receipt::sign_tree_head(k, h, env) == "");
        return dsse::to_json(env);
    }
};

SigningKey key_of(char c) {
    SigningKey k;
    REQUIRE(SigningKey::from_seed(std::string(32, c), k) == "");
    return k;
}

// The broker's log as fetched: it shows this user the first n leaves of log.
FetchedLog fetched(const Log &log) {
    FetchedLog f;
    f.broker = "beta-broker";
    f.url = "https://beta.test";
    f.consistency = [&log](unsigned long long a, unsigned long long b, std::vector<std::string> &path) {
        for (const auto &h : merkle::consistency_proof(a, b, log.tree.source())) path.push_back(merkle::hex(h));
        return std::string();
    };
    return f;
}

json::object shown(const Log &log, uint64_t n) { return json::object{{"tree_size", n}, {"root_hash", merkle::hex(log.root(n))}}; }

}  // namespace

TEST_CASE("shard verify --witness: an older or a newer witnessed head of the same log agrees; another history does not") {
    const SigningKey k = key_of('k');
    Log log(12);
    FetchedLog f = fetched(log);
    f.witnessed = {{"alpha-broker", log.head(k, 7), ""}, {"gamma-broker", log.head(k, 12), ""}};
    json::object report;
    CHECK(check_witnesses(f, shown(log, 10), {k}, {}, report).empty());
    REQUIRE(report.at("witnessed").as_array().size() == 2);
    CHECK(report.at("witnessed").at(0).at("tree_size").to_number<long long>() == 7);

    Log other(12, "b");   // what beta showed alpha: another history
    f.witnessed = {{"alpha-broker", other.head(k, 7), ""}};
    auto lines = check_witnesses(f, shown(log, 10), {k}, {}, report);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == "broker beta-broker showed broker alpha-broker a log of size 7 and you one of size 10 that are not one history "
                      "(the consistency proof fails): a second history");
    f.witnessed = {{"alpha-broker", other.head(k, 10), ""}};
    lines = check_witnesses(f, shown(log, 10), {k}, {}, report);
    CHECK(lines == std::vector<std::string>{"broker beta-broker showed broker alpha-broker another root for size 10: a second history"});
}

TEST_CASE("shard verify --witness: a conflict the witness kept, a head not signed by the broker, or no witness at all fail") {
    const SigningKey k = key_of('k'), other = key_of('o');
    Log log(6);
    FetchedLog f = fetched(log);
    json::object report;
    f.witnessed = {{"alpha-broker", log.head(k, 6), "fork: two roots for size 9 (1406..., now 409a...)"}};
    CHECK(check_witnesses(f, shown(log, 6), {k}, {}, report) ==
          std::vector<std::string>{"broker alpha-broker saw broker beta-broker show another history: fork: two roots for size 9 (1406..., now 409a...)"});
    f.witnessed = {{"alpha-broker", log.head(other, 6), ""}};
    auto lines = check_witnesses(f, shown(log, 6), {k}, {}, report);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].rfind("broker alpha-broker's witnessed head of broker beta-broker does not verify with its keys", 0) == 0);
    f.witnessed.clear();
    f.witness_errors = {"broker alpha-broker: HTTP 401"};
    lines = check_witnesses(f, shown(log, 6), {k}, {}, report);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == "broker beta-broker: no other broker witnessed its log (--witness asks the config's other brokers, GET /v1/witness); "
                      "broker alpha-broker: HTTP 401");
}
