// A seal's file list at the broker (checkpoints/sealed_files.cpp,
// common/file_list.hpp): served a rank at a time with proofs, or whole by
// pages; a receipt's size does not grow with the files; and a store of the
// previous version (receipts that list every file as a subject, no roots)
// upgrades: its receipts still verify, its lists are served, new seals
// commit roots.
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "broker/seals/carried.hpp"
#include "broker/store/store.hpp"
#include "common/file_list.hpp"
#include "tests/unit/fakes/receipt_fixture.hpp"

using namespace shardnet;
using namespace shardnet::broker;
using namespace shardnet::broker::testing;
using namespace shardnet::broker::testing::receipts_fixture;
namespace json = boost::json;

namespace {

// Rank 0 commits n files to name (world 1): the seal.
std::string many_files(int n, const std::string &name) {
    json::array files;
    for (int i = 0; i < n; ++i) {
        const std::string p = "rank-0/part-" + std::to_string(i) + ".pt";
        files.push_back(json::object{{"path", p}, {"sha256", sha(name + p)}, {"bytes", i}});
    }
    return json::serialize(json::object{{"attempt", 1}, {"rank", 0}, {"world_size", 1}, {"files", std::move(files)}});
}

std::size_t receipt_bytes(ReceiptFixture &f, const std::string &run, const std::string &checkpoint) {
    for (const auto &e : f.envelopes(run)) {
        receipt::Receipt r;
        REQUIRE(receipt::parse_statement(e.payload, r) == "");
        if (r.kind == receipt::Kind::checkpoint_sealed && r.body.at("checkpoint").as_string() == checkpoint) return dsse::to_json(e).size();
    }
    FAIL("no receipt of " << checkpoint);
    return 0;
}

}  // namespace

TEST_CASE("a seal's receipt is the same size for 3 files or 2,000; the list comes by pages and makes its root") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-1/commit", many_files(3, "checkpoint-1")).status == 200);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-2/commit", many_files(2000, "checkpoint-2")).status == 200);
    const std::size_t small = receipt_bytes(f, "r1", "checkpoint-1"), big = receipt_bytes(f, "r1", "checkpoint-2");
    MESSAGE("seal receipt: 3 files " << small << " bytes, 2,000 files " << big << " bytes");
    CHECK(big < small + 64);   // the count and bytes are a few digits longer
    // The list a page at a time, each page starting where the last ended.
    std::vector<file_list::Entry> all;
    json::value list;
    for (long long from = 0;;) {
        const json::object page = f.get("/v1/runs/r1/checkpoints/checkpoint-2/files?from=" + std::to_string(from) + "&limit=700");
        CHECK(page.at("from").as_int64() == from);
        list = page.at("list");
        for (const auto &x : page.at("files").as_array()) {
            file_list::Entry e;
            REQUIRE(file_list::read_entry(x, "files", e) == "");
            all.push_back(e);
        }
        if (page.at("next_from").is_null()) break;
        from = page.at("next_from").as_int64();
    }
    REQUIRE(all.size() == 2000);
    CHECK(json::value(file_list::summary_json(file_list::summarize(all))) == list);
    // A rank's files, each with its inclusion proof against that root.
    const json::object r0 = f.get("/v1/runs/r1/checkpoints/checkpoint-2/files?rank=0");
    const merkle::Hash root = *merkle::from_hex(r0.at("list").at("merkle_root").as_string());
    REQUIRE(r0.at("files").as_array().size() == 2000);
    for (const auto &x : r0.at("files").as_array()) {
        file_list::Entry e;
        REQUIRE(file_list::read_entry(x, "files", e) == "");
        std::vector<merkle::Hash> path;
        for (const auto &h : x.at("inclusion").as_array()) path.push_back(hash(h));
        REQUIRE(merkle::verify_inclusion(x.at("index").as_int64(), 2000, file_list::leaf(e), path, root));
    }
    // Bad parameters: 400 naming them.
    for (const char *q : {"?rank=-1", "?rank=x", "?from=-5", "?limit=0", "?limit=20001"}) {
        auto r = f.call("GET", std::string("/v1/runs/r1/checkpoints/checkpoint-2/files") + q);
        INFO(q << ": " << r.body);
        CHECK(r.status == 400);
    }
    CHECK(f.call("GET", "/v1/runs/r1/checkpoints/checkpoint-2/files?rank=1").status == 404);   // no_rank
    CHECK(f.call("GET", "/v1/runs/r1/checkpoints/checkpoint-9/files").status == 404);          // no_checkpoint
}

