// Signed receipts at the broker (broker/receipts/, doc/receipts.md): each
// receipt is written in the transaction of the record it attests, chained
// per run, logged in the Merkle log; the endpoints serve what verifies
// offline (common/receipt_verify), and only to whom may see the run.
#include <algorithm>
#include <doctest/doctest.h>
#include <sqlite3.h>

#include "common/digest.hpp"
#include "common/file_list.hpp"
#include "common/receipt_verify.hpp"
#include "common/tree_head.hpp"
#include "common/worker_token.hpp"
#include "tests/unit/fakes/receipt_fixture.hpp"

using namespace shardnet;
using namespace shardnet::broker;
using namespace shardnet::broker::testing;
namespace json = boost::json;

using namespace shardnet::broker::testing::receipts_fixture;

TEST_CASE("an attempt's receipt waits for its ranks; a seal's commits its files as one Merkle root, listed apart") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    CHECK(f.kinds("r1").empty());   // the attempt's ranks are not in yet
    const std::string env = R"({"python":"3.11.2","torch":"1.13.0","cuda":null,"image_digest":"sha256:)" + std::string(64, 'a') + R"("})";
    auto one = f.call("POST", "/v1/runs/r1/ranks", R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0,"environment":)" + env + "}]}");
    REQUIRE(one.status == 200);
    CHECK(json::parse(one.body) == json::parse(R"({"ranks":1,"of":2})"));
    CHECK(f.kinds("r1").empty());
    // A rank's first report stands: a second one for rank 0 changes nothing.
    CHECK(f.call("POST", "/v1/runs/r1/ranks", R"({"attempt":1,"world_size":2,"node":"n9","ranks":[{"rank":0,"environment":null}]})").status == 200);
    auto two = f.call("POST", "/v1/runs/r1/ranks", R"({"attempt":1,"world_size":2,"node":"n2","ranks":[{"rank":1,"environment":)" + env + "}]}");
    REQUIRE(two.status == 200);
    CHECK(f.kinds("r1") == std::vector<std::string>{"attempt-started"});   // the last rank's report wrote it
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-00000010/commit", commit(1, 0, 2)).status == 200);
    CHECK(f.kinds("r1") == std::vector<std::string>{"attempt-started"});   // a commit alone attests nothing
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-00000010/commit", commit(1, 1, 2)).status == 200);
    const auto res = verified(f.envelopes("r1"), f.key);
    REQUIRE(res.receipts.size() == 2);
    const auto &start = res.receipts[0].receipt;
    CHECK(start.kind == receipt::Kind::attempt_started);
    CHECK(start.body.at("cluster").as_string() == "c1");
    CHECK(start.body.at("job").as_int64() == 7);
    CHECK(start.body.at("world_size").as_int64() == 2);
    CHECK(start.body.at("ranks") == json::parse(R"({"0":"n1","1":"n2"})"));
    REQUIRE(start.body.at("nodes").as_array().size() == 2);
    CHECK(start.body.at("nodes").at(1).at("name").as_string() == "n2");
    // One environment for both ranks; what was not known (cuda) is left out.
    CHECK(start.body.at("environment") ==
          json::parse(R"([{"python":"3.11.2","torch":"1.13.0","image_digest":"sha256:)" + std::string(64, 'a') + R"(","ranks":[0,1]}])"));
    const auto &seal = res.receipts[1].receipt;
    CHECK(seal.kind == receipt::Kind::checkpoint_sealed);
    CHECK(seal.seq == 2);
    CHECK(seal.previous == res.receipts[0].digest);
    CHECK(seal.broker == "alpha");
    CHECK(seal.body.at("checkpoint").as_string() == "checkpoint-00000010");
    CHECK(seal.body.at("step").as_int64() == 10);
    CHECK(seal.body.at("parent").is_null());
    // The files as one Merkle root (common/file_list.hpp), the subject the
    // checkpoint by name; the list is GET .../files and makes that root.
    REQUIRE(seal.subjects.size() == 1);
    CHECK(seal.subjects[0].name == "shardnet:r1/checkpoint/checkpoint-00000010");
    std::vector<file_list::Entry> files{{"rank-0/model.pt", sha("rank-0/model.pt"), 100}, {"rank-1/model.pt", sha("rank-1/model.pt"), 101}};
    const auto want = file_list::summarize(files);
    CHECK(seal.body.at("files") == json::value(file_list::summary_json(want)));
    CHECK(seal.body.at("files").at("count").as_int64() == 2);
    CHECK(seal.body.at("files").at("bytes").as_int64() == 201);
    const json::object listed = f.get("/v1/runs/r1/checkpoints/checkpoint-00000010/files");
    CHECK(listed.at("list") == json::value(file_list::summary_json(want)));
    CHECK(listed.at("receipt").at("seq").as_int64() == 2);
    CHECK(listed.at("receipt").at("digest").as_string() == res.receipts[1].digest);
    const auto list_failures = receipt::verify_checkpoint_list(res.receipts[1], "", [&](uint64_t, std::vector<file_list::Entry> &page, bool &last) {
        for (const auto &x : listed.at("files").as_array()) {
            file_list::Entry e;
            REQUIRE(file_list::read_entry(x, "files", e) == "");
            page.push_back(e);
        }
        last = true;
        return std::string();
    });
    CHECK(list_failures.empty());
    // A file's rank is in the list; its node is the attempt's ranks map's.
    CHECK(listed.at("files").at(1).at("rank").as_int64() == 1);
    // With receipts on, a commit's digest must be one (in-toto's sha256).
    auto bad = f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-00000020/commit",
                      R"({"attempt":1,"rank":0,"world_size":1,"files":[{"path":"x","sha256":"00","bytes":1}]})");
    CHECK(bad.status == 400);
    CHECK(bad.body.find("files[0].sha256: expected 64 lower-case hex digits") != std::string::npos);
    // The public keys: this one, current.
    auto keys = f.call("GET", "/v1/keys", "", "");
    REQUIRE(keys.status == 200);
    const json::value kv = json::parse(keys.body);
    const auto &k = kv.at("keys").as_array().at(0);
    CHECK(k.at("keyid").as_string() == f.key.keyid());
    CHECK(k.at("status").as_string() == "current");
    CHECK(k.at("receipts").as_int64() == 2);
}

