// A moved run's story across brokers (broker/federation/onward*.{hpp,cpp}):
// the peer's story read as untrusted input, kept a few seconds, joined into
// the old broker's GET /v1/runs/ID and dashboard view; and the story route
// a peer reads, for the runs that crossed with it only.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <unistd.h>

#include "broker/federation/onward.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet;
using namespace shardnet::broker;
using namespace shardnet::broker::testing;
namespace json = boost::json;

namespace {

HttpResponse answer(long status, const std::string &body) {
    HttpResponse r;
    r.status = status;
    r.body = body;
    return r;
}

json::object event(long long id, double time, const char *kind, const char *cause, json::object evidence = {}) {
    return json::object{{"id", id}, {"time", time}, {"kind", kind}, {"cause", cause}, {"evidence", std::move(evidence)}};
}

// A story as a healthy peer tells it: attempt 2 received, started, recovered.
json::object story(const char *state = "RUNNING") {
    return json::object{
        {"broker", "beta"},
        {"run", json::object{{"id", "r1"}, {"state", state}, {"attempt", 2}, {"cluster", "b1"}, {"job", 55},
                             {"attempts", json::array{json::object{{"attempt", 2}, {"cluster", "b1"}, {"job", 55}, {"world", 2}}}},
                             {"last_sealed", "ckpt-4"}, {"updated", 1000.5}}},
        {"events", json::array{event(1, 1000.0, "RECEIVED", "decision alpha:r1/attempt-2 from broker alpha"),
                               event(2, 1001.0, "ATTEMPT", "attempt 2 heartbeats", json::object{{"attempt", 2}}),
                               event(3, 1002.0, "RECOVERED", "every node of attempt 2 reports", json::object{{"attempt", 2}})}},
        {"omitted", 0}};
}

std::string story_error(const json::object &body) { return parse_peer_story(answer(200, json::serialize(body)), "r1").error; }

const std::string kConf = "/fake/c1.conf";
const std::string kDecisions = "https://beta.test/v1/decisions", kStory = "https://beta.test/v1/runs/r1/story";

}  // namespace

TEST_CASE("a peer's story is rebuilt from the fields this broker knows") {
    json::object body = story();
    body["run"].as_object()["secret"] = "x";
    body["events"].as_array()[0].as_object()["extra"] = 1;
    PeerStory s = parse_peer_story(answer(200, json::serialize(body)), "r1");
    REQUIRE(s.error.empty());
    CHECK(s.story.at("run").at("state").as_string() == "RUNNING");
    CHECK(s.story.at("run").at("job").as_int64() == 55);
    CHECK_FALSE(s.story.at("run").as_object().contains("secret"));
    REQUIRE(s.story.at("events").as_array().size() == 3);
    CHECK_FALSE(s.story.at("events").at(0).as_object().contains("extra"));
    CHECK(s.story.at("omitted").as_int64() == 0);
}

TEST_CASE("a peer's story of the wrong shape is an error naming the field") {
    auto with = [](auto change) { json::object b = story(); change(b); return story_error(b); };
    CHECK(parse_peer_story(answer(200, "not json"), "r1").error.rfind("bad answer: body: not JSON", 0) == 0);
    CHECK(parse_peer_story(answer(500, "{}"), "r1").error == "HTTP 500");
    CHECK(parse_peer_story(answer(200, json::serialize(story())), "r2").error == "bad answer: run.id: the story of another run (r1)");
    CHECK(with([](json::object &b) { b["run"].as_object()["state"] = "HACKED"; }) == "bad answer: run.state: not a run state");
    CHECK(with([](json::object &b) { b["run"].as_object()["attempt"] = -1; }) == "bad answer: run.attempt: expected 1..1000000");
    CHECK(with([](json::object &b) { b["events"].as_array()[1].as_object()["kind"] = "<img src=x>"; }) ==
          "bad answer: events[1].kind: expected a word of A-Z and _");
    // Out of time order (ids and times of one broker's events need not agree): kept as told.
    CHECK(with([](json::object &b) { b["events"].as_array()[2].as_object()["time"] = 10.0; }) == "");
    CHECK(with([](json::object &b) { b["events"].as_array()[0].as_object()["time"] = "soon"; }) == "bad answer: events[0].time: expected a number");
    CHECK(with([](json::object &b) { b["run"].as_object()["cluster"] = "b1\x1b[2J"; }) == "bad answer: run.cluster: has control characters");
    CHECK(with([](json::object &b) {
              json::array many;
              for (int i = 0; i < int(kStoryEventsMax) + 1; ++i) many.push_back(event(i + 1, 1000.0 + i, "SEALED", "c"));
              b["events"] = std::move(many);
          }) == "bad answer: events: more than " + std::to_string(kStoryEventsMax) + " entries");
    HttpResponse big;
    big.too_large = true;
    big.error = "the answer is larger than 1048576 bytes";
    CHECK(parse_peer_story(big, "r1").error == "body: the answer is larger than 1048576 bytes");
}