TEST_CASE("a store of the previous version upgrades: its receipts listing every file still verify, its lists are served, new seals commit roots") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-00000010/commit", commit(1, 0, 2)).status == 200);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-00000010/commit", commit(1, 1, 2)).status == 200);
    auto envs = f.envelopes("r1");
    REQUIRE(envs.size() == 2);
    receipt::Receipt now;
    REQUIRE(receipt::parse_statement(envs[1].payload, now) == "");
    f.svc.reset();
    // What the previous broker signed for that seal: every file a subject,
    // with its size, rank and node; no body.files.
    receipt::Receipt old = now;
    old.body.erase("files");
    // (Each file's content is its path, so that the files below are what it sealed.)
    old.subjects = receipt::shard_subjects({{"rank-0/model.pt", sha("rank-0/model.pt"), 15, 0, "n1"},
                                            {"rank-1/model.pt", sha("rank-1/model.pt"), 15, 1, "n1"}});
    dsse::Envelope env;
    REQUIRE(receipt::sign_receipt(f.key, old, env) == "");
    const std::string bytes = dsse::to_json(env);
    // The store as that version left it: schema 14, the old receipt in the
    // seal's place and in its log (rebuilt over the envelopes), no heads.
    std::string sql = "UPDATE receipts SET envelope = '" + bytes + "', digest = '" + receipt::envelope_digest(env) +
                      "' WHERE run = 'r1' AND seq = 2; DELETE FROM log_nodes; DELETE FROM tree_heads; "
                      "DROP TABLE sealed_lists; DROP TABLE carried_seals; PRAGMA user_version = 14;";
    merkle::MemoryTree log;
    log.append(dsse::to_json(envs[0]));
    log.append(bytes);
    const auto src = log.source();
    for (const auto &[level, i, h] : {std::tuple{0, 0, src.leaf(0)}, std::tuple{0, 1, src.leaf(1)}, std::tuple{1, 0, *src.perfect(1, 0)}})
        sql += "INSERT INTO log_nodes (level, idx, hash) VALUES (" + std::to_string(level) + ", " + std::to_string(i) + ", x'" + merkle::hex(h) + "');";
    exec_sql(f.cfg.database, sql);
    f.start();   // migration 15 runs on the old store
    // The old receipt verifies as it always did: chain, signature, log, and its files on disk.
    const auto res = verified(f.envelopes("r1"), f.key);
    REQUIRE(res.receipts.size() == 2);
    CHECK(res.receipts[1].receipt.subjects.size() == 2);
    CHECK_FALSE(receipt::sealed_list(res.receipts[1].receipt));
    const json::object page = f.get("/v1/runs/r1/receipts?proofs=1");
    const receipt::TreeHead head = head_of(page.at("log").at("head"), f.key);
    for (const auto &r : page.at("receipts").as_array()) {
        std::vector<merkle::Hash> path;
        for (const auto &h : r.at("inclusion").at("path").as_array()) path.push_back(hash(h));
        CHECK(merkle::verify_inclusion(r.at("log_index").as_int64(), head.tree_size, hash(r.at("inclusion").at("leaf_hash")), path, head.root_hash));
    }
    const auto dir = std::filesystem::path(f.dir) / "checkpoint-00000010";
    for (const std::string p : {"rank-0/model.pt", "rank-1/model.pt"}) {
        std::filesystem::create_directories((dir / p).parent_path());
        std::ofstream(dir / p) << p;
    }
    CHECK(receipt::verify_checkpoint_files(res.receipts[1], dir.string()).empty());
    std::ofstream(dir / "rank-1/model.pt") << "changed";
    const auto changed = receipt::verify_checkpoint_files(res.receipts[1], dir.string());
    REQUIRE(changed.size() == 2);
    CHECK(changed[0].what.find("size mismatch for shard rank-1/model.pt") != std::string::npos);
    // Its files are served as before, without a root (none was recorded).
    const json::object files = f.get("/v1/runs/r1/checkpoints/checkpoint-00000010/files?rank=1");
    CHECK(files.at("list").is_null());
    REQUIRE(files.at("files").as_array().size() == 1);
    CHECK_FALSE(files.at("files").at(0).as_object().contains("inclusion"));
    CHECK(files.at("files").at(0).at("sha256").as_string() == sha("rank-1/model.pt"));
    // A seal after the upgrade commits its root.
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-00000020/commit", commit(1, 0, 2)).status == 200);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-00000020/commit", commit(1, 1, 2)).status == 200);
    const auto after = verified(f.envelopes("r1"), f.key);
    REQUIRE(after.receipts.size() == 3);
    CHECK(receipt::sealed_list(after.receipts[2].receipt)->count == 2);
    CHECK_FALSE(f.get("/v1/runs/r1/checkpoints/checkpoint-00000020/files").at("list").is_null());
}

