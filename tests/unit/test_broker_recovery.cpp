// Recovery logic against a fake Slurm (tests/unit/fakes): a confirmed
// FAULT becomes one requeue decision, the new attempt is submitted where
// placement says, as the job's owner, and the run recovers when the new
// attempt heartbeats. Store failures on the way are retried with an event,
// never read as "decided already". Real Slurm: tests/integration.
#include <algorithm>
#include <chrono>
#include <thread>
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/recovery/job_environment.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet::broker;
using namespace shardnet::broker::testing;

namespace {

const std::string kConf = "/fake/c1.conf";

// Job 7 of the test user on nodes (batch host the first), one task per
// node, and the cluster's node states.
void put_job(ServiceFixture &f, const std::string &nodes, std::map<std::string, std::string> states) {
    std::lock_guard<std::mutex> lock(f.slurm->mu);
    FakeSlurm::Job j;
    j.id = 7;
    j.nodes = nodes;
    j.batch_host = nodes.substr(0, nodes.find(','));
    j.node_count = j.tasks = 1 + (long long)std::count(nodes.begin(), nodes.end(), ',');
    f.slurm->jobs[kConf][7] = j;
    f.slurm->nodes[kConf] = std::move(states);
}

// Job 7 on n1,n2 of cluster c1 (n3, n4 idle), its workers reporting.
void running_job(ServiceFixture &f) {
    put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "IDLE"}, {"n4", "IDLE"}});
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
    // The job's spec and script are kept when the attempt starts (then its
    // allocation's hosts are asked for).
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
}

void kill_node(ServiceFixture &f, const std::string &node) {
    std::lock_guard<std::mutex> lock(f.slurm->mu);
    f.slurm->nodes[kConf][node] = "DOWN*";
    f.slurm->dead_slurmd.insert(node);
}

// The sbatch calls the fake Slurm saw, in order.
std::vector<FakeSlurm::Seen> sbatches(ServiceFixture &f) {
    std::vector<FakeSlurm::Seen> out;
    for (const auto &c : f.slurm->changes())
        if (c.argv[0] == "sbatch") out.push_back(c);
    return out;
}

// Whether the broker's bad-node memory holds node now (GET /v1/bad-nodes).
bool node_held(ServiceFixture &f, const std::string &node) {
    f.svc->drain();
    const auto list = boost::json::parse(f.call("GET", "/v1/bad-nodes").body).as_object();
    for (const auto &n : list.at("nodes").as_array())
        if (n.at("node").as_string() == node && n.at("held").as_bool()) return true;
    return false;
}

bool has(const std::vector<std::string> &argv, const std::string &a) { return std::find(argv.begin(), argv.end(), a) != argv.end(); }

}  // namespace

TEST_CASE("a dead node: the same cluster without it, as the job's owner, then RECOVERED") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too

    std::vector<FakeSlurm::Seen> sbatch, scancel;
    for (const auto &c : f.slurm->changes()) (c.argv[0] == "sbatch" ? sbatch : scancel).push_back(c);
    REQUIRE(sbatch.size() == 1);
    const auto &s = sbatch[0];
    CHECK(s.conf == kConf);
    CHECK(s.as.uid == 5000);   // Slurm's uid for job 7, never root
    CHECK(s.as.gid == 5000);
    CHECK(s.as.input == "#!/bin/sh\nsrun train.py\n");   // the script on stdin
    CHECK(has(s.argv, "--nodelist=n3,n4"));
    CHECK(has(s.argv, "--shardnet=r1"));
    CHECK(has(s.argv, "--shardnet-resume=latest"));
    CHECK(has(s.argv, "--export=ALL,SHARDNET_ATTEMPT=2"));
    CHECK(has(s.argv, "--ntasks=2"));
    // Attempt 2 keeps attempt 1's interval and the run's policy.
    CHECK(has(s.argv, "--shardnet-heartbeat=1"));
    CHECK(has(s.argv, "--shardnet-requeue=federated"));
    REQUIRE(scancel.size() == 1);
    CHECK(scancel[0].argv == std::vector<std::string>{"scancel", "7"});

    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("FAULT: worker n2/0 missed heartbeats; node n2 slurmd unreachable") != std::string::npos);
    CHECK(ev.find("PLACEMENT: c1 n3,n4 without n2: job 100, attempt 2") != std::string::npos);
    CHECK(ev.find("RECOVERING: attempt 2 submitted with --shardnet-resume=latest") != std::string::npos);

    // Only attempt 2's heartbeats recover the run, from all of its nodes.
    REQUIRE(f.beat("r1", 2, "n3", "batch", "c1", 100) == 204);
    REQUIRE(f.beat("r1", 2, "n3", "0", "c1", 100) == 204);
    CHECK(f.state("r1") == "RECOVERING");
    REQUIRE(f.beat("r1", 2, "n4", "0", "c1", 100) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.events("r1").find("RECOVERED: attempt 2 heartbeats from all 2 node(s)") != std::string::npos);
    // The old attempt is fenced.
    CHECK(f.beat("r1", 1, "n1", "0", "c1", 7) == 409);
}

TEST_CASE("a broker restarted while a run is RECOVERING still ends the wait with RECOVERED") {
    // kill -9 between the new attempt's submission and its heartbeats
    // (tests/integration/t0370-broker-kill9.sh found it): the wait was in
    // memory only, so the run stayed RECOVERING for good.
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    f.svc.reset();   // the broker stops; its database stays
    f.start();
    CHECK(f.state("r1") == "RECOVERING");
    REQUIRE(f.beat("r1", 2, "n3", "batch", "c1", 100) == 204);
    REQUIRE(f.beat("r1", 2, "n3", "0", "c1", 100) == 204);
    ServiceFixture::settle();
    CHECK(f.state("r1") == "RECOVERING");   // still every node of attempt 2, not one
    REQUIRE(f.beat("r1", 2, "n4", "0", "c1", 100) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("RECOVERED: attempt 2 heartbeats from all 2 node(s)") != std::string::npos);
    // Once: a later restart and heartbeat write no second RECOVERED.
    f.svc.reset();
    f.start();
    REQUIRE(f.beat("r1", 2, "n4", "0", "c1", 100) == 204);
    ServiceFixture::settle();
    const std::string after = f.events("r1");
    CHECK(after.find("RECOVERED") == after.rfind("RECOVERED"));
}

TEST_CASE("a restarted broker keeps a run's requeue policy: off stays off") {
    // The policy was in memory only: after a restart every run read as
    // federated, and a FAULT requeued a run its user had asked not to.
    ServiceFixture f({{"c1", kConf}});
    f.start();
    put_job(f, "n1", {{"n1", "ALLOCATED"}, {"n3", "IDLE"}});
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7, "off") == 204);
    f.svc.reset();
    f.start();   // a fresh fake Slurm: the same job, n1 now dead
    put_job(f, "n1", {{"n1", "ALLOCATED"}, {"n3", "IDLE"}});
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7, "off") == 204);
    kill_node(f, "n1");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
    ServiceFixture::settle();
    CHECK(f.state("r1") == "DEGRADED");
    for (const auto &c : f.slurm->changes()) CHECK(c.argv[0] != "sbatch");
    CHECK(f.events("r1").find("PLACEMENT") == std::string::npos);
}

TEST_CASE("a worker that dies while its broker is down is still a FAULT after the restart") {
    // Workers were in memory only: a 1-node job whose node died while the
    // broker was restarting was never heard of again (no heartbeat, no
    // deadline), and its run stayed RUNNING (t0370-broker-kill9 found it).
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    f.svc->summarise();
    f.svc->drain();
    f.svc.reset();
    f.start();   // a fresh fake Slurm: job 7 runs, n2 is dead, nobody reports
    put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "IDLE"}, {"n4", "IDLE"}});
    kill_node(f, "n2");
    f.tick_ahead(1);   // within the deadline counted from the restart: nothing yet
    ServiceFixture::settle();
    CHECK(f.events("r1").find("FAULT") == std::string::npos);
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("FAULT: worker n2/0 missed heartbeats") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
}

TEST_CASE("restored workers that report on: no FAULT after a restart; ended ones are not restored") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    REQUIRE(f.call("POST", "/v1/heartbeats", R"({"run":"r1","attempt":1,"node":"n2","step":"0","cluster":"c1","job":7,"interval":1,"state":"ended","ranks":[{"rank":1,"step":3}]})").status == 204);
    f.svc->summarise();
    f.svc->drain();
    f.svc.reset();
    f.start();
    put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}});
    for (int i = 1; i <= 3; ++i) {   // n1 reports on; n2's step ended before the restart
        REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
        REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
        f.svc->tick(wall_now() + 2.5 * i);
        ServiceFixture::settle();
    }
    f.svc->tick(wall_now() + 2.5);
    ServiceFixture::settle();
    CHECK(f.state("r1") == "RUNNING");
    CHECK(f.events("r1").find("FAULT") == std::string::npos);
    const std::string run = f.call("GET", "/v1/runs/r1").body;
    INFO(run);
    CHECK(run.find("\"n2/0\"") == std::string::npos);
}

TEST_CASE("a silent worker on a healthy node is suspected, not a FAULT, until a second deadline") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    f.tick_ahead(10);   // every worker silent, but Slurm and every slurmd say fine
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "-o") >= 2; }));
    ServiceFixture::settle();
    CHECK(f.state("r1") == "RUNNING");
    CHECK(f.slurm->changes().empty());
    CHECK(f.events("r1").find("FAULT") == std::string::npos);
}

TEST_CASE("requeue=off: a FAULT and no new job") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    put_job(f, "n1", {{"n1", "ALLOCATED"}, {"n3", "IDLE"}});
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7, "off") == 204);
    kill_node(f, "n1");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
    ServiceFixture::settle();
    CHECK(f.slurm->count("sbatch") == 0);
}

TEST_CASE("no room anywhere and no peers: PLACEMENT says why, the run stays DEGRADED, tried again until a node is back") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    {
        // n3 drained, n4 down: with n2 dead, only the job's own n1 is left.
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n3"] = "DRAINING";
        f.slurm->nodes[kConf]["n4"] = "DOWN";
    }
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("PLACEMENT: no placement for attempt 2") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    INFO(f.events("r1"));
    CHECK(f.events("r1").find("c1 rejected: 0 of 0 idle node(s) fit, 2 needed; 1 counting those in use") != std::string::npos);
    CHECK(f.events("r1").find("(no peer brokers); tried again every 30 s for an hour") != std::string::npos);
    CHECK(f.state("r1") == "DEGRADED");
    CHECK(f.slurm->count("sbatch") == 0);
    CHECK(f.slurm->count("scancel") == 0);   // the old job is only ended once its successor has a place
    // Tried again, silently, while nothing changes.
    f.tick_ahead(31);
    ServiceFixture::settle();
    CHECK(f.slurm->count("sbatch") == 0);
    const std::string seen = f.events("r1");
    size_t placements = 0;
    for (size_t at = seen.find("PLACEMENT:"); at != std::string::npos; at = seen.find("PLACEMENT:", at + 1)) ++placements;
    CHECK(placements == 1);
    // n4 is back: the next try places the attempt there.
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n4"] = "IDLE";
    }
    f.tick_ahead(62);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.events("r1").find("PLACEMENT: c1, queued for 2 node(s)") != std::string::npos);
    CHECK(f.slurm->count("sbatch") == 1);
}

