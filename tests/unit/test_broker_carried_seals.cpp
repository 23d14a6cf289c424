// Seals that travel with a run between brokers, and commits of a name
// already sealed (seals/carried.cpp, seals/held_seal.cpp,
// federation/inbox.cpp, store/seal_store.cpp): a carried seal's receipt is
// served as its sender's claim; the receiver keeps a run's newest two and
// forgets a finished run's; committing a sealed (or carried) name again
// answers that seal, other files under it are refused; only the broker a
// run was moved to may hand it back.
#include <doctest/doctest.h>
#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>

#include "broker/store/store.hpp"
#include "common/digest.hpp"
#include "common/file_list.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet::broker;
using namespace shardnet::broker::testing;
namespace json = boost::json;
using shardnet::HttpRequest;
using shardnet::HttpResponse;
using shardnet::sha256_hex;
namespace file_list = shardnet::file_list;

namespace {

const std::string kConf = "/fake/c1.conf";
const std::string kBeta = "https://beta.test/v1/decisions";

bool contains(const std::string &hay, const std::string &needle) { return hay.find(needle) != std::string::npos; }

HttpResponse answer(long status, const json::object &body) {
    HttpResponse r;
    r.status = status;
    r.body = json::serialize(body);
    return r;
}

json::object file_of(int rank, const std::string &name, const std::string &salt = "") {
    const std::string p = "rank-" + std::to_string(rank) + ".pt";
    return json::object{{"path", p}, {"sha256", sha256_hex(name + p + salt)}, {"bytes", 100 + rank}};
}

std::string commit_body(int rank, long long attempt, const std::string &name, const std::string &salt = "") {
    return json::serialize(json::object{{"attempt", attempt}, {"rank", rank}, {"world_size", 2}, {"files", json::array{file_of(rank, name, salt)}}});
}

// A seal as a peer's decision carries it: two ranks' files, its root, and
// the sender's receipt of it.
json::object carried(const std::string &name) {
    json::array files;
    std::vector<file_list::Entry> es;
    for (int rank : {0, 1}) {
        json::object f = file_of(rank, name);
        f["rank"] = rank;
        es.push_back({std::string(f.at("path").as_string()), std::string(f.at("sha256").as_string()), (unsigned long long)(100 + rank), rank});
        files.push_back(std::move(f));
    }
    file_list::sort(es);
    return json::object{{"name", name}, {"attempt", 1}, {"ranks", 2}, {"parent", nullptr}, {"sealed_by", "beta"},
                        {"list", file_list::summary_json(file_list::summarize(es))},
                        {"receipt", json::object{{"seq", 7}, {"digest", std::string(64, 'd')}}}, {"files", std::move(files)}};
}

std::string decision(const std::string &id, const std::string &run, long long to, const json::array &sealed = {}) {
    json::object d{{"id", id}, {"from_broker", "beta"}, {"run", run}, {"from_attempt", to - 1}, {"to_attempt", to},
                   {"spec", json::object{{"user", "daemon"}, {"uid", 0}, {"gid", 0}, {"nodes", 1}, {"tasks", 1}, {"workdir", "/tmp"}}},
                   {"script", "#!/bin/sh\nsrun train.py\n"}, {"owner", "daemon"}, {"resume", "checkpoint-30"}, {"manifest", "{}"}};
    if (!sealed.empty()) d["sealed"] = sealed;
    return json::serialize(d);
}

// A peer broker that took run r1 from beta with checkpoint-30's seal.
struct Receiver : ServiceFixture {
    Receiver() : ServiceFixture({{"c1", kConf}}) {
        start([](FakeSlurm &s) { s.nodes[kConf] = {{"n1", "IDLE"}, {"n2", "IDLE"}}; });
        auto r = call("POST", "/v1/decisions", decision("beta:r1/attempt-2", "r1", 2, json::array{carried("checkpoint-30")}), "peer-t");
        REQUIRE_MESSAGE(r.status == 200, r.body);
    }
};

}  // namespace

