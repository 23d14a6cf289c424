// A full, failing or locked database: StoreError says which (and where),
// a handler answers it 503 with Retry-After, nothing of a refused request is
// kept, what was acknowledged before stays, and the broker serves normally
// once there is room again. The database is made full with SQLite's
// max_page_count (Store::limit_pages), as a full disk answers SQLITE_FULL;
// tests/broker/t-broker.sh does the same on a full tmpfs.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <stdexcept>

#include "broker/core/store_answer.hpp"
#include "broker/store/store_error.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet::broker;
using shardnet::broker::testing::ServiceFixture;
namespace json = boost::json;

namespace {

// A commit whose files list is larger than a page: it always needs new pages.
std::string big_commit(int attempt, int rank, int world) {
    std::string files;
    for (int i = 0; i < 60; ++i)
        files += std::string(i ? "," : "") + R"({"path":"shard-)" + std::to_string(i) + "-" + std::string(80, 'p') +
                 R"(","sha256":"00","bytes":1})";
    return R"({"attempt":)" + std::to_string(attempt) + R"(,"rank":)" + std::to_string(rank) + R"(,"world_size":)" +
           std::to_string(world) + R"(,"files":[)" + files + "]}";
}

struct FullFixture : ServiceFixture {
    Store *store = nullptr;   // owned by the service; touched only while its queue is empty
    FullFixture() : ServiceFixture(std::map<std::string, std::string>{}) {
        auto st = std::make_unique<Store>(cfg.database);
        store = st.get();
        svc = std::make_unique<Service>(cfg, std::move(st), ServicePorts{std::make_unique<testing::FakeSlurm>(), peers});
    }
    long long limit(long long pages) {
        svc->drain();
        return store->limit_pages(pages);
    }
};

}  // namespace

TEST_CASE("SQLite's codes sort into full, I/O, busy and other") {
    CHECK(store_fault_of(SQLITE_FULL) == StoreFault::full);
    CHECK(store_fault_of(SQLITE_IOERR) == StoreFault::io);
    CHECK(store_fault_of(SQLITE_IOERR_WRITE) == StoreFault::io);
    CHECK(store_fault_of(SQLITE_IOERR_FSYNC) == StoreFault::io);
    CHECK(store_fault_of(SQLITE_IOERR_SHMSIZE) == StoreFault::io);
    CHECK(store_fault_of(SQLITE_CANTOPEN) == StoreFault::io);
    CHECK(store_fault_of(SQLITE_BUSY) == StoreFault::busy);
    CHECK(store_fault_of(SQLITE_BUSY_SNAPSHOT) == StoreFault::busy);
    CHECK(store_fault_of(SQLITE_LOCKED) == StoreFault::busy);
    CHECK(store_fault_of(SQLITE_CONSTRAINT_PRIMARYKEY) == StoreFault::other);
    CHECK(store_fault_of(SQLITE_CORRUPT) == StoreFault::other);
    CHECK(store_fault_of(SQLITE_ERROR) == StoreFault::other);
    CHECK(std::string(store_fault_name(StoreFault::full)) == "full");
}

TEST_CASE("a store failure's answer: 503 with Retry-After for full, I/O and busy; 500 for anything else") {
    using detail::store_error_response;
    auto full = store_error_response(StoreError("database disk is full: /x.db; ...", SQLITE_FULL));
    CHECK(full.status == 503);
    CHECK(full.retry_after == detail::kRetryFullSeconds);
    CHECK(full.body.find(R"("code":"store_full")") != std::string::npos);
    CHECK(full.body.find("database disk is full: /x.db") != std::string::npos);
    auto io = store_error_response(StoreError("database I/O error: /x.db", SQLITE_IOERR_FSYNC));
    CHECK(io.status == 503);
    CHECK(io.retry_after == detail::kRetryIoSeconds);
    CHECK(io.body.find(R"("code":"store_unavailable")") != std::string::npos);
    auto busy = store_error_response(StoreError("database locked", SQLITE_BUSY));
    CHECK(busy.status == 503);
    CHECK(busy.retry_after == detail::kRetryBusySeconds);
    CHECK(busy.body.find(R"("code":"store_busy")") != std::string::npos);
    auto other = store_error_response(StoreError("UNIQUE constraint failed", SQLITE_CONSTRAINT_PRIMARYKEY));
    CHECK(other.status == 500);
    CHECK(other.retry_after == 0);
    CHECK(other.body.find(R"("code":"store")") != std::string::npos);
    auto plain = store_error_response(std::runtime_error("not a store error"));
    CHECK(plain.status == 500);
    CHECK(plain.retry_after == 0);
}