TEST_CASE("no idle room, but nodes in use that fit: the new attempt waits in the home cluster's queue, never on the dead node") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    {
        // Another user's job holds n3 and n4: the cluster is full.
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n3"] = "ALLOCATED";
        f.slurm->nodes[kConf]["n4"] = "MIXED";
    }
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    INFO(f.events("r1"));
    const std::vector<FakeSlurm::Seen> sbatch = sbatches(f);
    REQUIRE(sbatch.size() == 1);
    CHECK(has(sbatch[0].argv, "-N"));
    CHECK(std::find(sbatch[0].argv.begin(), sbatch[0].argv.end(), "-N")[1] == "2");
    CHECK(has(sbatch[0].argv, "--exclude=n2"));
    CHECK(std::none_of(sbatch[0].argv.begin(), sbatch[0].argv.end(), [](const std::string &a) { return a.rfind("--nodelist", 0) == 0; }));
    CHECK(f.events("r1").find("PLACEMENT: c1, queued for 2 node(s): no idle room, the nodes that fit are in use (never n2): job 100, attempt 2") !=
          std::string::npos);
    CHECK(f.slurm->count("scancel") == 1);   // the old job ends: its n1 is one the new job may get
    // It recovers when all of its nodes heartbeat, wherever Slurm put it.
    REQUIRE(f.beat("r1", 2, "n3", "batch", "c1", 100) == 204);
    REQUIRE(f.beat("r1", 2, "n3", "0", "c1", 100) == 204);
    CHECK(f.state("r1") == "RECOVERING");
    REQUIRE(f.beat("r1", 2, "n1", "0", "c1", 100) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
}

TEST_CASE("sbatch refused: PLACEMENT names Slurm's reason, the run stays DEGRADED") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->sbatch_error = "sbatch: error: Batch job submission failed: Invalid account";
    }
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("Invalid account") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.events("r1").find("PLACEMENT: attempt 2 on c1: sbatch on c1 (as uid 5000) failed") != std::string::npos);
    CHECK(f.state("r1") == "DEGRADED");
}

TEST_CASE("a store failure while the requeue decision is written: an event and a retry, not silence") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    // The store refuses new decisions (as a full disk or an I/O error would).
    exec_sql(f.cfg.database, "CREATE TRIGGER no_decisions BEFORE INSERT ON decisions BEGIN SELECT RAISE(ABORT, 'injected I/O error'); END;");
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("not written") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("FAULT: worker n2/0") != std::string::npos);
    CHECK(ev.find("PLACEMENT: requeue decision for attempt 2 not written (writing decision alpha:r1/attempt-2: injected I/O error") !=
          std::string::npos);
    CHECK(f.state("r1") == "DEGRADED");
    CHECK(f.slurm->count("sbatch") == 0);
    // Once the store takes writes again, the retry places the attempt.
    exec_sql(f.cfg.database, "DROP TRIGGER no_decisions;");
    REQUIRE(ServiceFixture::until([&] {
        f.tick_ahead(0);
        return f.state("r1") == "RECOVERING";
    }));
    CHECK(f.slurm->count("sbatch") == 1);
    // One event for the failure, however many retries it took.
    const std::string after = f.events("r1");
    CHECK(after.find("not written") == after.rfind("not written"));
}

TEST_CASE("a store failure while the FAULT is written: retried until written, then the requeue") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    exec_sql(f.cfg.database, "CREATE TRIGGER no_faults BEFORE INSERT ON events WHEN NEW.kind = 'FAULT' BEGIN SELECT RAISE(ABORT, 'injected'); END;");
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "-o") >= 1; }));
    ServiceFixture::settle();
    CHECK(f.state("r1") == "RUNNING");   // memory follows the database: nothing was written
    exec_sql(f.cfg.database, "DROP TRIGGER no_faults;");
    REQUIRE(ServiceFixture::until([&] {
        f.tick_ahead(0);
        return f.state("r1") == "RECOVERING";
    }, 15));
    const std::string ev = f.events("r1");
    CHECK(ev.find("FAULT: worker n2/0") == ev.rfind("FAULT: worker n2/0"));
    CHECK(f.slurm->count("sbatch") == 1);
}

TEST_CASE("a broker stopped between sbatch and 'applied': the decision is taken up again, its job found by nonce, none submitted twice") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    // The stop, as the store sees it: the job is submitted, 'applied' never written.
    exec_sql(f.cfg.database, "CREATE TRIGGER stop_here BEFORE UPDATE ON decisions WHEN NEW.state = 'applied' "
                             "BEGIN SELECT RAISE(ABORT, 'the broker stopped'); END;");
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("sbatch") == 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    std::string comment;
    for (const auto &c : f.slurm->changes())
        for (const auto &a : c.argv)
            if (a.rfind("--comment=", 0) == 0) comment = a.substr(10);
    INFO(comment);
    REQUIRE(comment.rfind("shardnet-decision:alpha:r1/attempt-2:", 0) == 0);   // the decision's id and its nonce
    ServiceFixture::settle();
    CHECK(f.state("r1") == "DEGRADED");
    f.svc->summarise();
    f.svc->drain();
    f.svc.reset();
    exec_sql(f.cfg.database, "DROP TRIGGER stop_here;");

    // Slurm as it is now: job 100 (attempt 2) runs, n2 is dead; and a job
    // with the decision's id but not its nonce (a user can set any comment).
    f.start([&](FakeSlurm &fs) {
        FakeSlurm::Job old, fresh, fake;
        old.id = 7, old.nodes = "n1,n2", old.batch_host = "n1", old.node_count = 2, old.tasks = 2, old.state = "CANCELLED";
        fresh.id = 100, fresh.nodes = "n3,n4", fresh.batch_host = "n3", fresh.node_count = 2, fresh.tasks = 2, fresh.comment = comment;
        fake.id = 150, fake.nodes = "n1", fake.comment = "shardnet-decision:alpha:r1/attempt-2:000000000000";
        fs.jobs[kConf] = {{7, old}, {100, fresh}, {150, fake}};
        fs.nodes[kConf] = {{"n1", "IDLE"}, {"n2", "DOWN*"}, {"n3", "ALLOCATED"}, {"n4", "ALLOCATED"}};
        fs.dead_slurmd.insert("n2");
        fs.next_job = 200;
    });
    // Taken up at start: no new FAULT needed.
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.slurm->count("sbatch") == 0);   // nothing submitted twice
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("RECOVERING: attempt 2 runs as job 100 on c1, submitted before the broker stopped") != std::string::npos);
    // Attempt 2's heartbeats recover it.
    REQUIRE(f.beat("r1", 2, "n3", "0", "c1", 100) == 204);
    REQUIRE(f.beat("r1", 2, "n4", "0", "c1", 100) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
}

TEST_CASE("a decision taken up again while Slurm cannot be read: not submitted again until Slurm says whether its job runs") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    exec_sql(f.cfg.database, "CREATE TRIGGER stop_here BEFORE UPDATE ON decisions WHEN NEW.state = 'applied' "
                             "BEGIN SELECT RAISE(ABORT, 'the broker stopped'); END;");
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("sbatch") == 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    std::string comment;
    for (const auto &c : f.slurm->changes())
        for (const auto &a : c.argv)
            if (a.rfind("--comment=", 0) == 0) comment = a.substr(10);
    ServiceFixture::settle();
    f.svc->summarise();
    f.svc->drain();
    f.svc.reset();
    exec_sql(f.cfg.database, "DROP TRIGGER stop_here;");

    // The job runs, but squeue answers in a shape this broker cannot read.
    f.start([&](FakeSlurm &fs) {
        FakeSlurm::Job old, fresh;
        old.id = 7, old.nodes = "n1,n2", old.batch_host = "n1", old.node_count = 2, old.tasks = 2, old.state = "CANCELLED";
        fresh.id = 100, fresh.nodes = "n3,n4", fresh.batch_host = "n3", fresh.node_count = 2, fresh.tasks = 2, fresh.comment = comment;
        fs.jobs[kConf] = {{7, old}, {100, fresh}};
        fs.nodes[kConf] = {{"n1", "IDLE"}, {"n2", "DOWN*"}, {"n3", "ALLOCATED"}, {"n4", "ALLOCATED"}};
        fs.dead_slurmd.insert("n2");
        fs.next_job = 200;
        fs.squeue_parser = "openapi/v9.99";
    });
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("waits: whether its job was submitted") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    f.tick_ahead(10);   // asked again: still unreadable
    ServiceFixture::settle();
    CHECK(f.slurm->count("sbatch") == 0);   // never submitted twice on a guess
    CHECK(f.state("r1") != "RECOVERING");
    std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("waits: whether its job") == ev.rfind("waits: whether its job"));   // told once
    CHECK(ev.find("cluster c1: ") != std::string::npos);                               // names the cluster and why
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->squeue_parser = "openapi/v0.0.38";
    }
    REQUIRE(ServiceFixture::until([&] {
        f.tick_ahead(10);
        return f.state("r1") == "RECOVERING";
    }));
    CHECK(f.slurm->count("sbatch") == 0);
    ev = f.events("r1");
    CHECK(ev.find("RECOVERING: attempt 2 runs as job 100 on c1, submitted before the broker stopped") != std::string::npos);
}

TEST_CASE("a batch script whose end was not reported: the run ends as Slurm says its job did") {
    // The soak found it: jobs that ended while their broker restarted left
    // their runs RUNNING for good (the agent's last heartbeat was lost).
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->jobs[kConf][7].state = "COMPLETED";
    }
    f.tick_ahead(10);   // every worker silent past its deadline; Slurm: the job completed
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "SUCCEEDED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("SUCCEEDED: Slurm job 7 COMPLETED on c1 (the batch script's end was not reported") != std::string::npos);
    CHECK(ev.find("FAULT") == std::string::npos);
    CHECK(f.slurm->count("sbatch") == 0);
    // A job Slurm says was cancelled: CANCELLED.
    ServiceFixture g({{"c1", kConf}});
    g.start();
    running_job(g);
    {
        std::lock_guard<std::mutex> lock(g.slurm->mu);
        g.slurm->jobs[kConf][7].state = "CANCELLED";
    }
    g.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return g.state("r1") == "CANCELLED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
}