TEST_CASE("a peer's event evidence is kept as it said, unless it is large or not an object") {
    json::object b = story();
    b["events"].as_array()[0].as_object()["evidence"] = json::object{{"blob", std::string(kStoryEvidenceMax + 1, 'x')}};
    b["events"].as_array()[1].as_object()["evidence"] = "a string";
    b["events"].as_array()[2].as_object()["cause"] = std::string(5000, 'x') + "\u00e9";
    PeerStory s = parse_peer_story(answer(200, json::serialize(b)), "r1");
    REQUIRE(s.error.empty());
    CHECK(s.story.at("events").at(0).at("evidence").at("dropped").as_string().find("larger than") != std::string::npos);
    CHECK(s.story.at("events").at(2).at("cause").as_string() == std::string(4096, 'x') + "...");   // cut, the story kept
    CHECK(s.story.at("events").at(1).at("evidence").at("dropped").as_string() == "evidence that is not an object");
    CHECK(s.story.at("events").at(2).at("evidence").at("attempt").as_int64() == 2);
}

TEST_CASE("onward views: a read never waits; a fetch in the background, the last story kept (and said to be old) when the peer fails") {
    FakePeers peers;
    std::atomic<int> mode{0};
    peers.on(kStory, [&](const HttpRequest &) {
        if (mode == 0) return answer(200, json::serialize(story("RUNNING")));
        if (mode == 1) return answer(200, R"({"run":{"id":"r1","state":"NOPE","attempt":2},"events":[]})");
        return HttpResponse{};   // silent
    });
    OnwardViews views(peers, 2.0);
    const PeerAddress beta{"beta", "https://beta.test", "to-beta", ""};
    const MovedTo moved{"beta", 2, 55};
    // The first read: nothing yet, a fetch under way.
    json::object v = views.view("r1", moved, beta, 100.0, true);
    CHECK(v.at("status").as_string() == "asking");
    CHECK(v.at("broker").as_string() == "beta");
    CHECK(v.at("job").as_int64() == 55);
    REQUIRE(ServiceFixture::until([&] { return views.view("r1", moved, beta, 100.5, true).at("status").as_string() == "ok"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    v = views.view("r1", moved, beta, 101.0, true);
    CHECK(v.at("run").at("state").as_string() == "RUNNING");
    CHECK(v.at("as_of").as_double() == 100.0);
    CHECK(v.at("events").as_array().size() == 3);
    REQUIRE(peers.requests(kStory).size() == 1);   // no more asks within max_age
    CHECK(peers.requests(kStory)[0].bearer == "to-beta");
    CHECK(peers.requests(kStory)[0].method == "GET");
    // A bad answer later: the story read at 100 stays, said to be as of then.
    mode = 1;
    views.refresh("r1", beta, 103.0);
    v = views.view("r1", moved, beta, 103.1, true);
    CHECK(v.at("status").as_string() == "bad answer");
    CHECK(v.at("error").as_string() == "broker beta: bad answer: run.state: not a run state");
    CHECK(v.at("run").at("state").as_string() == "RUNNING");
    CHECK(v.at("as_of").as_double() == 100.0);
    // The peer rests after a failure: no ask for 10 s, whatever is read.
    const auto asked = peers.requests(kStory).size();
    for (int i = 0; i < 5; ++i) views.view("r1", moved, beta, 105.0 + i, true);
    usleep(50000);
    CHECK(peers.requests(kStory).size() == asked);
    // Silent: unreachable, the reason named; a run never read from it has no story.
    mode = 2;
    views.refresh("r2", beta, 120.0);
    v = views.view("r2", MovedTo{"beta", 3, 9}, beta, 120.1, true);
    CHECK(v.at("status").as_string() == "unreachable");
    CHECK(v.at("error").as_string().find("broker beta:") == 0);
    CHECK(v.at("as_of").is_null());
    CHECK_FALSE(v.contains("run"));
}

TEST_CASE("a run moved to a peer: this broker's run and its dashboard view say where it went and what became of it") {
    ServiceFixture f({{"c1", kConf}}, {BrokerConfig::Peer{"beta", "https://beta.test", "", "to-beta", ""}});
    f.start();
    f.peers->on(kDecisions, [](const HttpRequest &) {
        return answer(200, json::serialize(json::object{{"accepted", true}, {"broker", "beta"}, {"cluster", "b1"}, {"job", 55},
                                                        {"nodes", json::array{"b1n1", "b1n2"}}}));
    });
    f.peers->on(kStory, [](const HttpRequest &) { return answer(200, json::serialize(story())); });
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

    // The first read asks the peer in the background; a later one has its story.
    REQUIRE(ServiceFixture::until([&] {
        return json::parse(f.call("GET", "/v1/runs/r1").body).at("onward").at("status").as_string() == "ok";
    }));
    auto r = f.call("GET", "/v1/runs/r1");
    REQUIRE(r.status == 200);
    const json::object run = json::parse(r.body).as_object();
    INFO(r.body);
    REQUIRE(run.contains("onward"));
    const json::object &o = run.at("onward").as_object();
    CHECK(o.at("broker").as_string() == "beta");
    CHECK(o.at("attempt").as_int64() == 2);
    CHECK(o.at("job").as_int64() == 55);
    CHECK(o.at("status").as_string() == "ok");
    CHECK(o.at("run").at("state").as_string() == "RUNNING");
    CHECK(o.at("events").as_array().size() == 3);

    auto view = f.call("GET", "/v1/views/runs/r1");
    REQUIRE(view.status == 200);
    CHECK(json::parse(view.body).at("run").at("onward").at("run").at("cluster").as_string() == "b1");
    // Asked once for these reads (kept 2 s).
    CHECK(f.peers->requests(kStory).size() == 1);
    // The dashboard's view has every event; a plain read the newest five.
    // A run that never moved has no onward.
    REQUIRE(f.beat("r2", 1, "n1", "batch", "c1", 7) == 204);
    CHECK_FALSE(json::parse(f.call("GET", "/v1/runs/r2").body).as_object().contains("onward"));
}

TEST_CASE("the story route: for the peers a run crossed with, and admins; 404 alike for the rest") {
    ServiceFixture f({{"c1", kConf}});
    f.cfg.tokens.push_back(TokenEntry{"alice", sha256_hex("alice-t"), Scope::user, "", 0, "daemon"});
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}};
    }
    const std::string decision = json::serialize(json::object{
        {"id", "beta:r9/attempt-2"}, {"from_broker", "beta"}, {"run", "r9"}, {"from_attempt", 1}, {"to_attempt", 2},
        {"spec", json::object{{"user", "daemon"}, {"uid", 0}, {"gid", 0}, {"nodes", 1}, {"tasks", 1}, {"workdir", "/tmp"}}},
        {"script", "#!/bin/sh\nsrun train.py\n"}, {"owner", "daemon"}, {"resume", "ckpt-9"}, {"manifest", "{}"}});
    REQUIRE(f.call("POST", "/v1/decisions", decision, "peer-t").status == 200);
    REQUIRE(f.beat("r5", 1, "n1", "batch", "c1", 7) == 204);   // a run of this broker's own

    auto r = f.call("GET", "/v1/runs/r9/story", "", "peer-t");
    INFO(r.body);
    REQUIRE(r.status == 200);
    const json::object s = json::parse(r.body).as_object();
    CHECK(s.at("broker").as_string() == "alpha");
    CHECK(s.at("run").at("state").as_string() == "RECOVERING");
    CHECK(s.at("run").at("attempt").as_int64() == 2);
    CHECK(s.at("omitted").as_int64() == 0);
    bool received = false;
    for (const auto &e : s.at("events").as_array()) received |= e.at("kind").as_string() == "RECEIVED";
    CHECK(received);
    // What this broker answers, its peers read back whole.
    CHECK(parse_peer_story(answer(200, r.body), "r9").error == "");

    // A run that never crossed with this peer, and a missing one: the same 404.
    auto own = f.call("GET", "/v1/runs/r5/story", "", "peer-t"), missing = f.call("GET", "/v1/runs/nope/story", "", "peer-t");
    CHECK(own.status == 404);
    CHECK(missing.status == 404);
    CHECK(json::parse(own.body).at("error").at("message").as_string() == "no run r5");
    // An admin reads any; the run's owner has GET /v1/runs/r9, not this.
    CHECK(f.call("GET", "/v1/runs/r5/story").status == 200);
    CHECK(f.call("GET", "/v1/runs/r9/story", "", "alice-t").status == 403);
}