TEST_CASE("a ranks' report is checked field by field; an attempt that ends before its ranks report still starts first") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    auto post = [&](const std::string &body) { return f.call("POST", "/v1/runs/r1/ranks", body); };
    const std::pair<std::string, std::string> bad[] = {
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0,"environment":{"torch":"1.13","shell":"x"}}]})", "ranks[0].environment.shell: unknown field"},
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0,"environment":{"torch":"1.13\n"}}]})", "ranks[0].environment.torch: expected 1-128 printable"},
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0,"environment":{"torch":")" + std::string(129, 'x') + R"("}}]})", "ranks[0].environment.torch: expected 1-128"},
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0,"environment":{"torch":7}}]})", "ranks[0].environment.torch: expected a string or null"},
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0,"environment":"x"}]})", "ranks[0].environment: expected an object"},
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":2}]})", "ranks[0].rank: this attempt has 2 ranks"},
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0},{"rank":0}]})", "ranks[1].rank: rank 0 twice"},
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0,"pid":5}]})", "ranks[0].pid: unknown field"},
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[]})", "ranks: expected 1-1024"},
        {R"({"attempt":1,"world_size":2,"node":"n1/x","ranks":[{"rank":0}]})", "node: 1-128 of [A-Za-z0-9._-]"},
        {R"({"attempt":1,"world_size":2,"node":"n1\u202e","ranks":[{"rank":0}]})", "node: 1-128 of [A-Za-z0-9._-]"},
        {R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0}],"extra":1})", "extra: unknown field"},
        {R"({"attempt":"1","world_size":2,"node":"n1","ranks":[{"rank":0}]})", "attempt: expected an integer"},
        {R"([1,2])", "body is not a JSON object"},
    };
    for (const auto &[body, why] : bad) {
        auto r = post(body);
        INFO(body << " -> " << r.body);
        CHECK(r.status == 400);
        CHECK(r.body.find(why) != std::string::npos);
    }
    auto stale = post(R"({"attempt":2,"world_size":2,"node":"n1","ranks":[{"rank":0}]})");
    CHECK(stale.status == 409);
    CHECK(f.call("POST", "/v1/runs/nope/ranks", R"({"attempt":1,"world_size":1,"node":"n1","ranks":[{"rank":0}]})").status == 404);
    CHECK(f.call("POST", "/v1/runs/r1/ranks", R"({"attempt":1,"world_size":1,"node":"n1","ranks":[{"rank":0}]})", "alice-t").status == 403);
    CHECK(f.kinds("r1").empty());   // nothing of the refused reports was kept
    // Rank 0 reports, rank 1 never does; the batch script ends: the start,
    // with the one rank known, comes before the end.
    CHECK(post(R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0,"environment":null}]})").status == 200);
    CHECK(f.call("POST", "/v1/heartbeats",
                 R"({"run":"r1","attempt":1,"node":"n1","step":"batch","cluster":"c1","job":7,"state":"ended","ranks":[{"rank":0,"exit":{"code":0,"signal":null}}]})")
              .status == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "SUCCEEDED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.kinds("r1") == std::vector<std::string>{"attempt-started", "attempt-ended", "run-ended"});
    const auto res = verified(f.envelopes("r1"), f.key);
    CHECK(res.receipts[0].receipt.body.at("ranks") == json::parse(R"({"0":"n1"})"));
    CHECK(res.receipts[0].receipt.body.at("environment").as_array().empty());
}