TEST_CASE("a job Slurm requeued itself whose batch end was not reported: REQUEUED, the run goes on") {
    // Slurm 24.11 ends a requeued job's step processes, its agent's with
    // them, before the agent reports the batch script's end.
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->jobs[kConf][7].state = "PENDING";
    }
    f.tick_ahead(10);   // every worker silent past its deadline; Slurm: the job waits to start again
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("REQUEUED") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("REQUEUED: Slurm requeued job 7 itself (PENDING; the batch script's end was not reported)") != std::string::npos);
    CHECK(ev.find("FAULT") == std::string::npos);
    CHECK(f.state("r1") == "RUNNING");
    CHECK(f.slurm->count("sbatch") == 0);
    // Slurm starts the job again: the same attempt's workers report and are healthy.
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->jobs[kConf][7].state = "RUNNING";
    }
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
    int healthy = 0;
    const auto run = f.run("r1");
    for (const auto &w : run.at("workers").as_array())
        healthy += w.as_object().at("health") == "healthy";
    CHECK(healthy == 3);
}

namespace {

// A worker's last heartbeat: its ranks' ends as the agent reports them
// (extra: more fields, ',"stderr_tail":"..."'; state: "running" for an urgent report).
unsigned ended(ServiceFixture &f, const std::string &node, const std::string &step, const std::string &ranks, const std::string &extra = "",
               const std::string &state = "ended") {
    // Slurm's record follows the batch script's end, as slurmctld's does
    // (a test that wants another end sets job 7's state first).
    if (step == "batch" && state == "ended") {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        auto &j = f.slurm->jobs[kConf][7];
        if (j.state == "RUNNING") j.state = "FAILED";
    }
    const std::string body = R"({"run":"r1","attempt":1,"node":")" + node + R"(","step":")" + step +
                             R"(","cluster":"c1","job":7,"interval":1,"state":")" + state + R"(","ranks":)" + ranks + extra + "}";
    return f.call("POST", "/v1/heartbeats", body).status;
}

// Job 7 on n1,n2 whose batch step reports these fields (',"max_attempts":1'),
// its spec kept; then n2 dies and the detector finds it.
void n2_dies_under(ServiceFixture &f, const std::string &fields) {
    put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "IDLE"}, {"n4", "IDLE"}});
    const std::string batch = R"({"run":"r1","attempt":1,"node":"n1","step":"batch","cluster":"c1","job":7,"interval":1)" + fields +
                              R"(,"state":"running","ranks":[{"rank":0,"step":3}]})";
    REQUIRE(f.call("POST", "/v1/heartbeats", batch).status == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    kill_node(f, "n2");
    f.tick_ahead(10);
}

// The run's last event of a kind, whole.
boost::json::object last_event(ServiceFixture &f, const std::string &kind) {
    boost::json::object found;
    const boost::json::value all = boost::json::parse(f.call("GET", "/v1/runs/r1/events").body);
    for (const auto &e : all.at("events").as_array())
        if (e.at("kind").as_string() == kind) found = e.as_object();
    return found;
}

}  // namespace

TEST_CASE("a batch script that exits 1 because a peer's node died: a FAULT, recovered, not FAILED") {
    // A 2-node DDP job: n2 dies, the survivor's collective fails at once and
    // its exit ends the batch script long before any deadline.
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    kill_node(f, "n2");
    REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":1,"signal":null}}])") == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("FAULT: worker n2/0 lost: node n2 died (its slurmd does not answer); the batch script exited 1 on n1 after it") != std::string::npos);
    CHECK(ev.find("FAILED") == std::string::npos);
    CHECK(f.slurm->count("sbatch") == 1);
}

TEST_CASE("a program's own error with every node alive: FAILED, naming the first rank to fail") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    // Rank 1 raised (exit 3); rank 0's collective failed after it (exit 1).
    REQUIRE(ended(f, "n1", "0", R"([{"rank":0,"exit":{"code":1,"signal":null,"time":1000.9}}])") == 204);
    REQUIRE(ended(f, "n2", "0", R"([{"rank":1,"exit":{"code":3,"signal":null,"time":1000.2}}])") == 204);
    REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":1,"signal":null}}])") == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("FAILED: rank 1 on n2 exited 3 (the first rank to fail; every node alive); the batch script exited 1 on n1") !=
          std::string::npos);
    auto all = boost::json::parse(f.call("GET", "/v1/runs/r1/events").body).at("events").as_array();
    const auto &last = all.back().as_object();
    CHECK(last.at("evidence").at("first_failure").at("exit_code").to_number<int>() == 3);
    CHECK(last.at("evidence").at("first_failure").at("node").as_string() == "n2");
    CHECK(f.slurm->count("sbatch") == 0);
    // A signal is named as one.
    ServiceFixture g({{"c1", kConf}});
    g.start();
    running_job(g);
    REQUIRE(ended(g, "n1", "0", R"([{"rank":0,"exit":{"code":null,"signal":11,"time":1000.1}}])") == 204);
    REQUIRE(ended(g, "n2", "0", R"([{"rank":1,"exit":{"code":0,"signal":null,"time":1000.0}}])") == 204);
    REQUIRE(ended(g, "n1", "batch", R"([{"rank":0,"exit":{"code":139,"signal":null}}])") == 204);
    REQUIRE(ServiceFixture::until([&] { return g.state("r1") == "FAILED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(g.events("r1").find("rank 0 on n1 killed by signal 11") != std::string::npos);
}

TEST_CASE("a survivor's failed rank is looked into at once: its peer's dead node is a FAULT before the batch script ends") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    kill_node(f, "n2");
    // The agent's urgent report: its rank failed, the step still runs.
    const std::string body = R"({"run":"r1","attempt":1,"node":"n1","step":"0","cluster":"c1","job":7,"interval":1,"state":"running",)"
                             R"("ranks":[{"rank":0,"exit":{"code":1,"signal":null,"time":1000.5}}]})";
    REQUIRE(f.call("POST", "/v1/heartbeats", body).status == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("FAULT: worker n2/0 lost: node n2 died (its slurmd does not answer); rank 0 exited 1 on n1 after it") != std::string::npos);
    // With every node alive, a failed rank decides nothing by itself.
    ServiceFixture g({{"c1", kConf}});
    g.start();
    running_job(g);
    REQUIRE(g.call("POST", "/v1/heartbeats", body).status == 204);
    REQUIRE(ServiceFixture::until([&] { return g.slurm->count("scontrol", "-o") >= 1; }));
    ServiceFixture::settle();
    CHECK(g.state("r1") == "RUNNING");
}

TEST_CASE("a judged FAILED names the last lines of the batch script's stderr: whole in the evidence, its last own line in the cause") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    REQUIRE(ended(f, "n2", "0", R"([{"rank":1,"exit":{"code":3,"signal":null,"time":1000.2}}])") == 204);
    // srun's own report of its tasks comes last; markup is the job's text like any other.
    const std::string tail = R"(Traceback (most recent call last):\n  File \"train.py\", line 9\nValueError: <b>bad</b> batch \u00e9\n)"
                             R"(srun: error: n2: task 1: Exited with exit code 3)";
    REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":3,"signal":null}}])", R"(,"stderr_tail":")" + tail + "\"") == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const auto failed = last_event(f, "FAILED");
    INFO(boost::json::serialize(failed));
    CHECK(failed.at("cause").as_string() == "rank 1 on n2 exited 3 (the first rank to fail; every node alive); the batch script exited 3 on n1; "
                                             "stderr: ValueError: <b>bad</b> batch \xc3\xa9");
    CHECK(failed.at("evidence").at("stderr_tail").as_string() ==
          "Traceback (most recent call last):\n  File \"train.py\", line 9\nValueError: <b>bad</b> batch \xc3\xa9\n"
          "srun: error: n2: task 1: Exited with exit code 3");
    // A malformed tail is refused whole, naming the field; the run is not judged on it.
    ServiceFixture g({{"c1", kConf}});
    g.start();
    running_job(g);
    const auto refused = g.call("POST", "/v1/heartbeats", R"({"run":"r1","attempt":1,"node":"n1","step":"batch","cluster":"c1","job":7,)"
                                                          R"("state":"ended","ranks":[{"rank":0,"exit":{"code":3}}],"stderr_tail":"\u001b[2J"})");
    CHECK(refused.status == 400);
    CHECK(refused.body.find("stderr_tail: control characters other than newline and tab are not allowed") != std::string::npos);
    CHECK(g.state("r1") == "RUNNING");
}

TEST_CASE("--shardnet-fatal-exit: a rank's listed code ends the run FAILED at once, nothing asked, nothing requeued; the batch script's tail follows") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    // n1 is dead too: a judgment would find it and make this a FAULT.
    kill_node(f, "n1");
    ServiceFixture::settle();
    const int asked = f.slurm->count("scontrol", "-o") + f.slurm->count("squeue");
    const std::string rank1 = R"([{"rank":1,"exit":{"code":3,"signal":null,"time":1000.2}}])";
    // The agent's urgent report, while the step still runs; it repeats it in the next ones.
    for (int i = 0; i < 3; ++i) REQUIRE(ended(f, "n2", "0", rank1, R"(,"fatal_exit":[3,7])", "running") == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
    ServiceFixture::settle();
    std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("FAILED: rank 1 on n2 exited 3, which --shardnet-fatal-exit says is not to be retried\n") != std::string::npos);
    CHECK(ev.find("FAILED") == ev.rfind("FAILED"));   // once
    CHECK(ev.find("FAULT") == std::string::npos);
    CHECK(f.slurm->count("scontrol", "-o") + f.slurm->count("squeue") == asked);   // Slurm was not asked
    const auto failed = last_event(f, "FAILED");
    CHECK(failed.at("evidence").at("fatal_exit") == boost::json::object{{"node", "n2"}, {"rank", 1}, {"exit_code", 3}});
    // The batch script ends later: its tail comes as an event of its own; nothing is requeued.
    REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":3,"signal":null}}])", R"(,"fatal_exit":[3,7],"stderr_tail":"ValueError: rank 1")") == 204);
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("STDERR") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    ev = f.events("r1");
    CHECK(ev.find("STDERR: the batch script exited 3 on n1 after the run ended FAILED; stderr: ValueError: rank 1") != std::string::npos);
    CHECK(last_event(f, "STDERR").at("evidence").at("stderr_tail").as_string() == "ValueError: rank 1");
    CHECK(f.state("r1") == "FAILED");
    CHECK(f.slurm->count("sbatch") == 0);
    CHECK(f.slurm->count("scancel") == 0);   // the job is the user's: it ends by itself
    // A batch script's end with a code not listed follows the same way (after a judgment that finds the run ended).
    ServiceFixture h({{"c1", kConf}});
    h.start();
    running_job(h);
    REQUIRE(ended(h, "n2", "0", rank1, R"(,"fatal_exit":[3])", "running") == 204);
    REQUIRE(ServiceFixture::until([&] { return h.state("r1") == "FAILED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    REQUIRE(ended(h, "n1", "batch", R"([{"rank":0,"exit":{"code":null,"signal":15}}])", R"(,"fatal_exit":[3],"stderr_tail":"slurmstepd: CANCELLED")") == 204);
    REQUIRE(ServiceFixture::until([&] { return h.events("r1").find("STDERR: the batch script killed by signal 15 on n1 after the run ended FAILED; "
                                                                  "stderr: slurmstepd: CANCELLED") != std::string::npos; }));

    // A code the job did not list is judged as any other: nothing yet while every node is up.
    ServiceFixture g({{"c1", kConf}});
    g.start();
    running_job(g);
    REQUIRE(ended(g, "n2", "0", R"([{"rank":1,"exit":{"code":1,"signal":null,"time":1000.2}}])", R"(,"fatal_exit":[3])", "running") == 204);
    REQUIRE(ServiceFixture::until([&] { return g.slurm->count("scontrol", "-o") >= 1; }));
    ServiceFixture::settle();
    CHECK(g.state("r1") == "RUNNING");
}

TEST_CASE("--shardnet-fatal-exit: the batch script's listed code is the verdict, its tail in the FAILED event") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    kill_node(f, "n2");   // a judgment would make this a FAULT
    REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":42,"signal":null}}])",
                  R"(,"fatal_exit":[42],"stderr_tail":"loading config.yaml\nKeyError: 'lr'")") == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const auto failed = last_event(f, "FAILED");
    INFO(boost::json::serialize(failed));
    CHECK(failed.at("cause").as_string() == "the batch script on n1 exited 42, which --shardnet-fatal-exit says is not to be retried; stderr: KeyError: 'lr'");
    CHECK(failed.at("evidence").at("fatal_exit") == boost::json::object{{"node", "n1"}, {"exit_code", 42}});
    CHECK(failed.at("evidence").at("stderr_tail").as_string() == "loading config.yaml\nKeyError: 'lr'");
    CHECK(f.events("r1").find("FAULT") == std::string::npos);
    CHECK(f.slurm->count("sbatch") == 0);
}

