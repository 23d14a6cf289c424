// How a seal's file list is served and what a commit may put in it
// (checkpoints/sealed_files.cpp, seals/list_cache.hpp, checkpoints/commit.cpp):
// the list is built once per seal and kept (a seal never changes); a
// rank's view is paged like the whole list; a file two ranks committed
// alike is one leaf in both ranks' views, two different files under one
// path are refused; a path has one canonical form.
#include <doctest/doctest.h>
#include <algorithm>

#include "broker/config/config.hpp"
#include "broker/seals/list_cache.hpp"
#include "broker/util/token_gate.hpp"
#include "common/file_list.hpp"
#include "tests/unit/fakes/receipt_fixture.hpp"

using namespace shardnet;
using namespace shardnet::broker;
using namespace shardnet::broker::testing;
using namespace shardnet::broker::testing::receipts_fixture;
namespace json = boost::json;

namespace {

json::object file(const std::string &path, const std::string &content, long long bytes = 10) {
    return json::object{{"path", path}, {"sha256", sha(content)}, {"bytes", bytes}};
}

std::string commit_of(int rank, int world, json::array files) {
    return json::serialize(json::object{{"attempt", 1}, {"rank", rank}, {"world_size", world}, {"files", std::move(files)}});
}

// Every file of the answer is a leaf of its list's root (its proof holds).
void check_proofs(const json::object &answer) {
    const merkle::Hash root = *merkle::from_hex(answer.at("list").at("merkle_root").as_string());
    const uint64_t count = uint64_t(answer.at("list").at("count").as_int64());
    for (const auto &x : answer.at("files").as_array()) {
        file_list::Entry e;
        REQUIRE(file_list::read_entry(x, "files", e) == "");
        std::vector<merkle::Hash> path;
        for (const auto &h : x.at("inclusion").as_array()) path.push_back(*merkle::from_hex(h.as_string()));
        INFO(e.path);
        CHECK(merkle::verify_inclusion(uint64_t(x.at("index").as_int64()), count, file_list::leaf(e), path, root));
    }
}

bool contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

std::vector<std::string> paths_of(const json::object &answer) {
    std::vector<std::string> out;
    for (const auto &x : answer.at("files").as_array()) out.emplace_back(x.at("path").as_string());
    return out;
}

}  // namespace

TEST_CASE("a seal's list is built once and kept: a later request does not read the commits again") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-10/commit", commit_of(0, 1, json::array{file("a.pt", "a"), file("b.pt", "b")}))
                .status == 200);
    const json::object first = f.get("/v1/runs/r1/checkpoints/checkpoint-10/files?rank=0");
    // The commits change under the broker: a list read from them again
    // would show it. The seal's list, kept, does not.
    exec_sql(f.cfg.database, "UPDATE commits SET files = '" + json::serialize(json::array{file("z.pt", "z")}) + "' WHERE run = 'r1'");
    CHECK(f.get("/v1/runs/r1/checkpoints/checkpoint-10/files?rank=0") == first);
    CHECK(paths_of(f.get("/v1/runs/r1/checkpoints/checkpoint-10/files")) == std::vector<std::string>{"a.pt", "b.pt"});
    check_proofs(first);
}

TEST_CASE("the kept lists are bounded: the least recently used goes, one too big is not kept") {
    auto list = [](int n) {
        std::vector<file_list::Entry> es;
        for (int i = 0; i < n; ++i) es.push_back({"f" + std::to_string(i), sha(std::to_string(i)), 1, 0});
        return sealed_list::build(es, {});
    };
    sealed_list::Cache c(2, 10);
    c.put("a", list(3));
    c.put("b", list(3));
    REQUIRE(c.find("a"));   // a is now the most recent
    c.put("c", list(3));
    CHECK(c.find("a"));
    CHECK_FALSE(c.find("b"));
    CHECK(c.find("c"));
    CHECK(c.lists() == 2);
    c.put("d", list(11));   // more files than the cache holds
    CHECK_FALSE(c.find("d"));
    c.put("e", list(8));    // 3 + 3 + 8 > 10: the older ones go
    CHECK(c.files() <= 10);
    CHECK(c.find("e"));
}

TEST_CASE("list requests in flight per token: past the cap none is taken, given back when the answer goes") {
    auto gate = std::make_shared<TokenGate>(2);
    auto a = gate->take("alice"), b = gate->take("alice");
    REQUIRE(a);
    REQUIRE(b);
    CHECK_FALSE(gate->take("alice"));
    CHECK(gate->take("bob"));   // another token's budget is its own
    CHECK(gate->held("alice") == 2);
    a.reset();
    CHECK(gate->held("alice") == 1);
    CHECK(gate->take("alice"));
    BrokerConfig cfg;
    CHECK(cfg.list_requests_per_token == 2);
}