TEST_CASE("one chain: heartbeat, seal, FAULT, requeue as attempt 2, seal, the end") {
    ReceiptFixture f({{"c1", kConf}});
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        FakeSlurm::Job j;
        j.id = 7;
        j.nodes = "n1,n2";
        j.batch_host = "n1";
        j.node_count = j.tasks = 2;
        f.slurm->jobs[kConf][7] = j;
        f.slurm->nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "IDLE"}, {"n4", "IDLE"}};
    }
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n1", "0", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-1/commit", commit(1, 0, 1)).status == 200);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n2"] = "DOWN*";
        f.slurm->dead_slurmd.insert("n2");
    }
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RECOVERING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    REQUIRE(f.beat("r1", 2, "n3", "batch", "c1", 100) == 204);
    REQUIRE(f.beat("r1", 2, "n3", "0", "c1", 100) == 204);
    REQUIRE(f.beat("r1", 2, "n4", "0", "c1", 100) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-2/commit", commit(2, 0, 1)).status == 200);
    CHECK(f.call("POST", "/v1/heartbeats",
                 R"({"run":"r1","attempt":2,"node":"n3","step":"batch","cluster":"c1","job":100,"state":"ended","ranks":[{"rank":0,"exit":{"code":0,"signal":null}}]})")
              .status == 204);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "SUCCEEDED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    std::string listed;
    for (const auto &k : f.kinds("r1")) listed += k + " ";
    INFO(listed);
    CHECK(f.kinds("r1") == std::vector<std::string>{"attempt-started", "checkpoint-sealed", "attempt-ended", "attempt-started",
                                                     "checkpoint-sealed", "attempt-ended", "run-ended"});
    const auto res = verified(f.envelopes("r1"), f.key);
    REQUIRE(res.receipts.size() == 7);
    const auto &fault = res.receipts[2].receipt;
    CHECK(fault.body.at("how").as_string() == "fault");
    CHECK(fault.body.at("evidence").at("node").as_string() == "n2/0");
    const auto &second = res.receipts[3].receipt;
    CHECK(second.attempt == 2);
    CHECK(second.body.at("job").as_int64() == 100);
    CHECK(second.body.at("cause").at("decision").as_string() == "alpha:r1/attempt-2");
    CHECK(second.body.at("nodes").as_array().size() == 2);   // the placement's n3, n4
    CHECK(res.receipts[4].receipt.body.at("parent").as_string() == "checkpoint-1");
    CHECK(res.receipts[5].receipt.body.at("exit_codes").as_array().at(0).as_int64() == 0);
    CHECK(res.receipts[6].receipt.body.at("state").as_string() == "SUCCEEDED");
    // Dropping one breaks the chain (verify_chain's own tests cover the rest).
    auto envs = f.envelopes("r1");
    envs.erase(envs.begin() + 3);
    CHECK_FALSE(receipt::verify_chain(envs, {f.key}).failures.empty());
}