TEST_CASE("--shardnet-fatal-exit travels with the run: kept with the job's spec, a requeued attempt is submitted with it") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    n2_dies_under(f, R"(,"fatal_exit":[7,3])");
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    int sbatch = 0;
    for (const auto &c : f.slurm->changes())
        if (c.argv[0] == "sbatch") {
            ++sbatch;
            CHECK(has(c.argv, "--shardnet-fatal-exit=3,7"));
        }
    CHECK(sbatch == 1);
}

TEST_CASE("the submitter's environment: checked whole, filtered, kept root-only, replayed into the next attempt only") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    auto post = [&](const std::string &body) { return f.call("POST", "/v1/runs/r1/environment", body); };
    // Malformed: refused whole, naming the entry.
    auto r = post(R"({"attempt":1,"environment":["GOOD=1","BAD\u0000=x"]})");
    CHECK(r.status == 400);
    CHECK(r.body.find("environment[1]") != std::string::npos);
    CHECK(post(R"({"attempt":1,"environment":["1X=1"]})").status == 400);
    CHECK(post(R"({"attempt":1,"environment":["A=1","A=2"]})").status == 400);
    CHECK(post(R"({"attempt":1,"environment":"A=1"})").status == 400);
    CHECK(post(R"({"attempt":1,"environment":["A=1"],"extra":1})").status == 400);
    CHECK(post(R"({"attempt":2,"environment":["A=1"]})").status == 409);   // not the current attempt
    // Kept: the job's own names, not Slurm's, the job's rendezvous or the host's.
    r = post(R"({"attempt":1,"environment":["MYVAR=kept-42","SLURM_JOB_ID=7","SBATCH_PARTITION=x","HOSTNAME=n1","PATH=/opt/x/bin:/usr/bin","SPANK_SHARDNET=r1","EMPTY="]})");
    REQUIRE(r.status == 200);
    auto a = boost::json::parse(r.body).as_object();
    CHECK(a.at("variables").to_number<int>() == 3);
    CHECK(a.at("dropped").to_number<int>() == 4);
    CHECK(r.body.find("kept-42") == std::string::npos);   // never a value in an answer
    struct stat st;
    const std::string file = f.dir + "/decisions/r1.environment";
    REQUIRE(stat(file.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    // The first attempt's stands.
    r = post(R"({"attempt":1,"environment":["MYVAR=other"]})");
    CHECK(r.status == 200);
    CHECK(r.body.find(R"("kept":false)") != std::string::npos);
    // A requeue submits with it on descriptor 3, sbatch's own environment untouched.
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::vector<FakeSlurm::Seen> sbatch = sbatches(f);
    REQUIRE(sbatch.size() == 1);
    CHECK(has(sbatch[0].argv, "--export-file=3"));
    REQUIRE(sbatch[0].as.fd3);
    // The user's, then ShardNet's options as their SHARDNET_* fallbacks (with
    // --export-file Slurm 22.05 hides the SPANK options from the batch step).
    static const char kept[] = "MYVAR=kept-42\0PATH=/opt/x/bin:/usr/bin\0EMPTY=\0SHARDNET_RUN=r1\0SHARDNET_RESUME=latest\0";
    CHECK(sbatch[0].as.fd3->rfind(std::string(kept, sizeof kept - 1), 0) == 0);
    CHECK(sbatch[0].as.fd3->ends_with(std::string("SHARDNET_ATTEMPT=2\0", 19)));
}

TEST_CASE("--shardnet-max-attempts: a fault after the last attempt ends the run FAILED, nothing submitted") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    n2_dies_under(f, R"(,"max_attempts":1)");
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("FAILED: attempt budget spent: 1 of 1 attempts used (--shardnet-max-attempts)") != std::string::npos);
    CHECK(f.slurm->count("sbatch") == 0);
    // The budget travels with the run: a requeued attempt is submitted with it.
    ServiceFixture g({{"c1", kConf}});
    g.start();
    n2_dies_under(g, R"(,"max_attempts":2)");
    REQUIRE(ServiceFixture::until([&] { return g.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    for (const auto &c : g.slurm->changes())
        if (c.argv[0] == "sbatch") CHECK(has(c.argv, "--shardnet-max-attempts=2"));
}

TEST_CASE("spares travel with the run: a requeued attempt of a job with spares holds them again, with --no-kill") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    n2_dies_under(f, R"(,"spares":1,"straggler":"replace")");
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    int sbatches = 0;
    for (const auto &c : f.slurm->changes()) {
        if (c.argv[0] != "sbatch") continue;
        ++sbatches;
        CHECK(has(c.argv, "--no-kill"));   // the plugin takes spares only with it
        CHECK(has(c.argv, "--shardnet-spares=1"));
        CHECK(has(c.argv, "--shardnet-straggler=replace"));
    }
    CHECK(sbatches == 1);
    // A job without spares is submitted without them, and without --no-kill.
    ServiceFixture g({{"c1", kConf}});
    g.start();
    n2_dies_under(g, "");
    REQUIRE(ServiceFixture::until([&] { return g.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    for (const auto &c : g.slurm->changes())
        if (c.argv[0] == "sbatch") CHECK((!has(c.argv, "--no-kill") && !has(c.argv, "--shardnet-spares=1")));
}

TEST_CASE("bad-node memory: a node that faulted one run is left out of the next run's placement, after a restart too; drained after K faults") {
    ServiceFixture f({{"c1", kConf}});
    f.cfg.drain_bad_nodes = true;
    f.cfg.drain_faults = 2;
    f.start();
    running_job(f);
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    f.svc->drain();
    auto list = boost::json::parse(f.call("GET", "/v1/bad-nodes").body).as_object();
    REQUIRE(list.at("nodes").as_array().size() == 1);
    const auto &n2 = list.at("nodes").as_array()[0].as_object();
    CHECK(n2.at("node").as_string() == "n2");
    CHECK(n2.at("last_run").as_string() == "r1");
    CHECK(n2.at("held").as_bool());
    CHECK(f.call("GET", "/v1/bad-nodes", "", "alice-t").status >= 401);   // admins only
    CHECK(f.slurm->count("scontrol", "update") == 0);                   // one fault: not drained yet
    // The broker restarts; n2 comes back up in Slurm. Run r2's job loses n1:
    // its placement has n3, n4 and n2 idle, and n2 is still left out.
    f.svc.reset();   // its fake Slurm goes with it: the new one is the same cluster, n2 up again
    f.start([](FakeSlurm &s) {
        FakeSlurm::Job j;
        j.id = 8;
        j.nodes = "n1,n3";
        j.batch_host = "n1";
        j.node_count = j.tasks = 2;
        s.jobs[kConf][8] = j;
        s.nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "IDLE"}, {"n3", "ALLOCATED"}, {"n4", "IDLE"}, {"n5", "IDLE"}};
    });
    REQUIRE(f.beat("r2", 1, "n1", "batch", "c1", 8) == 204);
    REQUIRE(f.beat("r2", 1, "n1", "0", "c1", 8) == 204);
    REQUIRE(f.beat("r2", 1, "n3", "0", "c1", 8) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    kill_node(f, "n3");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r2") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    for (const auto &c : f.slurm->changes())
        if (c.argv[0] == "sbatch") {
            INFO(c.argv[4]);
            CHECK(c.argv[4].find("n2") == std::string::npos);   // --nodelist= leaves n2 out
        }
    // Its second fault (n3 has one, n2 one): nothing drained; a second on n3 would be.
    f.svc->drain();
    // The admin clears n2: placement may use it again.
    auto cleared = f.call("POST", "/v1/bad-nodes/c1/n2/clear");
    CHECK(cleared.status == 200);
    CHECK(cleared.body.find(R"("cleared_faults":1)") != std::string::npos);
    f.svc->drain();
    list = boost::json::parse(f.call("GET", "/v1/bad-nodes").body).as_object();
    REQUIRE(list.at("nodes").as_array().size() == 1);
    CHECK(list.at("nodes").as_array()[0].at("node").as_string() == "n3");
    CHECK(f.call("POST", "/v1/bad-nodes/c1/..%2f/clear").status == 400);
}

TEST_CASE("bad-node memory: K faults of one node within the window drain it in Slurm with a reason") {
    ServiceFixture f({{"c1", kConf}});
    f.cfg.drain_bad_nodes = true;
    f.cfg.drain_faults = 1;
    f.start();
    running_job(f);
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "update") == 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    for (const auto &c : f.slurm->changes())
        if (c.argv[0] == "scontrol" && c.argv[1] == "update") {
            CHECK(c.argv[2] == "nodename=n2");
            CHECK(c.argv[3] == "state=drain");
            CHECK(c.argv[4].rfind("reason=shardnet: 1 faults in 86400 s; last: ", 0) == 0);
        }
}

TEST_CASE("a program's error while a worker on a live node is silent: judged FAILED, the detector does not turn it into a FAULT") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    // n2's agent never reports its end (its last word lost); n2 is up.
    REQUIRE(ended(f, "n1", "0", R"([{"rank":0,"exit":{"code":1,"signal":null,"time":1000.5}}])") == 204);
    REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":1,"signal":null}}])") == 204);
    for (int i = 0; i < 100 && f.state("r1") == "RUNNING"; ++i) {
        ServiceFixture::settle();
        f.tick_ahead(10);   // n2's deadline long past: the judgment, not the detector, decides
    }
    INFO(f.events("r1"));
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("FAULT") == std::string::npos);
    CHECK(ev.find("no end reported by n2/0, though Slurm says their nodes are up") != std::string::npos);
    CHECK(f.slurm->count("sbatch") == 0);
}

