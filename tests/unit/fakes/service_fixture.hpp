// A broker Service on a temporary database, with fake Slurm clusters and
// fake peer brokers (fake_slurm.hpp, fake_peers.hpp), for unit tests of
// recovery and federation. Requests go through Service::handle as the
// HTTP server would send them.
#pragma once
#include <boost/json.hpp>
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>

#include "broker/service.hpp"
#include "broker/trust/auth.hpp"
#include "tests/unit/fakes/fake_peers.hpp"
#include "tests/unit/fakes/fake_slurm.hpp"

namespace shardnet::broker::testing {

// SQL on the fixture's database from outside the broker (a trigger that
// stands for a failing disk or a stop at a chosen write).
inline void exec_sql(const std::string &db, const std::string &sql) {
    sqlite3 *h = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
    sqlite3_busy_timeout(h, 5000);
    char *err = nullptr;
    const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
    INFO(sql << ": " << (err ? err : ""));
    sqlite3_free(err);
    sqlite3_close(h);
    REQUIRE(rc == SQLITE_OK);
}

struct ServiceFixture {
    std::string dir;
    BrokerConfig cfg;
    FakeSlurm *slurm = nullptr;            // owned by the service
    std::shared_ptr<FakePeers> peers = std::make_shared<FakePeers>();
    std::unique_ptr<Service> svc;

    // clusters: name -> the SLURM_CONF the fake answers for.
    explicit ServiceFixture(std::map<std::string, std::string> clusters, std::vector<BrokerConfig::Peer> peer_list = {}) {
        char tmpl[] = "/tmp/shardnet-fake-test-XXXXXX";
        dir = mkdtemp(tmpl);
        cfg.plain_http = true;
        cfg.database = dir + "/b.db";
        cfg.cluster = clusters.empty() ? "" : clusters.begin()->first;
        cfg.broker_name = "alpha";
        cfg.clusters = std::move(clusters);
        cfg.peers = std::move(peer_list);
        cfg.tokens = {TokenEntry{"ops", sha256_hex("admin-t"), Scope::admin, ""},
                      TokenEntry{"beta-broker", sha256_hex("peer-t"), Scope::peer, ""}};
        cfg.min_uid = 1;   // the host's own accounts (daemon, bin) stand in for users
        cfg.slurm_cache_ms = 0;
    }
    // setup: the fake cluster's state before the service sees it (a restart
    // acts on what Slurm says at once).
    void start(const std::function<void(FakeSlurm &)> &setup = {}) {
        auto s = std::make_unique<FakeSlurm>();
        slurm = s.get();
        if (setup) setup(*s);
        svc = std::make_unique<Service>(cfg, std::make_unique<Store>(cfg.database), ServicePorts{std::move(s), peers});
    }
    ~ServiceFixture() {
        svc.reset();
        if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) {}
    }
    ApiResponse call(const std::string &method, const std::string &target, const std::string &body = "",
                     const std::string &token = "admin-t") {
        std::promise<ApiResponse> p;
        svc->handle(ApiRequest{method, target, token, body, nullptr}, [&p](ApiResponse r) { p.set_value(std::move(r)); });
        return p.get_future().get();
    }
    boost::json::object run(const std::string &id) {
        auto r = call("GET", "/v1/runs/" + id);
        return r.status == 200 ? boost::json::parse(r.body).as_object() : boost::json::object{};
    }
    std::string state(const std::string &id) {
        auto o = run(id);
        return o.contains("state") ? std::string(o.at("state").as_string()) : "";
    }
    // Every event of the run as "KIND: cause" lines.
    std::string events(const std::string &id) {
        auto r = call("GET", "/v1/runs/" + id + "/events");
        std::string out;
        if (r.status != 200) return out;
        const boost::json::value v = boost::json::parse(r.body);
        for (const auto &e : v.at("events").as_array())
            out += std::string(e.at("kind").as_string()) + ": " + std::string(e.at("cause").as_string()) + "\n";
        return out;
    }
    // A heartbeat with the admin token, which may name its cluster and job.
    unsigned beat(const std::string &run, long long attempt, const std::string &node, const std::string &step,
                  const std::string &cluster, long long job, const std::string &requeue = "federated") {
        const std::string body = R"({"run":")" + run + R"(","attempt":)" + std::to_string(attempt) + R"(,"node":")" + node +
                                 R"(","step":")" + step + R"(","cluster":")" + cluster + R"(","job":)" + std::to_string(job) +
                                 R"(,"requeue":")" + requeue + R"(","interval":1,"state":"running","ranks":[{"rank":0,"step":3}]})";
        return call("POST", "/v1/heartbeats", body).status;
    }
    // Waits (up to 10 s) until pred holds; false if it never did.
    template <class P> static bool until(P pred, double seconds = 10) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < end) {
            if (pred()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return pred();
    }
    // Everything the broker was asked so far is done: its Slurm, store and
    // query threads have nothing under way (Core::settle). Tests wait on
    // this, never on a sleep: a busy machine only makes it longer.
    static void settle() { REQUIRE(Core::settle(30)); }
    // Runs the detector as if `ahead` seconds had passed, once what was
    // asked before is done (a requeue registers its retry after the event
    // a test waits for), and waits for what the tick started (a suspect's
    // confirmation with Slurm, a FAULT, a requeue), so that the test's
    // next report comes after it.
    void tick_ahead(double ahead) {
        settle();
        svc->tick(wall_now() + ahead);
        settle();
    }
};

}  // namespace shardnet::broker::testing