TEST_CASE("an in-job restart is signed in the attempt's chain: attempt-restarted names the dead node and the spare") {
    ReceiptFixture f({{"c1", kConf}});
    f.start();
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        FakeSlurm::Job j;
        j.id = 7, j.nodes = "n1,n2,n3", j.batch_host = "n1", j.node_count = j.tasks = 3;
        f.slurm->jobs[kConf][7] = j;
        f.slurm->nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "ALLOCATED"}};
    }
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n2", "0", "c1", 7) == 204);
    REQUIRE(f.beat("r1", 1, "n3", "0", "c1", 7) == 204);
    REQUIRE(ServiceFixture::until([&] { return f.slurm->count("scontrol", "show") >= 1; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    REQUIRE(f.call("POST", "/v1/runs/r1/restarts", R"({"kind":"supervising","attempt":1,"spares":1,"nodes":["n2","n3"]})").status == 200);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->nodes[kConf]["n2"] = "DOWN*";
        f.slurm->dead_slurmd.insert("n2");
    }
    f.tick_ahead(10);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "DEGRADED"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    REQUIRE(f.call("POST", "/v1/runs/r1/restarts",
                   R"({"kind":"restarted","attempt":1,"restart":1,"dead":["n2"],"took":["n1"],"nodes":["n1","n3"],"spares":0,"relaunch_seconds":0.4,"ended_step":"0"})")
                .status == 200);
    REQUIRE(ServiceFixture::until([&] { return f.state("r1") == "RUNNING"; }));
    ServiceFixture::settle();   // what the awaited change started is written too
    std::string listed;
    for (const auto &k : f.kinds("r1")) listed += k + " ";
    INFO(listed);
    CHECK(f.kinds("r1") == std::vector<std::string>{"attempt-started", "attempt-ended", "attempt-restarted"});
    const auto res = verified(f.envelopes("r1"), f.key);
    REQUIRE(res.receipts.size() == 3);
    const auto &r = res.receipts[2].receipt;
    CHECK(r.attempt == 1);
    CHECK(r.body.at("restart").as_int64() == 1);
    CHECK(r.body.at("dead").as_array() == json::array{"n2"});
    CHECK(r.body.at("took").as_array() == json::array{"n1"});
    CHECK(r.body.at("relaunch_seconds").as_double() == doctest::Approx(0.4));
}

TEST_CASE("a store failure mid-seal keeps neither the seal nor its receipt; the log is unchanged") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    CHECK(f.call("POST", "/v1/runs/r1/ranks", R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0},{"rank":1}]})").status == 200);
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-1/commit", commit(1, 0, 2)).status == 200);
    const long long size = f.get("/v1/log/head").at("tree_size").as_int64();
    // The seal's row is in; its receipt's insert fails (as a disk error would).
    f.svc->drain();
    exec_sql(f.cfg.database, "CREATE TRIGGER fail_seal BEFORE INSERT ON receipts WHEN NEW.kind = 'checkpoint-sealed' "
                             "BEGIN SELECT RAISE(ABORT, 'disk error standing in'); END;");
    auto r = f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-1/commit", commit(1, 1, 2));
    CHECK(r.status == 500);
    CHECK(f.get("/v1/runs/r1/checkpoints").at("checkpoints").as_array().empty());
    CHECK(f.kinds("r1") == std::vector<std::string>{"attempt-started"});
    CHECK(f.get("/v1/log/head").at("tree_size").as_int64() == size);
    // The database full as the seal is written: 503, and again nothing of it.
    f.svc->drain();
    exec_sql(f.cfg.database, "DROP TRIGGER fail_seal");
    std::string big = R"({"attempt":1,"rank":1,"world_size":2,"files":[)";
    for (int i = 0; i < 60; ++i)
        big += std::string(i ? "," : "") + R"({"path":"shard-)" + std::to_string(i) + std::string(80, 'p') + R"(","sha256":")" +
               sha(std::to_string(i)) + R"(","bytes":1})";
    big += "]}";
    {
        // The limit is the connection's: the service restarted on a Store
        // this test holds (as tests/unit/test_broker_store_full.cpp does).
        f.svc.reset();
        auto st = std::make_unique<Store>(f.cfg.database);
        Store *store = st.get();
        f.svc = std::make_unique<Service>(f.cfg, std::move(st), ServicePorts{std::make_unique<FakeSlurm>(), f.peers});
        f.svc->drain();
        store->limit_pages(1);
        r = f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-1/commit", big);
        CHECK_MESSAGE(r.status == 503, r.body);
        CHECK(f.get("/v1/runs/r1/checkpoints").at("checkpoints").as_array().empty());
        CHECK(f.kinds("r1") == std::vector<std::string>{"attempt-started"});
        f.svc->drain();
        store->limit_pages(1 << 30);
    }
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-1/commit", commit(1, 1, 2)).status == 200);
    CHECK(f.kinds("r1") == std::vector<std::string>{"attempt-started", "checkpoint-sealed"});
    verified(f.envelopes("r1"), f.key);
    CHECK(f.get("/v1/log/head").at("tree_size").as_int64() == size + 1);
}