TEST_CASE("requeue=off: a node's FAULT, then the batch script's exit ends the run FAILED") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}});
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7, "off") == 204);
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7, "off") == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7, "off") == 204);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":1,"signal":null}}])") == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.events("r1").find("after a FAULT (requeue is off)") != std::string::npos);
}

TEST_CASE("the environment: exported bash functions are kept; a later attempt's is refused") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    auto r = f.call("POST", "/v1/runs/r1/environment", R"({"attempt":1,"environment":["BASH_FUNC_module%%=() {  eval $(/usr/bin/modulecmd bash $*)\n}","A=1"]})");
    CHECK(r.status == 200);
    CHECK(r.body.find(R"("variables":2)") != std::string::npos);
    CHECK(f.call("POST", "/v1/runs/r1/environment", R"({"attempt":1,"environment":["BASH_FUNC_a b%%=x"]})").status == 400);
}

namespace {
const std::string kConf2 = "/fake/c2.conf";

// Job 7 in partition gpu on c1's n1,n2 (no spare there); c2's m1, m2 idle
// in its partition `c2_partition`, m3 in cpu.
void gpu_job_and_second_cluster(ServiceFixture &f, const std::string &c2_partition) {
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf2] = {{"m1", "IDLE"}, {"m2", "IDLE"}, {"m3", "IDLE"}};
        f.slurm->partitions[kConf2] = {{"m1", c2_partition}, {"m2", c2_partition}, {"m3", "cpu"}};
    }
    put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}});
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->jobs[kConf][7].partition = "gpu";
        f.slurm->partitions[kConf] = {{"n1", "gpu"}, {"n2", "gpu"}};
    }
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    kill_node(f, "n2");
    f.tick_ahead(10);
}
}  // namespace

TEST_CASE("GPU types across clusters: only nodes of the job's type count; a cluster without it is excluded with the reason, mapped where named") {
    // Job 7 on c1 asks gpu:tesla:1 per node; c2's idle nodes have a100s (m1, m2) and none (m3).
    auto typed_job = [](ServiceFixture &f) {
        {
            std::lock_guard<std::mutex> lock(f.slurm->mu);
            f.slurm->nodes[kConf2] = {{"m1", "IDLE"}, {"m2", "IDLE"}, {"m3", "IDLE"}};
            f.slurm->gres[kConf2] = {{"m1", "gpu:a100:4(S:0)"}, {"m2", "gpu:a100:4(S:0)"}};
        }
        put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}});
        {
            std::lock_guard<std::mutex> lock(f.slurm->mu);
            f.slurm->jobs[kConf][7].tres_per_node = "gres:gpu:tesla:1";
            f.slurm->gres[kConf] = {{"n1", "gpu:tesla:2(S:0)"}, {"n2", "gpu:tesla:2(S:0)"}};
        }
        REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
        REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
        REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        kill_node(f, "n2");
        f.tick_ahead(10);
    };
    SUBCASE("c2 names the site's tesla a100: attempt 2 goes there on its a100 nodes, as gpu:a100:1, said so") {
        ServiceFixture f({{"c1", kConf}, {"c2", kConf2}});
        f.cfg.cluster_info["c2"].names["gpu_type"]["tesla"] = std::string("a100");
        f.start();
        typed_job(f);
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("sbatch") == 1; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        const auto sbatch = f.slurm->changes();
        auto s = std::find_if(sbatch.begin(), sbatch.end(), [](const auto &c) { return c.argv[0] == "sbatch"; });
        CHECK(s->conf == kConf2);
        CHECK(has(s->argv, "--gres=gpu:a100:1"));
        CHECK(has(s->argv, "--nodelist=m1,m2"));
        // The PLACEMENT event is written after sbatch answers: waited for.
        CHECK(ServiceFixture::until([&] { return f.events("r1").find("gpu_type tesla -> a100") != std::string::npos; }));
    }
    SUBCASE("no table: c2 has no tesla at all, excluded with the reason; nothing submitted") {
        ServiceFixture f({{"c1", kConf}, {"c2", kConf2}});
        f.start();
        typed_job(f);
        REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("PLACEMENT: no placement for attempt 2") != std::string::npos; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        INFO(f.events("r1"));
        CHECK(f.events("r1").find("c2 rejected: no GPU of type tesla (and no mapping for it in clusters.c2.names.gpu_type)") != std::string::npos);
        CHECK(f.slurm->count("sbatch") == 0);
    }
}

TEST_CASE("partition names across clusters: mapped where the target names it, the target excluded with the reason where it has none") {
    SUBCASE("c2 calls the site's gpu partition gpu-a: attempt 2 goes there as gpu-a, said so") {
        ServiceFixture f({{"c1", kConf}, {"c2", kConf2}});
        f.cfg.cluster_info["c2"].names["partition"]["gpu"] = std::string("gpu-a");
        f.start();
        gpu_job_and_second_cluster(f, "gpu-a");
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        const auto sbatch = f.slurm->changes();
        auto s = std::find_if(sbatch.begin(), sbatch.end(), [](const auto &c) { return c.argv[0] == "sbatch"; });
        CHECK(s->conf == kConf2);
        CHECK(has(s->argv, "--partition=gpu-a"));
        CHECK(has(s->argv, "--nodelist=m1,m2"));   // never m3, of partition cpu
        const std::string ev = f.events("r1");
        INFO(ev);
        CHECK(ev.find("PLACEMENT: c2 m1,m2: job 100, attempt 2") != std::string::npos);
        CHECK(ev.find("names: partition gpu -> gpu-a") != std::string::npos);
        CHECK(ev.find("c1 rejected: 0 of 1 idle node(s) fit") == std::string::npos);
    }
    SUBCASE("c2's table says it has no gpu partition: excluded with that reason, nothing submitted") {
        ServiceFixture f({{"c1", kConf}, {"c2", kConf2}});
        f.cfg.cluster_info["c2"].names["partition"]["gpu"] = std::nullopt;
        f.start();
        gpu_job_and_second_cluster(f, "gpu");
        REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("PLACEMENT: no placement for attempt 2") != std::string::npos; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.events("r1").find("c2 rejected: no partition for gpu") != std::string::npos);
        CHECK(f.slurm->count("sbatch") == 0);
    }
    SUBCASE("no table, and c2 has no partition of that name: excluded, the missing name said") {
        ServiceFixture f({{"c1", kConf}, {"c2", kConf2}});
        f.start();
        gpu_job_and_second_cluster(f, "batch");
        REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("PLACEMENT: no placement for attempt 2") != std::string::npos; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        INFO(f.events("r1"));
        CHECK(f.events("r1").find("c2 rejected: no partition gpu (and no mapping for it in clusters.c2.names.partition)") != std::string::npos);
        CHECK(f.slurm->count("sbatch") == 0);
    }
    SUBCASE("no table, and c2 has a gpu partition too: the same name, only its nodes") {
        ServiceFixture f({{"c1", kConf}, {"c2", kConf2}});
        f.start();
        gpu_job_and_second_cluster(f, "gpu");
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("sbatch") == 1; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        const auto sbatch = f.slurm->changes();
        auto s = std::find_if(sbatch.begin(), sbatch.end(), [](const auto &c) { return c.argv[0] == "sbatch"; });
        CHECK(has(s->argv, "--partition=gpu"));
        CHECK(has(s->argv, "--nodelist=m1,m2"));
    }
}

TEST_CASE("how Slurm says the job ended decides, every node alive: its own requeue, a preemption, a cancel, out of memory") {
    auto end_as = [](ServiceFixture &f, const std::string &slurm_state) {
        running_job(f);
        {
            std::lock_guard<std::mutex> lock(f.slurm->mu);
            f.slurm->jobs[kConf][7].state = slurm_state;
        }
        REQUIRE(ended(f, "n1", "0", R"([{"rank":0,"exit":{"code":null,"signal":15,"time":1000.1}}])") == 204);
        REQUIRE(ended(f, "n2", "0", R"([{"rank":1,"exit":{"code":null,"signal":15,"time":1000.1}}])") == 204);
        REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":null,"signal":15}}])") == 204);
    };
    SUBCASE("scontrol requeue (REQUEUED, then PENDING): no failure, the run goes on as the same attempt when Slurm starts it again") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        end_as(f, "PENDING");
        REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("REQUEUED: Slurm requeued job 7 itself (PENDING") != std::string::npos; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.state("r1") == "RUNNING");
        CHECK(f.slurm->count("sbatch") == 0);
        CHECK(f.slurm->count("scancel") == 0);
        CHECK(f.svc->metrics().find("shardnet_slurm_requeues_total 1") != std::string::npos);
        // Slurm starts it again: the same attempt heartbeats, and a later end is judged afresh.
        {
            std::lock_guard<std::mutex> lock(f.slurm->mu);
            f.slurm->jobs[kConf][7].state = "RUNNING";
        }
        REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
        REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
        // The pause ends on the timeline: its batch step is back, the job's spec kept anew.
        REQUIRE(ServiceFixture::until([&] {
            return f.events("r1").find("RESUMED: Slurm started job 7 again after its own requeue, on n1,n2; attempt 1 goes on") != std::string::npos;
        }));
        REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":0,"signal":null}}])") == 204);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "SUCCEEDED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
    }
    SUBCASE("out of memory: FAILED with that cause") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        end_as(f, "OUT_OF_MEMORY");
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.events("r1").find("FAILED: out of memory (Slurm: OUT_OF_MEMORY): rank 0 on n1 killed by signal 15") != std::string::npos);
    }
    SUBCASE("a time limit: FAILED with that cause") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        end_as(f, "TIMEOUT");
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.events("r1").find("FAILED: the job reached its time limit (Slurm: TIMEOUT)") != std::string::npos);
    }
    SUBCASE("scancel in Slurm: CANCELLED, not FAILED") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        end_as(f, "CANCELLED");
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "CANCELLED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.events("r1").find("CANCELLED: job 7 cancelled in Slurm (scancel) on c1") != std::string::npos);
    }
    SUBCASE("preempted and ended: a FAULT no node is to blame for, requeued by policy") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        end_as(f, "PREEMPTED");
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.events("r1").find("FAULT: worker n1/batch preempted: Slurm ended job 7 (PREEMPTED); no node is to blame") != std::string::npos);
        CHECK(f.events("r1").find("FAILED") == std::string::npos);
    }
}