TEST_CASE("what a decision carries: the newest two seals, newest first; one whose commits no longer make its recorded root, or too big, is left out") {
    char tmpl[] = "/tmp/shardnet-carried-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    Store store(dir + "/b.db");
    auto seal = [&](const std::string &name, double at, int files, const std::string &parent) {
        json::array fs;
        std::vector<file_list::Entry> entries;
        for (int i = 0; i < files; ++i) {
            const std::string p = "part-" + std::to_string(i);
            fs.push_back(json::object{{"path", p}, {"sha256", sha(name + p)}, {"bytes", i}});
            entries.push_back({p, sha(name + p), (unsigned long long)i, 0});
        }
        store.seals().insert_commit("r1", 1, name, 0, json::serialize(fs), at, -1);
        store.seals().seal_checkpoint(CheckpointRow{"r1", name, 1, 1, parent, at, -1});
        file_list::sort(entries);
        const auto sum = file_list::summarize(entries);
        store.seals().put_sealed_list("r1", name, Store::SealedListRow{merkle::hex(sum.root), (long long)sum.count, (long long)sum.bytes, 3, sha(name)});
    };
    seal("checkpoint-10", 10, 2, "");
    seal("checkpoint-20", 20, 3, "checkpoint-10");
    seal("checkpoint-30", 30, 4, "checkpoint-20");
    std::vector<std::string> left;
    json::array out = carried::outgoing(store, "r1", "alpha", left);
    REQUIRE(out.size() == 2);
    CHECK(left.empty());
    CHECK(out[0].at("name").as_string() == "checkpoint-30");
    CHECK(out[0].at("receipt").at("seq").as_int64() == 3);
    CHECK(out[1].at("name").as_string() == "checkpoint-20");
    // What it sends reads back as a peer reads it.
    std::vector<carried::Seal> back;
    CHECK(carried::read(out, back) == "");
    REQUIRE(back.size() == 2);
    CHECK(back[0].files.size() == 4);
    // checkpoint-30's commit changed in the store after its seal: not passed on as sealed.
    store.seals().insert_commit("r1", 1, "checkpoint-30", 0, R"([{"path":"part-0","sha256":")" + sha("forged") + R"(","bytes":0}])", 31, -1);
    out = carried::outgoing(store, "r1", "alpha", left);
    REQUIRE(left.size() == 1);
    CHECK(left[0] == "checkpoint-30: its commits no longer make the root its seal recorded");
    REQUIRE(out.size() == 2);
    CHECK(out[0].at("name").as_string() == "checkpoint-20");
    CHECK(out[1].at("name").as_string() == "checkpoint-10");
    // A seal of more files than a decision carries is left out, named.
    seal("checkpoint-40", 40, int(carried::kMaxSentFiles) + 1, "checkpoint-30");
    left.clear();
    out = carried::outgoing(store, "r1", "alpha", left);
    REQUIRE(left.size() == 2);
    CHECK(left[0] == "checkpoint-40: 2049 files would pass the 2048 a decision carries");
    CHECK(out.at(0).at("name").as_string() == "checkpoint-20");
    // ... and so is one whose list would pass the bytes a decision carries
    // (long paths): the decision stays inside a peer's body limit.
    // (No list recorded for it: as a seal made before roots were kept.)
    json::array fs;
    for (int i = 0; i < 200; ++i) {
        const std::string p = std::string(2000, 'p') + std::to_string(i);
        fs.push_back(json::object{{"path", p}, {"sha256", sha(p)}, {"bytes", 1}});
    }
    store.seals().insert_commit("r1", 1, "checkpoint-50", 0, json::serialize(fs), 50, -1);
    store.seals().seal_checkpoint(CheckpointRow{"r1", "checkpoint-50", 1, 1, "checkpoint-40", 50, -1});
    left.clear();
    out = carried::outgoing(store, "r1", "alpha", left);
    REQUIRE(left.size() == 3);
    CHECK(left[0].find("checkpoint-50: its list (") == 0);
    CHECK(left[0].find("bytes) would pass the 393216 bytes a decision carries") != std::string::npos);
    CHECK(json::serialize(out).size() <= carried::kMaxSentBytes);
    if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) {}
}
