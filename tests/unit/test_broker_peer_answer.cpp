#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "broker/util/thread_guard.hpp"
#include "broker/peers/peer_answer.hpp"

using namespace shardnet;
using namespace shardnet::broker;

namespace {
HttpResponse answer(long status, const std::string &body) {
    HttpResponse r;
    r.status = status;
    r.body = body;
    return r;
}
const char *kRow = R"({"broker":"b","cluster":"c","region":"r","status":"ok","accelerator_class":"h100","gpus_per_node":8,)"
                   R"("gpu_memory_gb":80,"fabric":"nvlink","idle_nodes":2,"total_nodes":4})";
std::string capacity_error(const std::string &body) { return parse_peer_capacity(answer(200, body)).error; }
PeerDecision decision(long status, const std::string &body) { return parse_peer_decision(answer(status, body)); }
}  // namespace

TEST_CASE("a peer's capacity rows are rebuilt from the known fields") {
    PeerCapacity c = parse_peer_capacity(answer(200, std::string(R"({"clusters":[)") + kRow +
                                                     R"(,{"broker":"b","cluster":"d","status":"unknown","reason":"down","x":1}]})"));
    REQUIRE(c.error.empty());
    REQUIRE(c.rows.size() == 2);
    CHECK(c.rows[0].as_object().at("idle_nodes").as_int64() == 2);
    CHECK(c.rows[1].as_object().at("status").as_string() == "unknown");
    CHECK_FALSE(c.rows[1].as_object().contains("x"));   // nothing unknown passes through
}

TEST_CASE("a peer's capacity of the wrong shape is an error naming the field, never rows") {
    CHECK(capacity_error(R"({"clusters":5})") == "bad answer: clusters: expected an array");
    CHECK(capacity_error(R"({"clusters":[5,"x",{"cluster":7}]})") == "bad answer: clusters[0]: expected an object");
    CHECK(capacity_error(R"({"clusters":[{"broker":"b","cluster":7,"status":"ok"}]})") ==
          "bad answer: clusters[0].cluster: expected a string");
    CHECK(capacity_error(std::string(R"({"clusters":[)") + kRow + R"(,{"broker":"b","cluster":"c","status":"ok",)"
                         R"("accelerator_class":"x","gpus_per_node":1,"gpu_memory_gb":null,"fabric":"f","idle_nodes":"x","total_nodes":1}]})") ==
          "bad answer: clusters[1].idle_nodes: expected an integer");
    CHECK(capacity_error(R"({"nope":[]})") == "bad answer: clusters: missing");
    CHECK(capacity_error("<html>") .rfind("bad answer: body: not JSON", 0) == 0);
    CHECK(capacity_error("[1]") == "bad answer: body: expected an object");
    CHECK(capacity_error(R"({"clusters":[{"broker":"b","cluster":"c","status":"maybe"}]})") ==
          "bad answer: clusters[0].status: expected ok, unknown or refused");
    CHECK(capacity_error(R"({"clusters":[{"broker":")" + std::string(300, 'x') + R"(","cluster":"c","status":"ok"}]})") ==
          "bad answer: clusters[0].broker: longer than 256 bytes");
    CHECK(parse_peer_capacity(answer(200, R"({"clusters":[5]})")).rows.empty());
    CHECK(parse_peer_capacity(answer(503, "")).error == "HTTP 503");
}

TEST_CASE("a peer's capacity with too many rows is refused") {
    std::string body = R"({"clusters":[)";
    for (std::size_t i = 0; i <= kPeerRowsMax; ++i) body += std::string(i ? "," : "") + kRow;
    CHECK(capacity_error(body + "]}") == "bad answer: clusters: more than 4096 entries");
}

TEST_CASE("a peer's decision answers: accepted, refused, or bad with the field named") {
    PeerDecision a = decision(200, R"({"accepted":true,"broker":"p","cluster":"alpha","job":41,"nodes":["a1"],"fabric":"ethernet"})");
    REQUIRE(a.kind == PeerDecision::Kind::accepted);
    CHECK(a.job == 41);
    CHECK(a.cluster == "alpha");
    CHECK(a.evidence.at("nodes").as_array().size() == 1);

    PeerDecision r = decision(409, R"({"error":{"code":"no_capacity","message":"full"},"rejected":[{"cluster":"a","reason":"busy"}]})");
    REQUIRE(r.kind == PeerDecision::Kind::refused);
    CHECK(r.why == "full; a rejected: busy");

    auto bad = [](long status, const std::string &body) {
        PeerDecision d = decision(status, body);
        CHECK(d.kind == PeerDecision::Kind::bad);
        return d.error;
    };
    CHECK(bad(409, R"({"error":{"message":5}})") == "error.message: expected a string");
    CHECK(bad(409, R"({"error":"no"})") == "error: expected an object");
    CHECK(bad(409, R"({"error":{"message":"m"},"rejected":[1,{"cluster":3}]})") == "rejected[0]: expected an object");
    CHECK(bad(409, R"({"error":{"message":"m"},"rejected":[{"cluster":3}]})") == "rejected[0].cluster: expected a string");
    CHECK(bad(200, R"({"job":"x"})") == "accepted: missing");
    CHECK(bad(200, R"({"accepted":true,"cluster":"c","job":"x"})") == "job: expected an integer");
    CHECK(bad(200, R"({"accepted":true,"cluster":"c","job":0})") == "job: expected 1..9007199254740992");
    CHECK(bad(200, R"({"accepted":true,"cluster":"c","job":1,"nodes":[3]})") == "nodes[0]: expected a node name");
    CHECK(bad(200, "not json").rfind("body: not JSON", 0) == 0);
    CHECK(decision(200, "[]").field == "body");

    HttpResponse big;
    big.too_large = true;
    big.error = "answer larger than 1048576 bytes (1 MiB): not read";
    PeerDecision t = parse_peer_decision(big);
    CHECK(t.kind == PeerDecision::Kind::bad);
    CHECK(t.field == "body");
}

TEST_CASE("the guard catches what a job throws and counts it") {
    const auto before = failed_jobs();
    CHECK_FALSE(guarded("test", [] { throw std::runtime_error("boom"); }));
    CHECK_FALSE(guarded("test", [] { throw 5; }));
    CHECK(guarded("test", [] {}));
    CHECK(failed_jobs() == before + 2);
}