TEST_CASE("a TIMEOUT under --shardnet-on-timeout=requeue: requeued only from a checkpoint sealed after the pre-limit signal") {
    // Job 7's batch step says --shardnet-on-timeout=requeue (kept with its
    // spec); optionally its agents report the pre-limit signal, and a
    // checkpoint of attempt 1 is sealed before or after it.
    auto timed_out = [](ServiceFixture &f, bool signal, bool seal_after) {
        put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "IDLE"}, {"n4", "IDLE"}});
        const std::string batch = R"({"run":"r1","attempt":1,"node":"n1","step":"batch","cluster":"c1","job":7,"interval":1,)"
                                  R"("state":"running","on_timeout":"requeue","ranks":[{"rank":0,"step":3}]})";
        REQUIRE(f.call("POST", "/v1/heartbeats", batch).status == 204);
        REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
        REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        auto seal = [&](const char *name) {
            for (int rank = 0; rank < 2; ++rank)
                REQUIRE(f.call("POST", std::string("/v1/runs/r1/checkpoints/") + name + "/commit",
                               R"({"attempt":1,"rank":)" + std::to_string(rank) +
                                   R"(,"world_size":2,"files":[{"path":"s","sha256":"00","bytes":1}]})").status == 200);
        };
        seal("checkpoint-0010");
        if (signal) {
            usleep(20000);
            const std::string said = R"({"run":"r1","attempt":1,"node":"n1","step":"0","cluster":"c1","job":7,"interval":1,)"
                                     R"("state":"running","prelimit_signalled":true,"ranks":[{"rank":0,"step":20}]})";
            REQUIRE(f.call("POST", "/v1/heartbeats", said).status == 204);
            usleep(20000);
        }
        if (seal_after) seal("checkpoint-0020");
        {
            std::lock_guard<std::mutex> lock(f.slurm->mu);
            f.slurm->jobs[kConf][7].state = "TIMEOUT";
        }
        REQUIRE(ended(f, "n1", "0", R"([{"rank":0,"exit":{"code":null,"signal":15,"time":1000.1}}])") == 204);
        REQUIRE(ended(f, "n2", "0", R"([{"rank":1,"exit":{"code":null,"signal":15,"time":1000.1}}])") == 204);
        REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":null,"signal":15}}])") == 204);
    };
    SUBCASE("sealed after the signal: a FAULT no node is to blame for, attempt 2 from that checkpoint with the option again") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        timed_out(f, true, true);
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("sbatch") == 1; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        INFO(f.events("r1"));
        CHECK(f.events("r1").find("FAULT: worker n1/batch time limit: Slurm ended job 7 (TIMEOUT) after checkpoint checkpoint-0020 was sealed "
                                  "past the pre-limit signal") != std::string::npos);
        CHECK(f.events("r1").find("FAILED") == std::string::npos);
        const auto sbatch = f.slurm->changes();
        auto s = std::find_if(sbatch.begin(), sbatch.end(), [](const auto &c) { return c.argv[0] == "sbatch"; });
        CHECK(has(s->argv, "--shardnet-on-timeout=requeue"));
        CHECK(has(s->argv, "--shardnet-resume=checkpoint-0020"));
    }
    SUBCASE("sealed only before the signal: FAILED, saying why it was not requeued") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        timed_out(f, true, false);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.events("r1").find("FAILED: the job reached its time limit (Slurm: TIMEOUT); not requeued: --shardnet-on-timeout=requeue, "
                                  "but attempt 1 sealed no checkpoint after its pre-limit signal") != std::string::npos);
        CHECK(f.slurm->count("sbatch") == 0);
    }
    SUBCASE("no pre-limit signal reported: FAILED, naming the site's setting") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        timed_out(f, false, true);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.events("r1").find("not requeued: --shardnet-on-timeout=requeue, but no pre-limit signal was reported") != std::string::npos);
        CHECK(f.slurm->count("sbatch") == 0);
    }
}

TEST_CASE("Slurm's limits without a reported end, requeue=off, and the site's bound: never a node's fault, never stuck DEGRADED") {
    SUBCASE("the detector finds job 7 TIMEOUT, its nodes up, no end reported: FAILED naming the limit, nothing submitted, no node blamed") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        running_job(f);
        {
            std::lock_guard<std::mutex> lock(f.slurm->mu);
            f.slurm->jobs[kConf][7].state = "TIMEOUT";
        }
        f.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        INFO(f.events("r1"));
        CHECK(f.events("r1").find("FAILED: the job reached its time limit (Slurm: TIMEOUT) (the batch script's end was not reported)") !=
              std::string::npos);
        CHECK(f.events("r1").find("FAULT") == std::string::npos);
        CHECK(f.slurm->count("sbatch") == 0);
    }
    SUBCASE("preempted with requeue=off: FAILED, saying so (not DEGRADED forever)") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}});
        REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7, "off") == 204);
        REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7, "off") == 204);
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        {
            std::lock_guard<std::mutex> lock(f.slurm->mu);
            f.slurm->jobs[kConf][7].state = "PREEMPTED";
        }
        REQUIRE(ended(f, "n1", "0", R"([{"rank":0,"exit":{"code":null,"signal":15,"time":1000.1}}])") == 204);
        REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":null,"signal":15}}])") == 204);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.events("r1").find("preempted (Slurm: PREEMPTED); not requeued: --shardnet-requeue=off") != std::string::npos);
    }
}