TEST_CASE("the log's head and proofs from the endpoints verify; bad parameters are 400 naming them") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    for (int i = 1; i <= 3; ++i)
        CHECK(f.call("POST", "/v1/runs/r1/checkpoints/c" + std::to_string(i) + "/commit", commit(1, 0, 1)).status == 200);
    const auto first = f.get("/v1/log/head");
    const receipt::TreeHead h1 = head_of(first.at("head"), f.key);
    CHECK(h1.tree_size == 4);
    CHECK(f.get("/v1/log/head").at("head") == first.at("head"));   // not signed again: the log did not grow
    REQUIRE(f.beat("r2", 1, "n2", "batch", "c1", 8) == 204);
    for (int i = 1; i <= 4; ++i)
        CHECK(f.call("POST", "/v1/runs/r2/checkpoints/c" + std::to_string(i) + "/commit", commit(1, 0, 1)).status == 200);
    const receipt::TreeHead h2 = head_of(f.get("/v1/log/head").at("head"), f.key);
    CHECK(h2.tree_size == 9);
    for (const std::string run : {"r1", "r2"}) {
        const json::object list = f.get("/v1/runs/" + run + "/receipts");
        for (const auto &r : list.at("receipts").as_array()) {
            dsse::Envelope e;
            REQUIRE(dsse::from_json_value(r.at("envelope"), e) == "");
            const long long index = r.at("log_index").as_int64();
            const auto p = f.get("/v1/log/proof/inclusion?index=" + std::to_string(index) + "&size=9");
            const merkle::Hash leaf = merkle::leaf_hash(dsse::to_json(e));
            CHECK(merkle::hex(leaf) == p.at("leaf_hash").as_string());
            std::vector<merkle::Hash> path;
            for (const auto &x : p.at("path").as_array()) path.push_back(hash(x));
            CHECK_MESSAGE(merkle::verify_inclusion(uint64_t(index), 9, leaf, path, h2.root_hash), run << " leaf " << index);
            CHECK(receipt::envelope_digest(e) == r.at("digest").as_string());
        }
    }
    // Every size's proof from the earlier head, and the signed heads with it.
    const auto c = f.get("/v1/log/proof/consistency?first=4&second=9");
    std::vector<merkle::Hash> path;
    for (const auto &x : c.at("path").as_array()) path.push_back(hash(x));
    CHECK(merkle::verify_consistency(4, 9, h1.root_hash, h2.root_hash, path));
    CHECK(head_of(c.at("first_head"), f.key).tree_size == 4);
    for (long long m = 1; m < 9; ++m) {
        const auto cm = f.get("/v1/log/proof/consistency?first=" + std::to_string(m) + "&second=9");
        CHECK(cm.at("path").as_array().size() > 0);
    }
    struct Bad { std::string q, field; };
    for (const Bad &b : {Bad{"/v1/log/proof/inclusion?size=9", "index"}, Bad{"/v1/log/proof/inclusion?index=x&size=9", "index"},
                         Bad{"/v1/log/proof/inclusion?index=9&size=9", "index"}, Bad{"/v1/log/proof/inclusion?index=0&size=10", "size"},
                         Bad{"/v1/log/proof/inclusion?index=0&size=0", "size"}, Bad{"/v1/log/proof/consistency?first=5&second=4", "first"},
                         Bad{"/v1/log/proof/consistency?first=1", "second"}, Bad{"/v1/log/proof/consistency?first=1&second=99", "second"}}) {
        auto r = f.call("GET", b.q);
        CAPTURE(b.q);
        CHECK(r.status == 400);
        CHECK_MESSAGE(r.body.find(R"("field":")" + b.field + "\"") != std::string::npos, r.body);
    }
}

TEST_CASE("a run's receipts: its owner and admins; another user, an unrelated peer and no token get nothing") {
    ReceiptFixture f;
    f.start();
    CHECK(f.call("POST", "/v1/runs", R"({"id":"mine","world_size":1})", "alice-t").status == 201);
    REQUIRE(f.beat("mine", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.call("POST", "/v1/runs/mine/ranks", R"({"attempt":1,"world_size":1,"node":"n1","ranks":[{"rank":0}]})").status == 200);
    const auto owned = f.get("/v1/runs/mine/receipts", "alice-t");
    REQUIRE(owned.at("receipts").as_array().size() == 1);
    const auto start = verified(f.envelopes("mine"), f.key).receipts.at(0).receipt;
    CHECK(start.body.at("owner").at("user").as_string() == "daemon");
    auto other = f.call("GET", "/v1/runs/mine/receipts", "", "bob-t");
    CHECK(other.status == 404);
    CHECK(other.body.find("no_run") != std::string::npos);
    CHECK(f.call("GET", "/v1/runs/mine/receipts", "", "peer-t").status == 404);   // never moved to or from it
    // A refused decision for the run (its user unknown here), whatever
    // sender it names, grants the peer nothing (the review found it did).
    for (const char *from : {"beta-broker", "alpha"}) {
        auto r = f.call("POST", "/v1/decisions", std::string(R"({"id":"x-)") + from + R"(","from_broker":")" + from +
                        R"(","run":"mine","to_attempt":2,"spec":{"user":"nosuchuser"},"script":"#!/bin/sh\n","owner":"","resume":"latest"})", "peer-t");
        CHECK(r.status == 409);
        CHECK(f.call("GET", "/v1/runs/mine/receipts", "", "peer-t").status == 404);
    }
    CHECK(f.call("GET", "/v1/runs/mine/receipts", "", "worker-t").status == 403);
    CHECK(f.call("GET", "/v1/runs/mine/receipts", "", "").status == 401);
    CHECK(f.call("GET", "/v1/runs/nope/receipts", "", "alice-t").status == 404);
}