TEST_CASE("a full database: StoreError names the cause and the path; the transaction is gone; room again, it writes") {
    char tmpl[] = "/tmp/shardnet-store-full-XXXXXX";
    const std::string dir = mkdtemp(tmpl), path = dir + "/b.db";
    {
        Store st(path);
        st.insert_run(RunRow{"kept", "", "PENDING", "{}", 1, 1, 1, 1, -1});
        const long long pages = st.limit_pages(1);   // never below the database's size
        CHECK(pages >= 1);
        const std::string big(64 * 1024, 'm');
        bool threw = false;
        try {
            st.transaction([&] {
                st.insert_run(RunRow{"small", "", "PENDING", "{}", 1, 1, 1, 1, -1});
                st.insert_run(RunRow{"big", "", "PENDING", big, 1, 1, 1, 1, -1});
            });
        } catch (const StoreError &e) {
            threw = true;
            CHECK(e.fault() == StoreFault::full);
            CHECK((e.sqlite_code() & 0xff) == SQLITE_FULL);
            CHECK_MESSAGE(std::string(e.what()).rfind("database disk is full: " + path + ";", 0) == 0, e.what());
            CHECK_MESSAGE(std::string(e.what()).find("inserting run big") != std::string::npos, e.what());
        }
        CHECK(threw);
        auto runs = st.load_runs();
        REQUIRE(runs.size() == 1);   // all or nothing: "small" went with "big"
        CHECK(runs[0].id == "kept");
        st.limit_pages(1 << 30);
        st.transaction([&] { st.insert_run(RunRow{"big", "", "PENDING", big, 1, 1, 1, 1, -1}); });
        CHECK(st.load_runs().size() == 2);
        CHECK(st.integrity_check() == "ok");
    }
    Store again(path);
    CHECK(again.load_runs().size() == 2);
    CHECK(again.integrity_check() == "ok");
    if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) {}
}

TEST_CASE("the database full: commits and creates are 503 store_full, nothing acknowledged is lost") {
    FullFixture f;
    CHECK(f.call("POST", "/v1/runs", R"({"id":"r1"})").status == 201);
    auto r = f.call("POST", "/v1/runs/r1/checkpoints/c0/commit", big_commit(1, 0, 1));
    REQUIRE(r.status == 200);
    f.limit(1);
    for (int i = 1; i <= 3; ++i) {
        r = f.call("POST", "/v1/runs/r1/checkpoints/c" + std::to_string(i) + "/commit", big_commit(1, 0, 1));
        CHECK(r.status == 503);
        CHECK(r.retry_after == detail::kRetryFullSeconds);
        CHECK_MESSAGE(r.body.find(R"("code":"store_full")") != std::string::npos, r.body);
        CHECK_MESSAGE(r.body.find("database disk is full: " + f.cfg.database) != std::string::npos, r.body);
    }
    // A create whose manifest takes new pages, and a new run's first
    // heartbeat that carries one: refused, and not in memory either.
    const std::string manifest = R"({"id":"r2","manifest":{"pad":")" + std::string(20000, 'x') + R"("}})";
    r = f.call("POST", "/v1/runs", manifest);
    CHECK_MESSAGE(r.status == 503, r.body);
    CHECK(f.call("GET", "/v1/runs/r2").status == 404);
    auto cps = boost::json::parse(f.call("GET", "/v1/runs/r1/checkpoints").body).at("checkpoints").as_array();
    REQUIRE(cps.size() == 1);
    CHECK(cps[0].at("name").as_string() == "c0");
    // Room again: normal service.
    f.limit(1 << 30);
    r = f.call("POST", "/v1/runs/r1/checkpoints/c1/commit", big_commit(1, 0, 1));
    CHECK_MESSAGE(r.status == 200, r.body);
    CHECK(f.call("POST", "/v1/runs", manifest).status == 201);
    cps = boost::json::parse(f.call("GET", "/v1/runs/r1/checkpoints").body).at("checkpoints").as_array();
    CHECK(cps.size() == 2);
    f.svc->drain();
    CHECK(f.store->integrity_check() == "ok");
}