// Tier 0 (recovery/in_job_restarts.cpp): `shard launch` supervises the
// attempt; its node FAULT waits for the relaunch instead of a requeue.
TEST_CASE("a supervised attempt's FAULT waits for shard launch: a relaunch is RUNNING again, giving up or silence requeues") {
    auto report = [](ServiceFixture &f, const std::string &body) { return f.call("POST", "/v1/runs/r1/restarts", body).status; };
    auto submitted = [](ServiceFixture &f) {
        int n = 0;
        for (const auto &c : f.slurm->changes()) n += c.argv[0] == "sbatch" || c.argv[0] == "scancel";
        return n;
    };
    const std::string supervising = R"({"kind":"supervising","attempt":1,"spares":1,"nodes":["n1","n2"]})";
    SUBCASE("relaunched") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        running_job(f);
        REQUIRE(report(f, supervising) == 200);
        // A relaunch with no FAULT held for it: the job's word alone is no death.
        CHECK(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n3"],"nodes":["n1","n3"]})") == 409);
        CHECK(f.events("r1").find("RESTARTED") == std::string::npos);
        kill_node(f, "n2");
        f.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
        ServiceFixture::settle();
        CHECK(submitted(f) == 0);   // no requeue, no scancel: the supervisor's turn
        // The dead node must be the FAULT's.
        CHECK(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n1"],"took":["n3"],"nodes":["n2","n3"]})") == 409);
        REQUIRE(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n3"],"nodes":["n1","n3"],"spares":0,"relaunch_seconds":0.5})") == 200);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        // The same report sent again (its answer lost): one RESTARTED.
        CHECK(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n3"],"nodes":["n1","n3"],"spares":0})") == 200);
        const std::string ev = f.events("r1");
        CHECK(ev.find("RESTARTED") == ev.rfind("RESTARTED"));
        INFO(ev);
        CHECK(ev.find("SUPERVISED: shard launch supervises attempt 1 with 1 spare node(s)") != std::string::npos);
        CHECK(ev.find("RESTARTED: in-job restart 1: node n2 left out, n3 took its place") != std::string::npos);
        // The relaunched step's workers report for the same attempt and job.
        CHECK(f.beat("r1", 1, "n3", "1", "c1", 7) == 204);
        CHECK(f.state("r1") == "RUNNING");
        CHECK(submitted(f) == 0);
    }
    SUBCASE("a second node dies during the hold: held after the first's relaunch, RUNNING once both are answered") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        put_job(f, "n1,n2,n3,n4,n5", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "ALLOCATED"}, {"n4", "ALLOCATED"}, {"n5", "ALLOCATED"}});
        REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
        for (const char *n : {"n1", "n2", "n3"}) REQUIRE(f.beat("r1", 1, n, "0", "c1", 7) == 204);
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        REQUIRE(report(f, R"({"kind":"supervising","attempt":1,"spares":2,"nodes":["n1","n2","n3"]})") == 200);
        kill_node(f, "n2");
        kill_node(f, "n3");
        f.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] {
            const std::string ev = f.events("r1");
            return ev.find("worker n2/0") != std::string::npos && ev.find("worker n3/0") != std::string::npos;
        }));
        REQUIRE(f.state("r1") == "DEGRADED");
        ServiceFixture::settle();
        std::this_thread::sleep_for(std::chrono::milliseconds(400));   // real time passes: since_fault counts it
        // The supervisor saw n2's death first and relaunched without it (n3 still in).
        REQUIRE(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n4"],"nodes":["n1","n3","n4"],"spares":1,"ended_step":"0"})") == 200);
        ServiceFixture::settle();
        CHECK(f.state("r1") == "DEGRADED");   // n3's death waits for its relaunch
        CHECK(submitted(f) == 0);
        // Then n3's: taken (its FAULT held now), RUNNING again, no requeue.
        REQUIRE(report(f, R"({"kind":"restarted","attempt":1,"restart":2,"dead":["n3"],"took":["n5"],"nodes":["n1","n4","n5"],"spares":0,"ended_step":"1"})") == 200);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        const std::string ev = f.events("r1");
        INFO(ev);
        CHECK(ev.find("RESTARTED: in-job restart 1: node n2 left out, n4 took its place") != std::string::npos);
        CHECK(ev.find("RESTARTED: in-job restart 2: node n3 left out, n5 took its place") != std::string::npos);
        CHECK(submitted(f) == 0);
        // Each relaunch's fault_at is its own node's FAULT, not when its turn came.
        std::map<std::string, double> fault_time;
        std::map<long long, double> answered;
        const boost::json::value events = boost::json::parse(f.call("GET", "/v1/runs/r1/events").body);
        for (const auto &e : events.at("events").as_array()) {
            const auto &evd = e.at("evidence");
            if (e.at("kind") == "FAULT") fault_time[std::string(evd.at("node").as_string())] = e.at("time").to_number<double>();
            if (e.at("kind") == "RESTARTED") {
                answered[evd.at("restart").as_int64()] = evd.at("fault_at").to_number<double>();
                CHECK(evd.at("since_fault").to_number<double>() >= 0.3);
            }
        }
        REQUIRE(fault_time.count("n2/0") == 1);
        REQUIRE(fault_time.count("n3/0") == 1);
        CHECK(std::abs(answered.at(1) - fault_time.at("n2/0")) < 1e-3);
        CHECK(std::abs(answered.at(2) - fault_time.at("n3/0")) < 1e-3);   // not the first relaunch's time, 0.4 s later
    }
    SUBCASE("a second death waiting its turn is held again after the broker's restart") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        put_job(f, "n1,n2,n3,n4,n5", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "ALLOCATED"}, {"n4", "ALLOCATED"}, {"n5", "ALLOCATED"}});
        REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
        for (const char *n : {"n1", "n2", "n3"}) REQUIRE(f.beat("r1", 1, n, "0", "c1", 7) == 204);
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        REQUIRE(report(f, R"({"kind":"supervising","attempt":1,"spares":2,"nodes":["n1","n2","n3"]})") == 200);
        kill_node(f, "n2");
        kill_node(f, "n3");
        f.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] {
            const std::string ev = f.events("r1");
            return ev.find("worker n2/0") != std::string::npos && ev.find("worker n3/0") != std::string::npos;
        }));
        // Whichever was held first is answered; the other waits.
        const std::string ev0 = f.events("r1");
        const bool n2_first = ev0.find("worker n2/0") < ev0.find("worker n3/0");
        const std::string first = n2_first ? "n2" : "n3", second = n2_first ? "n3" : "n2";
        REQUIRE(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":[")" + first + R"("],"took":["n4"],"nodes":["n1",")" + second +
                              R"(","n4"],"spares":1})") == 200);
        ServiceFixture::settle();
        REQUIRE(f.state("r1") == "DEGRADED");
        // The broker stops and starts again.
        f.svc->summarise();   // the workers' rows, as every summary_seconds
        f.svc->drain();
        f.svc.reset();
        f.start([](FakeSlurm &s) {
            FakeSlurm::Job j;
            j.id = 7, j.nodes = "n1,n2,n3,n4,n5", j.batch_host = "n1", j.node_count = j.tasks = 5;
            s.jobs[kConf][7] = j;
            s.nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "DOWN*"}, {"n3", "DOWN*"}, {"n4", "ALLOCATED"}, {"n5", "ALLOCATED"}};
            s.dead_slurmd.insert("n2"), s.dead_slurmd.insert("n3");
        });
        // The second death's relaunch is still taken: RUNNING, nothing requeued.
        REQUIRE(report(f, R"({"kind":"restarted","attempt":1,"restart":2,"dead":[")" + second + R"("],"took":["n5"],"nodes":["n1","n4","n5"],"spares":0})") == 200);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.slurm->count("sbatch") == 0);
    }
    SUBCASE("two nodes die during the hold and one relaunch answers both") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        put_job(f, "n1,n2,n3,n4,n5", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "ALLOCATED"}, {"n4", "ALLOCATED"}, {"n5", "ALLOCATED"}});
        REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
        for (const char *n : {"n1", "n2", "n3"}) REQUIRE(f.beat("r1", 1, n, "0", "c1", 7) == 204);
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        REQUIRE(report(f, R"({"kind":"supervising","attempt":1,"spares":2,"nodes":["n1","n2","n3"]})") == 200);
        kill_node(f, "n2");
        kill_node(f, "n3");
        f.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] {
            const std::string ev = f.events("r1");
            return ev.find("worker n2/0") != std::string::npos && ev.find("worker n3/0") != std::string::npos;
        }));
        REQUIRE(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2","n3"],"took":["n4","n5"],"nodes":["n1","n4","n5"],"spares":0})") == 200);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
        ServiceFixture::settle();
        CHECK(submitted(f) == 0);
    }
    SUBCASE("relaunched, then the program's own error: FAILED naming the relaunched step's rank, not the old step's") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        running_job(f);
        REQUIRE(report(f, supervising) == 200);
        kill_node(f, "n2");
        // The old step's survivor is killed with it (137).
        REQUIRE(ended(f, "n1", "0", R"([{"rank":0,"exit":{"code":137,"signal":null,"time":1000.1}}])") == 204);
        f.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        REQUIRE(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n3"],"nodes":["n1","n3"],"spares":0})") == 200);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        {   // Slurm drops the dead node from the job; the spare is in it.
            std::lock_guard<std::mutex> lock(f.slurm->mu);
            f.slurm->jobs[kConf][7].nodes = "n1,n3";
            f.slurm->nodes[kConf]["n3"] = "ALLOCATED";
        }
        REQUIRE(ended(f, "n3", "1", R"([{"rank":1,"exit":{"code":3,"signal":null,"time":2000.2}}])") == 204);
        REQUIRE(ended(f, "n1", "1", R"([{"rank":0,"exit":{"code":1,"signal":null,"time":2000.9}}])") == 204);
        REQUIRE(ended(f, "n1", "batch", R"([{"rank":0,"exit":{"code":1,"signal":null}}])") == 204);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "FAILED" || f.state("r1") == "RECOVERING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        const std::string ev = f.events("r1");
        INFO(ev);
        CHECK(f.state("r1") == "FAILED");
        CHECK(ev.find("FAILED: rank 1 on n3 exited 3") != std::string::npos);
    }
    SUBCASE("gave up") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        running_job(f);
        REQUIRE(report(f, supervising) == 200);
        kill_node(f, "n2");
        f.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        REQUIRE(report(f, R"({"kind":"gave_up","attempt":1,"reason":"node n2 died and no spare node is left","spares":0})") == 200);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        CHECK(f.events("r1").find("RESTART_GAVE_UP: shard launch gave up: node n2 died and no spare node is left") != std::string::npos);
    }
    SUBCASE("a report the store does not take: the FAULT is held again, and its hold still requeues") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        running_job(f);
        REQUIRE(report(f, supervising) == 200);
        kill_node(f, "n2");
        f.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        exec_sql(f.cfg.database, "CREATE TRIGGER no_restarts BEFORE INSERT ON events WHEN NEW.kind = 'RESTARTED' "
                                 "BEGIN SELECT RAISE(ABORT, 'injected'); END;");
        CHECK(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n3"],"nodes":["n1","n3"]})") >= 500);
        exec_sql(f.cfg.database, "DROP TRIGGER no_restarts;");
        // Sent again: the FAULT is there to be answered.
        REQUIRE(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n3"],"nodes":["n1","n3"]})") == 200);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        // Had it not been sent again, the hold would have requeued it.
        ServiceFixture g({{"c1", kConf}});
        g.start();
        running_job(g);
        REQUIRE(report(g, supervising) == 200);
        kill_node(g, "n2");
        g.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] { return g.state("r1") == "DEGRADED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        exec_sql(g.cfg.database, "CREATE TRIGGER no_restarts BEFORE INSERT ON events WHEN NEW.kind = 'RESTARTED' "
                                 "BEGIN SELECT RAISE(ABORT, 'injected'); END;");
        CHECK(report(g, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n3"],"nodes":["n1","n3"]})") >= 500);
        g.tick_ahead(InJobRestarts::kHoldSeconds + 1);
        REQUIRE(ServiceFixture::until([&] { return g.state("r1") == "RECOVERING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
    }
    SUBCASE("the broker restarts during the hold: held again, the relaunch's report still counts; silence still requeues") {
        for (bool relaunched : {true, false}) {
            ServiceFixture f({{"c1", kConf}});
            f.start();
            running_job(f);
            REQUIRE(report(f, supervising) == 200);
            kill_node(f, "n2");
            f.tick_ahead(10);
            REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
            ServiceFixture::settle();   // what the awaited change started is written too
            f.svc->summarise();   // the workers' rows, as every summary_seconds
            f.svc->drain();
            f.svc.reset();
            f.start([&](FakeSlurm &fs) {
                FakeSlurm::Job j;
                j.id = 7, j.nodes = "n1,n2,n3", j.batch_host = "n1", j.node_count = 3, j.tasks = 3;
                fs.jobs[kConf][7] = j;
                fs.nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "DOWN*"}, {"n3", "ALLOCATED"}, {"n4", "IDLE"}, {"n5", "IDLE"}};
                fs.dead_slurmd.insert("n2");
            });
            CHECK(f.state("r1") == "DEGRADED");
            ServiceFixture::settle();
            CHECK(submitted(f) == 0);   // not requeued at start: the supervisor's turn again
            if (relaunched) {
                REQUIRE(report(f, R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n3"],"nodes":["n1","n3"]})") == 200);
                REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
                ServiceFixture::settle();   // what the awaited change started is written too
                CHECK(submitted(f) == 0);
            } else {
                f.tick_ahead(InJobRestarts::kHoldSeconds + 1);
                REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
                ServiceFixture::settle();   // what the awaited change started is written too
            }
        }
    }
    SUBCASE("a spare node dies: no FAULT, no hold, no requeue; the run goes on RUNNING") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        put_job(f, "n1,n2,n3", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "ALLOCATED"}, {"n4", "IDLE"}});
        REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
        REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
        REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
        REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
        ServiceFixture::settle();   // the allocation's hosts watched
        REQUIRE(report(f, supervising) == 200);   // the step runs on n1 and n2: n3 is the spare
        kill_node(f, "n3");
        for (int i = 0; i < 3; ++i) {
            f.tick_ahead(10);
            REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
            REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
            REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
        }
        REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("SPARE_LOST") != std::string::npos; }));
        ServiceFixture::settle();
        const std::string ev = f.events("r1");
        INFO(ev);
        CHECK(ev.find("SPARE_LOST: spare node n3 of job 7 down") != std::string::npos);
        CHECK(ev.find("FAULT") == std::string::npos);
        CHECK(f.state("r1") == "RUNNING");
        CHECK(submitted(f) == 0);
    }
    SUBCASE("a run's restart reports are capped per minute: 429 with Retry-After") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        running_job(f);
        int ok = 0;
        ApiResponse last;
        for (std::size_t i = 0; i <= InJobRestarts::kReportsPerMinute; ++i) {
            last = f.call("POST", "/v1/runs/r1/restarts", supervising);
            ok += last.status == 200;
        }
        CHECK(ok == int(InJobRestarts::kReportsPerMinute));
        CHECK(last.status == 429);
        CHECK(last.retry_after > 0);
        CHECK(last.body.find("restart reports in the last minute") != std::string::npos);
    }
    SUBCASE("the supervisor never says") {
        ServiceFixture f({{"c1", kConf}});
        f.start();
        running_job(f);
        REQUIRE(report(f, supervising) == 200);
        kill_node(f, "n2");
        f.tick_ahead(10);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
        f.tick_ahead(InJobRestarts::kHoldSeconds + 1);
        REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
        ServiceFixture::settle();   // what the awaited change started is written too
    }
}

TEST_CASE("a run in an OCI image is requeued only where containers run (clusters.NAME.containers), said in PLACEMENT") {
    ServiceFixture f({{"c1", kConf}, {"c2", kConf2}});
    f.cfg.cluster_info["c1"].containers = false;
    f.start();
    const std::string digest = "sha256:" + std::string(64, 'a');
    REQUIRE(f.call("POST", "/v1/runs", R"({"id":"r1","manifest":{"name":"r1","image":"oci:/i:v1","image_digest":")" + digest + R"("}})")
                .status == 201);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf2] = {{"m1", "IDLE"}, {"m2", "IDLE"}};
    }
    running_job(f);   // n3, n4 idle on c1, the home cluster
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("sbatch") == 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const auto changes = f.slurm->changes();
    auto s = std::find_if(changes.begin(), changes.end(), [](const auto &c) { return c.argv[0] == "sbatch"; });
    CHECK(s->conf == kConf2);
    CHECK(ServiceFixture::until([&] { return f.events("r1").find("c1 rejected: runs no containers (clusters.c1.containers is false)") != std::string::npos; }));
}