TEST_CASE("without a receipts key the broker signs nothing and says how to turn it on") {
    ServiceFixture f(std::map<std::string, std::string>{});
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    CHECK(f.call("POST", "/v1/runs/r1/checkpoints/c1/commit", R"({"attempt":1,"rank":0,"world_size":1,"files":[{"path":"x","sha256":"00","bytes":1}]})")
              .status == 200);
    for (const std::string path : {"/v1/keys", "/v1/runs/r1/receipts", "/v1/log/head", "/v1/log/proof/inclusion?index=0&size=1"}) {
        auto r = f.call("GET", path);
        CAPTURE(path);
        CHECK(r.status == 404);
        CHECK(r.body.find("no_receipts") != std::string::npos);
        CHECK(r.body.find("\\\"receipts\\\"") != std::string::npos);
    }
}

TEST_CASE("a peer's decision carries the sender's receipt: the chain goes on from it, and that peer may read it") {
    ReceiptFixture f({{"c1", kConf}});
    f.start([](FakeSlurm &s) { s.nodes[kConf] = {{"n1", "IDLE"}, {"n2", "IDLE"}}; });
    // As beta would send it: its chain for the run ended at seq 3.
    const SigningKey beta = test_key('b');
    const std::string digest = sha("beta's receipt 3");
    auto payload = [&](const std::string &receipt_json) {
        return R"({"id":"beta:mv/attempt-2","from_broker":"beta-broker","run":"mv","from_attempt":1,"to_attempt":2,"spec":{"user":"daemon","nodes":1,"tasks":1},"script":"#!/bin/sh\n","owner":"daemon","resume":"latest")" +
               receipt_json + "}";
    };
    auto bad = f.call("POST", "/v1/decisions", payload(R"(,"receipt":{"seq":3,"digest":"zz"})"), "peer-t");
    CHECK(bad.status == 400);
    CHECK(bad.body.find("receipt.digest") != std::string::npos);
    bad = f.call("POST", "/v1/decisions", payload(R"(,"receipt":{"seq":0,"digest":")" + digest + "\"}"), "peer-t");
    CHECK(bad.status == 400);
    auto r = f.call("POST", "/v1/decisions", payload(R"(,"receipt":{"seq":3,"digest":")" + digest + "\"}"), "peer-t");
    REQUIRE_MESSAGE(r.status == 200, r.body);
    CHECK(f.get("/v1/runs/mv/receipts").at("receipts").as_array().empty());   // until its ranks report
    REQUIRE(f.call("POST", "/v1/runs/mv/ranks", R"({"attempt":2,"world_size":1,"node":"n1","ranks":[{"rank":0}]})").status == 200);
    const auto rs = f.get("/v1/runs/mv/receipts").at("receipts").as_array();
    REQUIRE(rs.size() == 1);
    dsse::Envelope e;
    REQUIRE(dsse::from_json_value(rs[0].at("envelope"), e) == "");
    receipt::Receipt got;
    REQUIRE(receipt::parse_statement(e.payload, got) == "");
    CHECK(got.seq == 4);
    CHECK(got.previous == digest);
    CHECK(got.attempt == 2);
    CHECK(got.body.at("cause").at("from_broker").as_string() == "beta-broker");
    CHECK(got.body.at("cause").at("from_receipt").as_string() == digest);
    CHECK(got.body.at("owner").at("user").as_string() == "daemon");
    CHECK_FALSE(got.body.at("cause").as_object().contains("user"));
    // The peer it came from reads it (its token is named as the sender).
    CHECK(f.call("GET", "/v1/runs/mv/receipts", "", "peer-t").status == 200);
}

