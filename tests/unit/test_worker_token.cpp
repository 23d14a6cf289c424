#include <cstdio>
#include <doctest/doctest.h>
#include <string>
#include <unistd.h>

#include "worker_token.hpp"

using namespace shardnet;

namespace {
const std::string kKey(40, 'k');
}

TEST_CASE("a derived worker token names its run and attempt and verifies with its key only") {
    const std::string t = derive_worker_token(kKey, "beta.42", 3);
    CHECK(t.rfind("snw1.3.", 0) == 0);
    CHECK(t.substr(t.size() - 8) == ".beta.42");
    WorkerTokenClaim c;
    REQUIRE(parse_worker_token(t, c));
    CHECK(c.run == "beta.42");
    CHECK(c.attempt == 3);
    CHECK(verify_worker_token(kKey, c));
    CHECK_FALSE(verify_worker_token(std::string(40, 'x'), c));
    CHECK(derive_worker_token(kKey, "beta.42", 3) == t);   // deterministic
    CHECK(derive_worker_token(kKey, "beta.42", 4) != t);   // per attempt
    CHECK(derive_worker_token(kKey, "beta.43", 3) != t);   // per run
}

TEST_CASE("a worker token with its claim changed does not verify") {
    const std::string t = derive_worker_token(kKey, "r1", 1);
    WorkerTokenClaim c;
    // Another attempt or run under the same MAC.
    std::string other_attempt = "snw1.2." + t.substr(7);
    REQUIRE(parse_worker_token(other_attempt, c));
    CHECK_FALSE(verify_worker_token(kKey, c));
    std::string other_run = t.substr(0, t.size() - 2) + "r2";
    REQUIRE(parse_worker_token(other_run, c));
    CHECK_FALSE(verify_worker_token(kKey, c));
    // Not tokens at all.
    for (const char *bad : {"", "snw1.", "snw1.1.", "snw1.0.abc.r1", "snw2.1.00.r1", "snw1.x.00.r1",
                            "snw1.1.ZZZZ.r1", "worker-t"})
        CHECK_FALSE(parse_worker_token(bad, c));
    std::string bad_run = "snw1.1." + std::string(64, 'a') + "./etc";
    CHECK_FALSE(parse_worker_token(bad_run, c));
}

TEST_CASE("worker key files: short or missing keys are refused by name") {
    char tmpl[] = "/tmp/shardnet-key-XXXXXX";
    int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "short\n", 6) == 6);
    close(fd);
    std::string err;
    CHECK(read_worker_key(tmpl, err).empty());
    CHECK(err.find("at least 32") != std::string::npos);
    CHECK(err.find(tmpl) != std::string::npos);
    FILE *f = std::fopen(tmpl, "w");
    std::fprintf(f, "%s\n", kKey.c_str());
    std::fclose(f);
    err.clear();
    CHECK(read_worker_key(tmpl, err) == kKey);
    CHECK(err.empty());
    unlink(tmpl);
    CHECK(read_worker_key("/nonexistent/key", err).empty());
    CHECK(err.find("/nonexistent/key") != std::string::npos);
}