TEST_CASE("a run in an OCI image is requeued only where its layout is read (clusters.NAME.image_roots), said in PLACEMENT") {
    ServiceFixture f({{"c1", kConf}, {"c2", kConf2}, {"c3", "/fake/c3.conf"}});
    f.cfg.cluster_info["c1"].image_roots = {"/other"};
    f.cfg.cluster_info["c2"].image_roots = {"/site/images"};
    f.cfg.cluster_info["c3"].image_roots = {"/site/images-old"};
    f.start();
    const std::string digest = "sha256:" + std::string(64, 'a');
    REQUIRE(f.call("POST", "/v1/runs", R"({"id":"r1","manifest":{"name":"r1","image":"oci:/site/images/t:v1","image_digest":")" + digest +
                                           R"(","image_layout":"/site/images/t"}})")
                .status == 201);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf2] = {{"m1", "IDLE"}, {"m2", "IDLE"}};
        f.slurm->nodes["/fake/c3.conf"] = {{"k1", "IDLE"}, {"k2", "IDLE"}};
    }
    running_job(f);   // n3, n4 idle on c1, the home cluster: its image_roots do not hold the layout
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("sbatch") == 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const auto changes = f.slurm->changes();
    auto s = std::find_if(changes.begin(), changes.end(), [](const auto &c) { return c.argv[0] == "sbatch"; });
    CHECK(s->conf == kConf2);
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("c1 rejected: cannot read the image's layout /site/images/t (clusters.c1.image_roots: /other)") != std::string::npos);
    CHECK(ev.find("c3 rejected: cannot read the image's layout /site/images/t (clusters.c3.image_roots: /site/images-old)") != std::string::npos);
}

TEST_CASE("a requeue that found no place is tried again after the broker's restart, not left DEGRADED for good") {
    ServiceFixture f({{"c1", kConf}});
    f.start();
    // Job 7 holds the cluster's two nodes; n2 dies: nowhere to go.
    put_job(f, "n1,n2", {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}});
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("no placement for attempt 2") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.state("r1") == "DEGRADED");
    CHECK(f.slurm->count("sbatch") == 0);
    // The broker stops; two nodes join the cluster meanwhile.
    f.svc.reset();
    f.start([](FakeSlurm &s) {
        FakeSlurm::Job j;
        j.id = 7, j.nodes = "n1,n2", j.batch_host = "n1", j.node_count = j.tasks = 2;
        s.jobs[kConf][7] = j;
        s.nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "DOWN*"}, {"n3", "IDLE"}, {"n4", "IDLE"}};
        s.dead_slurmd.insert("n2");
    });
    // Taken up at start (not 30 s later, and not never).
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("sbatch") == 1; }, 5));
    ServiceFixture::settle();   // what the awaited change started is written too
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("no placement for attempt 2") == ev.rfind("no placement for attempt 2"));   // the history told once
    for (const auto &c : f.slurm->changes())
        if (c.argv[0] == "sbatch") CHECK(has(c.argv, "--nodelist=n3,n4"));
}

TEST_CASE("GET /v1/capacity?containers=1&image_layout=: a cluster that cannot read the layout is refused with why; a bad layout is 400") {
    ServiceFixture f({{"c1", kConf}, {"c2", kConf2}});
    f.cfg.cluster_info["c2"].image_roots = {"/site/images"};
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf] = {{"n1", "IDLE"}};
        f.slurm->nodes[kConf2] = {{"m1", "IDLE"}};
    }
    auto r = f.call("GET", "/v1/capacity?containers=1&image_layout=/home/ana/.shardnet/images/x%20y");
    REQUIRE(r.status == 200);
    const auto v = boost::json::parse(r.body);
    std::map<std::string, std::string> status, reason;
    for (const auto &row : v.at("clusters").as_array()) {
        status[std::string(row.at("cluster").as_string())] = std::string(row.at("status").as_string());
        if (auto *why = row.as_object().if_contains("reason")) reason[std::string(row.at("cluster").as_string())] = std::string(why->as_string());
    }
    CHECK(status["c1"] == "ok");
    CHECK(status["c2"] == "refused");
    CHECK(reason["c2"] == "cannot read the image's layout /home/ana/.shardnet/images/x y (clusters.c2.image_roots: /site/images)");
    for (const char *bad : {"/v1/capacity?image_layout=/a/../etc", "/v1/capacity?image_layout=rel", "/v1/capacity?image_layout=/a%2",
                            "/v1/capacity?image_layout=/a%FF", "/v1/capacity?image_layout=/a%0Ab"}) {
        CAPTURE(bad);
        auto b = f.call("GET", bad);
        CHECK(b.status == 400);
        CHECK(b.body.find("image_layout") != std::string::npos);
    }
}

TEST_CASE("a node only the broker saw down (its slurmd refused a connect: a flood does that) is no bad node until Slurm says so") {
    // Issue 43: one failed connect to slurmd held a healthy node out of every
    // user's placement for 600 s (and toward a drain).
    ServiceFixture f({{"c1", kConf}});
    f.cfg.drain_bad_nodes = true;
    f.cfg.drain_faults = 1;
    f.start();
    running_job(f);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->dead_slurmd.insert("n2");   // Slurm still says ALLOCATED
    }
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("FAULT") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::string ev = f.events("r1");
    INFO(ev);
    // The run recovers at once, and its FAULT says whose word it was.
    CHECK(ev.find("node n2 slurmd unreachable (seen by the broker; Slurm says ALLOCATED)") != std::string::npos);
    auto held = [&] { return node_held(f, "n2"); };
    CHECK_FALSE(held());
    // Slurm keeps it up: asked again every few seconds, never held, never drained.
    for (double ahead : {6.0, 12.0, 18.0}) f.tick_ahead(ahead);
    CHECK_FALSE(held());
    CHECK(f.slurm->count("scontrol", "update") == 0);
    // Slurm's own word (DOWN): held now, for every run.
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n2"] = "DOWN*";
    }
    f.tick_ahead(24);
    CHECK(held());
}

TEST_CASE("NOT_RESPONDING is Slurm's suspicion, not its verdict; a power state is no death: a node is held once Slurm calls it DOWN") {
    // A flood timed to fail one of slurmctld's pings near SlurmdTimeout
    // shows NOT_RESPONDING once: that alone never holds a node. Slurm sets
    // DOWN itself when the silence lasts SlurmdTimeout.
    ServiceFixture f({{"c1", kConf}});
    f.start();
    running_job(f);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->dead_slurmd.insert("n2");
        f.slurm->nodes[kConf]["n2"] = "MIXED+NOT_RESPONDING";
    }
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.events("r1").find("FAULT") != std::string::npos; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    for (double ahead : {16.0, 22.0, 28.0, 34.0}) f.tick_ahead(ahead);
    CHECK_FALSE(node_held(f, "n2"));
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n2"] = "IDLE+POWERING_DOWN";
    }
    f.tick_ahead(40);
    CHECK_FALSE(node_held(f, "n2"));
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n2"] = "DOWN+NOT_RESPONDING";
    }
    f.tick_ahead(46);
    CHECK(node_held(f, "n2"));
    CHECK(node_dead_in_slurm("DOWN*"));
    CHECK(node_dead_in_slurm("IDLE+FAIL"));
    CHECK(node_dead_in_slurm("ALLOCATED+FAILING"));
    CHECK(node_dead_in_slurm("down*"));
    CHECK_FALSE(node_dead_in_slurm("IDLE+POWERED_DOWN"));
    CHECK_FALSE(node_dead_in_slurm("MIXED+POWER_DOWN"));
    CHECK_FALSE(node_dead_in_slurm("ALLOCATED+NOT_RESPONDING"));
    CHECK_FALSE(node_dead_in_slurm(""));
}

TEST_CASE("a kept environment belongs to its owner and job: another's is never replayed, attempt 1's own replaces it") {
    // Issue 43: a refused peer decision's environment (another user's PATH
    // and BASH_ENV) stayed on disk under the run id and was replayed into
    // the real owner's attempt 2.
    ServiceFixture f({{"c1", kConf}});
    f.start();
    std::string why;
    const std::string dir = private_dir(f.cfg.database, why);
    REQUIRE(!dir.empty());
    bool existed = false;
    // Planted before the run existed: uid 1002's, for a job of theirs.
    REQUIRE(write_environment_file(dir, "r1", EnvironmentOrigin{1002, "c1", 66}, {"PATH=/home/attacker/bin:/usr/bin"}, existed) == "");
    running_job(f);
    // The requeue: the planted file is not the run's (uid 5000, job 7): not replayed, deleted.
    kill_node(f, "n2");
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    const std::vector<FakeSlurm::Seen> sbatch = sbatches(f);
    REQUIRE(sbatch.size() == 1);
    CHECK_FALSE(has(sbatch[0].argv, "--export-file=3"));
    CHECK_FALSE(sbatch[0].as.fd3);
    CHECK(access((dir + "/r1.environment").c_str(), F_OK) != 0);
    const std::string ev = f.events("r1");
    INFO(ev);
    CHECK(ev.find("the kept environment (the kept environment was written for uid 1002, job c1/66") != std::string::npos);

    // Attempt 1's own, sent after a planted one: replaces it, and is replayed.
    ServiceFixture g({{"c1", kConf}});
    g.start();
    const std::string gdir = private_dir(g.cfg.database, why);
    REQUIRE(write_environment_file(gdir, "r1", EnvironmentOrigin{1002, "c1", 66}, {"PATH=/home/attacker/bin"}, existed) == "");
    running_job(g);
    ServiceFixture::settle();
    auto r = g.call("POST", "/v1/runs/r1/environment", R"({"attempt":1,"environment":["MYVAR=mine"]})");
    INFO(r.body);
    REQUIRE(r.status == 200);
    CHECK(r.body.find(R"("kept":true)") != std::string::npos);
    auto kept = read_environment_file(gdir, "r1", why);
    REQUIRE(kept);
    CHECK(kept->origin == EnvironmentOrigin{5000, "c1", 7});
    CHECK(kept->text == std::string("MYVAR=mine\0", 11));
    // Sent again by the same job: the same stands.
    CHECK(g.call("POST", "/v1/runs/r1/environment", R"({"attempt":1,"environment":["MYVAR=again"]})").body.find(R"("kept":false)") != std::string::npos);
    kill_node(g, "n2");
    g.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return g.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    for (const auto &c : g.slurm->changes())
        if (c.argv[0] == "sbatch") {
            REQUIRE(c.as.fd3);
            CHECK(c.as.fd3->rfind(std::string("MYVAR=mine\0", 11), 0) == 0);
            CHECK(c.as.fd3->find("attacker") == std::string::npos);
        }
    // A run that ends takes its environment with it; the sweep takes what is left of gone runs.
    REQUIRE(write_environment_file(gdir, "gone-run", EnvironmentOrigin{1002, "c1", 66}, {"X=1"}, existed) == "");
    g.svc->summarise();
    ServiceFixture::settle();
    CHECK(access((gdir + "/gone-run.environment").c_str(), F_OK) != 0);
    CHECK(access((gdir + "/r1.environment").c_str(), F_OK) == 0);   // a live run's stays
}
