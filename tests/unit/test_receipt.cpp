#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <doctest/doctest.h>
#include <fstream>
#include <string>
#include <unistd.h>

#include "common/digest.hpp"
#include "common/receipt.hpp"
#include "common/receipt_verify.hpp"
#include "common/tree_head.hpp"

using namespace shardnet;
using namespace shardnet::receipt;
namespace json = boost::json;

namespace {

SigningKey key(char c) {
    SigningKey k;
    REQUIRE(SigningKey::from_seed(std::string(32, c), k) == "");
    return k;
}

const std::string kShard = "weights of rank 0\n";

// A run's whole story: started, one seal, ended, run ended; signed by k.
std::vector<dsse::Envelope> chain(const SigningKey &k, const std::string &run = "small-1a2b3c") {
    std::vector<Receipt> rs(4);
    rs[0].kind = Kind::attempt_started;
    rs[0].body = json::object{{"cluster", "beta"}, {"job", 42}, {"owner", json::object{{"user", "alice"}, {"uid", 1001}}}};
    rs[1].kind = Kind::checkpoint_sealed;
    rs[1].body = json::object{{"checkpoint", "checkpoint-100"}, {"step", 100}, {"parent", nullptr}};
    rs[1].subjects = shard_subjects({{"rank-0.pt", sha256_hex(kShard), kShard.size(), 0, "b1"}});
    rs[2].kind = Kind::attempt_ended;
    rs[2].body = json::object{{"how", "exited"}, {"exit_codes", json::array{0}}};
    rs[3].kind = Kind::run_ended;
    rs[3].body = json::object{{"state", "SUCCEEDED"}};
    std::vector<dsse::Envelope> out;
    for (std::size_t i = 0; i < rs.size(); ++i) {
        rs[i].run = run;
        rs[i].attempt = 1;
        rs[i].broker = "beta-broker";
        rs[i].time = utc_time(1.7e9 + double(i));
        rs[i].seq = long(i) + 1;
        rs[i].previous = i ? envelope_digest(out.back()) : "";
        dsse::Envelope e;
        REQUIRE(sign_receipt(k, rs[i], e) == "");
        out.push_back(e);
    }
    return out;
}

std::string texts(const std::vector<Failure> &fs) {
    std::string s;
    for (const auto &f : fs) s += f.text() + "\n";
    return s;
}

}  // namespace

TEST_CASE("a receipt is an in-toto Statement v1 with the ShardNet predicate, and reads back") {
    const auto envs = chain(key('a'));
    const json::value st = json::parse(envs[1].payload);
    CHECK(st.at("_type") == "https://in-toto.io/Statement/v1");
    CHECK(st.at("predicateType") == "https://shardnet.dev/receipt/v1");
    CHECK(st.at("subject").at(0).at("name") == "rank-0.pt");
    CHECK(st.at("subject").at(0).at("digest").at("sha256") == json::value(sha256_hex(kShard)));
    CHECK(st.at("subject").at(0).at("annotations").at("size") == json::value(kShard.size()));
    CHECK(st.at("predicate").at("kind") == "checkpoint-sealed");
    CHECK(st.at("predicate").at("seq") == 2);
    CHECK(st.at("predicate").at("previous") == json::value(envelope_digest(envs[0])));
    CHECK(json::parse(envs[0].payload).at("predicate").at("previous").is_null());
    // Kinds without shards still have a subject, as in-toto wants.
    CHECK(json::parse(envs[0].payload).at("subject").at(0).at("name") == "shardnet:small-1a2b3c/attempt/1/attempt-started");
    Receipt r;
    REQUIRE(parse_statement(envs[1].payload, r) == "");
    CHECK(r.kind == Kind::checkpoint_sealed);
    CHECK(r.subjects.size() == 1);
    CHECK(make_statement(r) == envs[1].payload);
    CHECK(envelope_digest(envs[0]) == sha256_hex(dsse::to_json(envs[0])));
    CHECK(utc_time(1700000000.25) == "2023-11-14T22:13:20.250Z");
}