TEST_CASE("a run's receipts page by page, each with its inclusion proof against one signed head") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    for (int i = 1; i <= 7; ++i)
        REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/c" + std::to_string(i) + "/commit", commit(1, 0, 1)).status == 200);
    // attempt-started (flushed by the first seal) and 7 seals: 8 receipts, pages of 3.
    std::vector<long long> seqs;
    long long size = 0;
    std::string root;
    for (long long after = 0, pages = 0;; ++pages) {
        REQUIRE(pages < 5);
        std::string path = "/v1/runs/r1/receipts?proofs=1&limit=3" + (after ? "&after=" + std::to_string(after) : "") +
                           (size ? "&size=" + std::to_string(size) : "");
        const auto page = f.get(path);
        const auto &log = page.at("log").as_object();
        if (!size) {
            size = log.at("tree_size").as_int64();
            root = std::string(log.at("root_hash").as_string());
            CHECK(head_of(log.at("head"), f.key).tree_size == (unsigned long long)size);
            // The log grows between pages (r1's own 9th receipt, another run's): later
            // pages still prove against the first page's head, and end where it does.
            REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/c8/commit", commit(1, 0, 1)).status == 200);
            REQUIRE(f.beat("r2", 1, "n2", "batch", "c1", 8) == 204);
            REQUIRE(f.call("POST", "/v1/runs/r2/checkpoints/x/commit", commit(1, 0, 1)).status == 200);
        }
        CHECK(log.at("tree_size").as_int64() == size);
        CHECK(log.at("root_hash").as_string() == root);
        const auto &rs = page.at("receipts").as_array();
        CHECK(rs.size() <= 3);
        for (const auto &r : rs) {
            seqs.push_back(r.at("seq").as_int64());
            const auto &in = r.at("inclusion");
            std::vector<merkle::Hash> path_hashes;
            for (const auto &p : in.at("path").as_array()) path_hashes.push_back(hash(p));
            CHECK(merkle::verify_inclusion(uint64_t(r.at("log_index").as_int64()), uint64_t(size), hash(in.at("leaf_hash")), path_hashes,
                                           *merkle::from_hex(root)));
            // The leaf is the envelope's (RFC 9162: SHA-256(0x00 || bytes)).
            dsse::Envelope e;
            REQUIRE(dsse::from_json_value(r.at("envelope"), e) == "");
            CHECK(merkle::hex(merkle::leaf_hash(dsse::to_json(e))) == in.at("leaf_hash").as_string());
        }
        if (page.at("next_after").is_null()) break;
        after = page.at("next_after").as_int64();
    }
    CHECK(seqs == std::vector<long long>{1, 2, 3, 4, 5, 6, 7, 8});   // not the 9th, logged after the head
    // Without proofs: every receipt, no log part; bad parameters name themselves.
    CHECK_FALSE(f.get("/v1/runs/r1/receipts").contains("log"));
    CHECK(f.get("/v1/runs/r1/receipts").at("receipts").as_array().size() == 9);
    for (const std::string q : {"limit=0", "limit=6000", "after=-1", "proofs=yes", "size=3", "proofs=1&size=999", "proofs=1&size=2",
                                "proofs=1&limit=2000"}) {
        auto r = f.call("GET", "/v1/runs/r1/receipts?" + q);
        CAPTURE(q);
        CAPTURE(r.body);
        CHECK(r.status == 400);
    }
}

TEST_CASE("a reload rotates the signing key: new receipts by the new key, the old one listed as retired, after a restart too") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/c1/commit", commit(1, 0, 1)).status == 200);
    const SigningKey fresh = test_key('n');
    BrokerConfig next = f.cfg;
    next.receipts.key = fresh;
    f.svc->reload(next);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/c2/commit", commit(1, 0, 1)).status == 200);
    auto keys_now = [&] {
        std::map<std::string, std::string> out;
        const json::object listed = f.get("/v1/keys", "");   // kept: the loop reads into it
        for (const auto &k : listed.at("keys").as_array()) out[std::string(k.at("keyid").as_string())] = k.at("status").as_string();
        return out;
    };
    CHECK(keys_now() == std::map<std::string, std::string>{{f.key.keyid(), "retired"}, {fresh.keyid(), "current"}});
    // The chain verifies across the rotation with both public keys, and not with the new one alone.
    const auto res = receipt::verify_chain(f.envelopes("r1"), {f.key, fresh});
    CHECK(res.failures.empty());
    REQUIRE(res.receipts.size() == 3);
    CHECK(res.receipts[1].keyid == f.key.keyid());
    CHECK(res.receipts[2].keyid == fresh.keyid());
    CHECK_FALSE(receipt::verify_chain(f.envelopes("r1"), {fresh}).failures.empty());
    // Receipts cannot be turned off by a reload: they keep being signed.
    BrokerConfig off = next;
    off.receipts.key = SigningKey{};
    f.svc->reload(off);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/c3/commit", commit(1, 0, 1)).status == 200);
    CHECK(f.kinds("r1").size() == 4);
    // Restarted with only the new key configured: the old one is still listed (its public half was kept).
    f.svc.reset();
    f.cfg.receipts.key = fresh;
    f.start();
    CHECK(keys_now() == std::map<std::string, std::string>{{f.key.keyid(), "retired"}, {fresh.keyid(), "current"}});
}