TEST_CASE("a rank's files come a page at a time, like the whole list, each with its proof") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    json::array files;
    for (int i = 0; i < 1500; ++i) files.push_back(file("part-" + std::to_string(10000 + i) + ".pt", std::to_string(i)));
    REQUIRE(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-10/commit", commit_of(0, 1, files)).status == 200);
    std::vector<std::string> all;
    int pages = 0;
    for (long long from = 0;; ++pages) {
        const json::object page = f.get("/v1/runs/r1/checkpoints/checkpoint-10/files?rank=0&limit=400&from=" + std::to_string(from));
        CHECK(page.at("from").as_int64() == from);
        CHECK(page.at("files").as_array().size() <= 400);
        check_proofs(page);
        for (auto &p : paths_of(page)) all.push_back(p);
        if (page.at("next_from").is_null()) break;
        CHECK(page.at("next_from").as_int64() == from + 400);
        from = page.at("next_from").as_int64();
    }
    CHECK(pages == 3);
    CHECK(all.size() == 1500);
    CHECK(all == paths_of(f.get("/v1/runs/r1/checkpoints/checkpoint-10/files")));
    // Past the end: no files, no next page.
    const json::object past = f.get("/v1/runs/r1/checkpoints/checkpoint-10/files?rank=0&from=9999");
    CHECK(past.at("files").as_array().empty());
    CHECK(past.at("next_from").is_null());
}

TEST_CASE("one path committed alike by two ranks is one leaf in both ranks' files; as two different files the seal is refused") {
    ReceiptFixture f;
    f.start();
    REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
    const std::string url = "/v1/runs/r1/checkpoints/checkpoint-10/";
    REQUIRE(f.call("POST", url + "commit", commit_of(0, 2, json::array{file("config.json", "cfg"), file("rank-0.pt", "r0")})).status == 200);
    REQUIRE(f.call("POST", url + "commit", commit_of(1, 2, json::array{file("config.json", "cfg"), file("rank-1.pt", "r1")})).status == 200);
    const json::object r0 = f.get(url + "files?rank=0"), r1 = f.get(url + "files?rank=1");
    CHECK(r0.at("list").at("count").as_int64() == 3);   // config.json is one leaf
    CHECK(paths_of(r0) == std::vector<std::string>{"config.json", "rank-0.pt"});
    CHECK(paths_of(r1) == std::vector<std::string>{"config.json", "rank-1.pt"});
    CHECK(r1.at("files").at(0).at("rank").as_int64() == 1);
    check_proofs(r0);
    check_proofs(r1);

    // The same path as another file: the commit that would seal it is
    // refused, naming the path and both ranks; nothing is sealed.
    const std::string url2 = "/v1/runs/r1/checkpoints/checkpoint-20/";
    REQUIRE(f.call("POST", url2 + "commit", commit_of(0, 2, json::array{file("config.json", "cfg")})).status == 200);
    auto r = f.call("POST", url2 + "commit", commit_of(1, 2, json::array{file("config.json", "other")}));
    CHECK(r.status == 409);
    CHECK(contains(r.body, "file_conflict"));
    CHECK(contains(r.body, "path config.json: rank 0 committed sha256 " + sha("cfg")));
    CHECK(contains(r.body, "rank 1 committed sha256 " + sha("other")));
    CHECK(f.call("GET", url2 + "files").status == 404);
    const auto kinds = f.kinds("r1");
    CHECK(std::count(kinds.begin(), kinds.end(), "checkpoint-sealed") == 1);   // checkpoint-10's only
}

TEST_CASE("a committed path has one canonical form: each alias is refused with a 400 naming the entry") {
    for (bool receipts : {true, false}) {
        ReceiptFixture f;
        if (!receipts) f.cfg.receipts = {};
        f.start();
        REQUIRE(f.beat("r1", 1, "n1", "batch", "c1", 7) == 204);
        for (const char *p : {"./x", "a//b", "a/", "a/./b", "a/../b", "..", "/abs", "a/."}) {
            auto r = f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-10/commit", commit_of(0, 1, json::array{file("ok.pt", "o"), file(p, "x")}));
            INFO(p << " (receipts " << receipts << "): " << r.body);
            CHECK(r.status == 400);
            CHECK(contains(r.body, std::string("files[1].path: ") + p));
        }
        auto twice = f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-10/commit", commit_of(0, 1, json::array{file("x", "1"), file("x", "2")}));
        CHECK(twice.status == 400);
        CHECK(contains(twice.body, "files[1].path: x is listed twice"));
        CHECK(f.call("POST", "/v1/runs/r1/checkpoints/checkpoint-10/commit", commit_of(0, 1, json::array{file("a/b.c/..d", "1")})).status == 200);
    }
    CHECK(file_list::path_error("a/b") == "");
    CHECK(file_list::path_error("a//b").find("canonical") != std::string::npos);
    CHECK(file_list::entry_error({"./a", std::string(64, 'a'), 1}).rfind("path:", 0) == 0);
}