TEST_CASE("statements are read strictly and bad receipts are not made") {
    Receipt r;
    CHECK(parse_statement("{}", r) == "_type: missing");
    CHECK(parse_statement(R"({"_type":"https://in-toto.io/Statement/v0.1","subject":[],"predicateType":"x","predicate":{}})", r)
              .rfind("_type: https://in-toto.io/Statement/v0.1 is not", 0) == 0);
    const std::string good = chain(key('a'))[2].payload;
    auto edit = [&](const std::string &from, const std::string &to) {
        std::string s = good;
        REQUIRE(s.find(from) != std::string::npos);
        return s.replace(s.find(from), from.size(), to);
    };
    CHECK(parse_statement(edit("\"seq\":3", "\"seq\":\"3\""), r) == "predicate.seq: expected an integer");
    CHECK(parse_statement(edit("\"seq\":3", "\"seq\":0"), r).rfind("predicate.seq: expected 1..", 0) == 0);
    CHECK(parse_statement(edit("\"kind\":\"attempt-ended\"", "\"kind\":\"attempt-paused\""), r).rfind("predicate.kind: attempt-paused is not", 0) == 0);
    CHECK(parse_statement(edit("\"how\":", "\"why\":"), r) == "predicate.body.how: missing");
    CHECK(parse_statement(edit("\"broker\":", "\"brokr\":"), r) == "predicate.brokr: unknown field");
    CHECK(parse_statement(edit("\"previous\":\"", "\"previous\":\"X"), r) == "predicate.previous: expected the hex SHA-256 of receipt seq 2");
    CHECK(parse_statement(edit("T22", "t22").empty() ? good : edit(".000Z", "+01:00"), r).rfind("predicate.time:", 0) == 0);
    Receipt bad;
    bad.run = "r";
    bad.broker = "b";
    bad.time = utc_time(0);
    bad.kind = Kind::checkpoint_sealed;
    bad.body = json::object{{"checkpoint", "c"}, {"parent", nullptr}};
    dsse::Envelope e;
    CHECK(sign_receipt(key('a'), bad, e) == "subject: a sealed checkpoint names its shard files");
    bad.kind = Kind::run_ended;
    bad.seq = 2;
    CHECK(sign_receipt(key('a'), bad, e).rfind("predicate.previous:", 0) == 0);
}

TEST_CASE("a good chain verifies; every kind of tampering is named with its receipt") {
    const SigningKey k = key('a');
    const auto good = chain(k);
    auto res = verify_chain(good, {k});
    CHECK(texts(res.failures) == "");
    CHECK(res.receipts.size() == 4);

    SUBCASE("a changed byte in a payload") {
        auto envs = good;
        envs[1].payload.replace(envs[1].payload.find("\"step\":100"), 10, "\"step\":900");
        const std::string t = texts(verify_chain(envs, {k}).failures);
        CHECK(t == "run small-1a2b3c seq 2: bad signature by key " + k.keyid() + " (payload or signature altered)\n"
                   "run small-1a2b3c seq 3: missing predecessor: no verified receipt with seq 2\n");
    }
    SUBCASE("a dropped receipt") {
        auto envs = good;
        envs.erase(envs.begin() + 2);
        CHECK(texts(verify_chain(envs, {k}).failures) == "run small-1a2b3c seq 4: missing predecessor: no verified receipt with seq 3\n");
        envs.erase(envs.begin());
        CHECK(texts(verify_chain(envs, {k}).failures) ==
              "run small-1a2b3c seq 2: missing predecessor: no verified receipt with seq 1\n"
              "run small-1a2b3c seq 4: missing predecessor: no verified receipt with seq 3\n");
    }
    SUBCASE("two swapped") {
        auto envs = good;
        std::swap(envs[1], envs[2]);
        CHECK(texts(verify_chain(envs, {k}).failures) == "run small-1a2b3c seq 2: out of order: listed after seq 3 (receipts swapped?)\n");
    }
    SUBCASE("a duplicate, and a fork") {
        auto envs = good;
        envs.insert(envs.begin() + 2, good[1]);
        CHECK(texts(verify_chain(envs, {k}).failures) == "run small-1a2b3c seq 2: duplicate: the same receipt is listed again\n");
        // Another receipt signed for seq 2 of the same run: both cannot be the chain.
        Receipt r;
        REQUIRE(parse_statement(good[1].payload, r) == "");
        r.body["step"] = 101;
        dsse::Envelope other;
        REQUIRE(sign_receipt(k, r, other) == "");
        envs = good;
        envs.insert(envs.begin() + 2, other);
        CHECK(texts(verify_chain(envs, {k}).failures) == "run small-1a2b3c seq 2: two different receipts with seq 2 (a forked chain)\n");
        // ... and one that replaces the original is no predecessor of seq 3.
        envs = good;
        envs[1] = other;
        CHECK(texts(verify_chain(envs, {k}).failures).rfind("run small-1a2b3c seq 3: missing predecessor: previous is ", 0) == 0);
    }
    SUBCASE("an unknown key") {
        const SigningKey stranger = key('z');
        auto envs = good;
        envs[3] = chain(stranger)[3];
        CHECK(texts(verify_chain(envs, {k}).failures) ==
              "run small-1a2b3c seq 4: signed by unknown key " + stranger.keyid() + " (not among the --key public keys)\n");
        CHECK(verify_chain(good, {stranger}).receipts.empty());
    }
    SUBCASE("a payload that is no receipt") {
        auto envs = good;
        envs[0].payload_type = "text/plain";
        CHECK(texts(verify_chain(envs, {k}).failures).rfind("envelope #1: bad signature", 0) == 0);
    }
    SUBCASE("two runs' chains are each checked on their own, interleaved") {
        auto envs = good;
        const auto other = chain(k, "other-run");
        envs.insert(envs.begin() + 1, other.begin(), other.end());
        CHECK(texts(verify_chain(envs, {k}).failures) == "");
    }
}

TEST_CASE("a key signs nothing after its valid_until (retired), to the millisecond") {
    const SigningKey k = key('k');
    const auto good = chain(k);   // seq N at 1.7e9 + N - 1
    // Retired at seq 2's time: seq 1 and 2 stand, 3 and 4 are refused.
    const std::string until = utc_time(1.7e9 + 1);
    auto res = verify_chain(good, {k}, {}, {{k.keyid(), until}});
    CHECK(res.receipts.size() == 2);
    CHECK(texts(res.failures) ==
          "run small-1a2b3c seq 3: signed by key " + k.keyid() + " at " + utc_time(1.7e9 + 2) + ", after the key's valid_until " + until +
              " (a retired key signs nothing later)\n"
          "run small-1a2b3c seq 4: signed by key " + k.keyid() + " at " + utc_time(1.7e9 + 3) + ", after the key's valid_until " + until +
              " (a retired key signs nothing later)\n");
    // Another key's retirement, or none, leaves the chain whole.
    CHECK(texts(verify_chain(good, {k}, {}, {{key('z').keyid(), until}}).failures) == "");
    CHECK(texts(verify_chain(good, {k}, {}, {{k.keyid(), utc_time(1.7e9 + 3)}}).failures) == "");
    // A valid_until that is no time refuses what the key signed (never read as "no limit").
    CHECK(verify_chain(good, {k}, {}, {{k.keyid(), "yesterday"}}).receipts.empty());
    // Times of any precision compare as times, not as strings.
    CHECK(compare_utc_times("2025-03-01T12:00:00.5Z", "2025-03-01T12:00:00Z") == 1);
    CHECK(compare_utc_times("2025-03-01T12:00:00Z", "2025-03-01T12:00:00.000Z") == 0);
    CHECK(compare_utc_times("2025-03-01T12:00:00.25Z", "2025-03-01T12:00:00.250Z") == 0);
    CHECK(compare_utc_times("2025-03-01T12:00:00.249Z", "2025-03-01T12:00:00.25Z") == -1);
    CHECK(compare_utc_times("2025-03-01T11:59:59.999Z", "2025-03-01T12:00:00Z") == -1);
}

TEST_CASE("a sealed checkpoint's files are re-hashed on disk") {
    const SigningKey k = key('a');
    auto res = verify_chain(chain(k), {k});
    REQUIRE(res.receipts.size() == 4);
    const Verified &sealed = res.receipts[1];
    char dir[] = "/tmp/test-receipt-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const std::string d = dir;
    CHECK(texts(verify_checkpoint_files(sealed, d)) == "run small-1a2b3c seq 2: shard rank-0.pt is missing: no " + d + "/rank-0.pt\n");
    std::ofstream(d + "/rank-0.pt") << kShard;
    CHECK(texts(verify_checkpoint_files(sealed, d)) == "");
    std::ofstream(d + "/rank-0.pt") << "weights of rank 1\n";
    CHECK(texts(verify_checkpoint_files(sealed, d)).find("digest mismatch for shard rank-0.pt") != std::string::npos);
    std::ofstream(d + "/rank-0.pt") << "w";
    CHECK(texts(verify_checkpoint_files(sealed, d)).find("size mismatch for shard rank-0.pt: 1 bytes on disk, 18 sealed") != std::string::npos);
    CHECK(texts(verify_checkpoint_files(res.receipts[0], d)).find("not a checkpoint-sealed receipt") != std::string::npos);
    std::remove((d + "/rank-0.pt").c_str());
    rmdir(dir);
}

TEST_CASE("a signed tree head reads back, and is refused when altered or unknown") {
    const SigningKey k = key('h');
    TreeHead h{3, merkle::leaf_hash("x"), utc_time(1.7e9)};
    dsse::Envelope env;
    REQUIRE(sign_tree_head(k, h, env) == "");
    CHECK(env.payload_type == "application/vnd.shardnet.treehead+json");
    TreeHead back;
    REQUIRE(verify_tree_head(env, {k}, back) == "");
    CHECK(back.tree_size == 3);
    CHECK(back.root_hash == h.root_hash);
    CHECK(verify_tree_head(env, {key('a')}, back).find("unknown key") != std::string::npos);
    env.payload.replace(env.payload.find("\"tree_size\":3"), 13, "\"tree_size\":4");
    CHECK(verify_tree_head(env, {k}, back).find("bad signature") != std::string::npos);
}

TEST_CASE("a log head signed by a retired key after its valid_until is refused, naming both times") {
    const SigningKey k = key('h'), fresh = key('f');
    TreeHead h{3, merkle::leaf_hash("x"), utc_time(1.7e9 + 10)};
    dsse::Envelope env;
    REQUIRE(sign_tree_head(k, h, env) == "");
    TreeHead back;
    CHECK(verify_tree_head_in_time(env, {k}, {}, back) == "");
    CHECK(verify_tree_head_in_time(env, {k}, {{k.keyid(), utc_time(1.7e9 + 10)}}, back) == "");   // up to the instant
    CHECK(verify_tree_head_in_time(env, {k, fresh}, {{fresh.keyid(), utc_time(1.7e9)}}, back) == "");
    CHECK(verify_tree_head_in_time(env, {k}, {{k.keyid(), utc_time(1.7e9 + 9)}}, back) ==
          "signed by key " + k.keyid() + " at " + utc_time(1.7e9 + 10) + ", after the key's valid_until " + utc_time(1.7e9 + 9) +
              " (a retired key signs nothing later)");
    CHECK(verify_tree_head_in_time(env, {k}, {{k.keyid(), "soon"}}, back).find("after the key's valid_until soon") != std::string::npos);
    CHECK(verify_tree_head_in_time(env, {fresh}, {}, back).find("unknown key") != std::string::npos);
    // A retired key's head with no time, or one that is not a UTC time, is
    // refused (it compared before every date); an unretired key's is not judged by it.
    for (const std::string when : {"", "0", "2019-12-31"}) {
        dsse::Envelope undated;
        REQUIRE(sign_tree_head(k, TreeHead{3, merkle::leaf_hash("x"), when}, undated) == "");
        CHECK(verify_tree_head_in_time(undated, {k}, {}, back) == "");
        CHECK(verify_tree_head_in_time(undated, {k}, {{k.keyid(), utc_time(1.7e9 + 9)}}, back) ==
              "signed by retired key " + k.keyid() + " with timestamp '" + when +
                  "', not a UTC time (YYYY-MM-DDTHH:MM:SSZ): a retired key's head must say when it was signed");
    }
}