TEST_CASE("a job's ranks' report names only its own Slurm nodes; Slurm silent is 503, to be sent again") {
    ReceiptFixture f({{"c1", kConf}});
    const std::string wkey(32, 'w');
    f.cfg.worker_keys = {WorkerKey{"site", "/k", wkey}};
    f.start([](FakeSlurm &s) {
        FakeSlurm::Job j;
        j.id = 7, j.uid = 1, j.nodes = "n1,n2", j.batch_host = "n1", j.node_count = 2, j.tasks = 2;
        s.jobs[kConf][7] = j;
        s.nodes[kConf] = {{"n1", "ALLOCATED"}, {"n2", "ALLOCATED"}, {"n3", "IDLE"}};
    });
    const std::string t = derive_worker_token(wkey, WorkerClaim{"rj", 1, 2, 1, 7, "c1"});
    const std::string hbody = R"({"run":"rj","attempt":1,"node":"n1","step":"0","interval":1,"state":"running","ranks":[{"rank":0,"step":1}]})";
    REQUIRE(f.call("POST", "/v1/heartbeats", hbody, t).status == 204);
    // n3 is the cluster's, not the job's: the job cannot sign itself onto it.
    auto r = f.call("POST", "/v1/runs/rj/ranks", R"({"attempt":1,"world_size":2,"node":"n3","ranks":[{"rank":0}]})", t);
    CHECK(r.status == 403);
    CHECK(r.body.find("node n3 is not one of job c1/7's nodes") != std::string::npos);
    CHECK(f.call("POST", "/v1/runs/rj/ranks", R"({"attempt":1,"world_size":2,"node":"n1","ranks":[{"rank":0}]})", t).status == 200);
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        f.slurm->jobs[kConf].clear();   // squeue no longer lists it (as when slurmctld is away)
    }
    r = f.call("POST", "/v1/runs/rj/ranks", R"({"attempt":1,"world_size":2,"node":"n2","ranks":[{"rank":1}]})", t);
    CHECK(r.status == 503);
    CHECK(f.kinds("rj").empty());
    {
        std::lock_guard<std::mutex> lock(f.slurm->mu);
        FakeSlurm::Job j;
        j.id = 7, j.uid = 1, j.nodes = "n1,n2", j.batch_host = "n1", j.node_count = 2, j.tasks = 2;
        f.slurm->jobs[kConf][7] = j;
    }
    CHECK(f.call("POST", "/v1/runs/rj/ranks", R"({"attempt":1,"world_size":2,"node":"n2","ranks":[{"rank":1}]})", t).status == 200);
    const auto res = verified(f.envelopes("rj"), f.key);
    REQUIRE(res.receipts.size() == 1);
    CHECK(res.receipts[0].receipt.body.at("ranks") == json::parse(R"({"0":"n1","1":"n2"})"));
}

TEST_CASE("a commit kept before receipts were on never blocks its seal: the receipt names what it cannot attest") {
    ReceiptFixture f;
    f.cfg.receipts.key = SigningKey{};   // first without receipts: a commit without a real digest is taken
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-00000005/commit",
                   R"({"attempt":1,"rank":0,"world_size":2,"files":[{"path":"rank-0.pt","sha256":"00","bytes":1}]})").status == 200);
    f.svc.reset();
    f.cfg.receipts.key = f.key;          // restarted signing receipts
    f.start();
    auto r = f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-00000005/commit", commit(1, 1, 2));
    REQUIRE(r.status == 200);
    CHECK(json::parse(r.body).at("sealed").as_bool());
    // The attempt began before receipts: its start is not attested, the seal is.
    const auto res = verified(f.envelopes("r1"), f.key);
    REQUIRE(res.receipts.size() == 1);
    const auto &seal = res.receipts[0].receipt;
    CHECK(seal.kind == receipt::Kind::checkpoint_sealed);
    CHECK(seal.body.at("files").at("count").as_int64() == 1);   // rank 1's file only
    CHECK(seal.body.at("unattested_files") == json::parse(R"({"count":1,"files":[{"path":"rank-0.pt","rank":0}]})"));
}
