// Fuzz target: every POST route body of API v1 through Service::handle, as
// the HTTP server hands requests over, with an admin token. One Service
// for the whole run, on a temporary SQLite file; the config names no
// cluster and no peer, so nothing reaches Slurm or the network. The first
// input byte picks the route (and the run or checkpoint it names), the rest
// is the body. Every request must be answered, exactly once.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <string>
#include <unistd.h>

#include "broker/service.hpp"
#include "tests/fuzz/fuzz_assert.hpp"

using namespace shardnet::broker;

namespace {

struct World {
    std::string dir;
    Service *svc = nullptr;   // kept to the end: its threads outlive any static order
};

World &world() {
    static World *w = [] {
        auto *w = new World;
        char tmpl[] = "/tmp/shardnet-fuzz-routes-XXXXXX";
        const char *d = mkdtemp(tmpl);
        FUZZ_CHECK(d != nullptr, "a temporary directory for the store");
        w->dir = d;
        BrokerConfig cfg;
        cfg.plain_http = true;
        cfg.database = w->dir + "/b.db";
        cfg.rate_per_token = 1e12;
        cfg.rate_burst = 1e12;
        cfg.tokens = {TokenEntry{"ops", sha256_hex("admin-t"), Scope::admin, ""}};
        w->svc = new Service(cfg, std::make_unique<Store>(cfg.database));
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(world().dir, ec);
        });
        return w;
    }();
    return *w;
}

// The runs and checkpoints a route names: a few, so that bodies meet state.
const char *const kRuns[] = {"r1", "r2", "fuzz-run", "x"};
const char *const kCheckpoints[] = {"step-100", "ck"};

struct Answer {
    std::mutex mu;
    std::condition_variable cv;
    int calls = 0;
    unsigned status = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    if (size == 0) return 0;
    World &w = world();
    const unsigned pick = data[0];
    const std::string run = kRuns[(pick >> 3) % 4], ck = kCheckpoints[(pick >> 5) % 2];
    ApiRequest req;
    req.method = "POST";
    req.bearer = "admin-t";
    switch (pick % 6) {
    case 0: req.target = "/v1/heartbeats"; break;
    case 1: req.target = "/v1/nodes"; break;
    case 2: req.target = "/v1/decisions"; break;
    case 3: req.target = "/v1/runs"; break;
    case 4: req.target = "/v1/runs/" + run + "/cancel"; break;
    default: req.target = "/v1/runs/" + run + "/checkpoints/" + ck + "/commit"; break;
    }
    req.body.assign(reinterpret_cast<const char *>(data + 1), size - 1);

    auto answer = std::make_shared<Answer>();
    w.svc->handle(req, [answer](ApiResponse r) {
        std::lock_guard<std::mutex> lock(answer->mu);
        ++answer->calls;
        answer->status = r.status;
        static const bool verbose = std::getenv("FUZZ_VERBOSE") != nullptr;   // what each input got, when replayed by hand
        if (verbose) std::fprintf(stderr, "routes: %u %s\n", r.status, r.body.c_str());
        FUZZ_CHECK(answer->calls == 1, "a request is answered exactly once");
        FUZZ_CHECK(r.status >= 200 && r.status < 600, "an answer has an HTTP status");
        FUZZ_CHECK(r.status != 500, "a request body never makes an internal error");
        answer->cv.notify_all();
    });
    {
        std::unique_lock<std::mutex> lock(answer->mu);
        FUZZ_CHECK(answer->cv.wait_for(lock, std::chrono::seconds(20), [&] { return answer->calls > 0; }),
                   "a request is answered (within 20 s)");
    }
    // Whatever the handler left on the store's thread runs before the next
    // input: a second answer from there is caught with this one's input.
    w.svc->drain();
    return 0;
}