TEST_CASE("a carried seal's receipt is served as its sender's claim, never as this broker's receipt") {
    Receiver f;
    auto r = f.call("GET", "/v1/runs/r1/checkpoints/checkpoint-30/files?rank=0");
    REQUIRE_MESSAGE(r.status == 200, r.body);
    const json::object v = json::parse(r.body).as_object();
    CHECK(v.at("carried").as_bool());
    CHECK(v.at("receipt").is_null());
    const json::object &claim = v.at("sender_receipt").as_object();
    CHECK(claim.at("broker").as_string() == "beta-broker");   // the peer token that sent it
    CHECK(claim.at("seq").as_int64() == 7);
    CHECK(claim.at("digest").as_string() == std::string(64, 'd'));
    CHECK_FALSE(claim.at("checked").as_bool());
}

TEST_CASE("committing a name sealed already: the same files answer its seal, other files are refused naming the checkpoint") {
    SUBCASE("a seal carried here: attempt 2 commits the checkpoint it resumed from") {
        Receiver f;
        for (int rank : {0, 1}) {
            auto r = f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-30/commit", commit_body(rank, 2, "checkpoint-30"));
            REQUIRE_MESSAGE(r.status == 200, r.body);
            const json::value v = json::parse(r.body);
            CHECK(v.at("sealed").as_bool());
            CHECK(v.at("already_sealed").as_bool());
            CHECK(v.at("carried").as_bool());
            CHECK(v.at("sealed_by").as_string() == "beta-broker");
        }
        // No seal of this broker's own: the carried one stands.
        CHECK_FALSE(contains(f.events("r1"), "SEALED"));
        CHECK(json::parse(f.call("GET", "/v1/runs/r1/checkpoints").body).at("checkpoints").as_array().empty());
        CHECK(json::parse(f.call("GET", "/v1/runs/r1/checkpoints/checkpoint-30/files").body).at("carried").as_bool());
        auto other = f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-30/commit", commit_body(1, 2, "checkpoint-30", "changed"));
        CHECK(other.status == 409);
        CHECK(contains(other.body, "sealed_otherwise"));
        CHECK(contains(other.body, "checkpoint checkpoint-30 is sealed already (attempt 1, by broker beta-broker) with other files of rank 1: rank-1.pt"));
    }
    SUBCASE("a seal of this broker's own") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        REQUIRE(f.beat("r2", 1, "n1", "batch", "c1", 7) == 204);
        for (int rank : {0, 1}) REQUIRE(f.call("POST", "/v1/runs/r2/checkpoints/checkpoint-10/commit", commit_body(rank, 1, "checkpoint-10")).status == 200);
        auto again = f.call("POST", "/v1/runs/r2/checkpoints/checkpoint-10/commit", commit_body(0, 1, "checkpoint-10"));
        REQUIRE(again.status == 200);
        CHECK(json::parse(again.body).at("already_sealed").as_bool());
        auto other = f.call("POST", "/v1/runs/r2/checkpoints/checkpoint-10/commit", commit_body(0, 1, "checkpoint-10", "x"));
        CHECK(other.status == 409);
        CHECK(contains(other.body, "checkpoint checkpoint-10 is sealed already (attempt 1, by broker alpha) with other files of rank 0"));
        const std::string ev = f.events("r2");
        CHECK(ev.find("SEALED") == ev.rfind("SEALED"));   // sealed once
    }
}

TEST_CASE("only the broker a run was moved to may hand it back") {
    ServiceFixture f({{"c1", kConf}}, {BrokerConfig::Peer{"beta-broker", "https://beta.test", "", "to-beta", ""}});
    f.cfg.tokens.push_back(TokenEntry{"gamma", sha256_hex("gamma-t"), Scope::peer, ""});
    f.start();
    f.peers->on(kBeta, [](const HttpRequest &) {
        return answer(200, json::object{{"accepted", true}, {"broker", "beta-broker"}, {"cluster", "b1"}, {"job", 55}, {"nodes", json::array{"b1n1"}}});
    });
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        FakeSlurm::Job j;
        j.id = 7, j.nodes = "n1,n2", j.batch_host = "n1", j.node_count = 2, j.tasks = 2;
        f.slurm->jobs[kConf][7] = j;
        f.slurm->nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}};
    }
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n2"] = "DOWN*";
        f.slurm->dead_slurmd.insert("n2");
    }
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "MOVED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}, {"n2", "DOWN*"}, {"n3", "IDLE"}};
    }
    auto r = f.call("POST", "/v1/decisions", decision("gamma:r1/attempt-3", "r1", 3), "gamma-t");
    CHECK(r.status == 409);
    CHECK(contains(r.body, "not_moved_to_sender"));
    CHECK(contains(r.body, "run r1 was moved to broker beta-broker, not to broker gamma: only the broker a run was moved to may hand it back"));
    CHECK(f.state("r1") == "MOVED");
    r = f.call("POST", "/v1/decisions", decision("beta:r1/attempt-3", "r1", 3), "peer-t");
    CHECK_FALSE(contains(r.body, "not_moved_to_sender"));
    CHECK_FALSE(contains(r.body, "was moved to broker"));
}

TEST_CASE("carried seals are pruned: a run's newest two stay; a run finished past the retention keeps none") {
    char tmpl[] = "/tmp/shardnet-carried-XXXXXX";
    REQUIRE(mkdtemp(tmpl));
    const std::string dir = tmpl;
    {
        Store st(dir + "/b.db");
        const double now = 1.0e9, old = now - 31 * 86400.0;
        st.transaction([&] {
            st.insert_run(RunRow{"done", "u", "SUCCEEDED", "{}", 2, 1, old, old});
            st.insert_run(RunRow{"done-lately", "u", "FAILED", "{}", 2, 1, old, now - 86400.0});
            st.insert_run(RunRow{"live", "u", "RUNNING", "{}", 2, 1, old, old});
            st.insert_run(RunRow{"moved-on", "u", "MOVED", "{}", 2, 1, old, old});
            for (const std::string run : {"done", "done-lately", "live", "moved-on", "no-row"})
                for (int i = 1; i <= 3; ++i)
                    st.seals().put_carried_seal(Store::CarriedSealRow{run, "checkpoint-" + std::to_string(i), 1, 1, "", "beta",
                                                              Store::SealedListRow{std::string(64, 'a'), 1, 1, 0, ""}, "[]", old + i});
            st.seals().keep_newest_carried("live", 2);
        });
        auto names = [&](const std::string &run) {
            std::vector<std::string> out;
            for (const auto &c : st.seals().carried_seals(run, 10)) out.push_back(c.name);
            return out;
        };
        CHECK(names("live") == std::vector<std::string>{"checkpoint-3", "checkpoint-2"});
        CHECK(names("done").size() == 3);
        long long gone = 0;
        st.transaction([&] { gone = st.seals().forget_carried_seals(now - 30 * 86400.0); });
        CHECK(gone == 9);
        CHECK(names("done").empty());
        CHECK(names("moved-on").empty());   // handed on to another broker a month ago (issue 43)
        CHECK(names("no-row").empty());     // no run here: received a month ago
        CHECK(names("done-lately").size() == 3);   // finished a day ago: kept
        CHECK(names("live").size() == 2);          // not finished: kept
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("a receiver keeps only a run's newest two carried seals") {
    Receiver f;
    // Three seals (one more than a sender carries): the newest two are kept.
    json::array three{carried("checkpoint-40"), carried("checkpoint-50"), carried("checkpoint-60")};
    auto r = f.call("POST", "/v1/decisions", decision("beta:r5/attempt-2", "r5", 2, three), "peer-t");
    REQUIRE_MESSAGE(r.status == 200, r.body);
    CHECK(f.call("GET", "/v1/runs/r5/checkpoints/checkpoint-60/files").status == 200);
    CHECK(f.call("GET", "/v1/runs/r5/checkpoints/checkpoint-50/files").status == 200);
    auto gone = f.call("GET", "/v1/runs/r5/checkpoints/checkpoint-40/files");
    CHECK(gone.status == 404);
}
