#include <cstdio>
#include <doctest/doctest.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "common/worker_token.hpp"

using namespace shardnet;

namespace {
const std::string kKey(40, 'k');
}

namespace {
WorkerClaim claim(const std::string &run = "beta.42", unsigned long long attempt = 3) {
    return WorkerClaim{run, attempt, 2, 1001, 42, "beta"};
}
}  // namespace

TEST_CASE("a derived worker token names its run, attempt, world, uid, job and cluster and verifies with its key only") {
    const std::string t = derive_worker_token(kKey, claim());
    CHECK(t.rfind("snw2.3.2.1001.42.beta.", 0) == 0);
    CHECK(t.substr(t.size() - 8) == ".beta.42");
    WorkerTokenClaim c;
    REQUIRE(parse_worker_token(t, c));
    CHECK(c.run == "beta.42");
    CHECK(c.attempt == 3);
    CHECK(c.world == 2);
    CHECK(c.uid == 1001);
    CHECK(c.job == 42);
    CHECK(c.cluster == "beta");
    CHECK(verify_worker_token(kKey, c));
    CHECK_FALSE(verify_worker_token(std::string(40, 'x'), c));
    CHECK(derive_worker_token(kKey, claim()) == t);   // deterministic
    CHECK(derive_worker_token(kKey, claim("beta.42", 4)) != t);   // per attempt
    CHECK(derive_worker_token(kKey, claim("beta.43")) != t);   // per run
    WorkerClaim other = claim();
    other.uid = 1002;
    CHECK(derive_worker_token(kKey, other) != t);   // per user
    other = claim();
    other.job = 43;
    CHECK(derive_worker_token(kKey, other) != t);   // per job
}

TEST_CASE("a worker token with any part of its claim changed does not verify") {
    const std::string t = derive_worker_token(kKey, claim("r1", 1));   // snw2.1.2.1001.42.beta.<mac>.r1
    WorkerTokenClaim c;
    REQUIRE(parse_worker_token(t, c));
    REQUIRE(verify_worker_token(kKey, c));
    const std::string mac_and_run = t.substr(t.size() - 67);
    for (const char *head : {"snw2.2.2.1001.42.beta.", "snw2.1.1.1001.42.beta.", "snw2.1.2.0.42.beta.", "snw2.1.2.1001.41.beta.",
                             "snw2.1.2.1001.42.alpha."}) {
        CAPTURE(head);
        REQUIRE(parse_worker_token(head + mac_and_run, c));
        CHECK_FALSE(verify_worker_token(kKey, c));
    }
    std::string other_run = t.substr(0, t.size() - 2) + "r2";
    REQUIRE(parse_worker_token(other_run, c));
    CHECK_FALSE(verify_worker_token(kKey, c));
    // Not tokens at all, or not in canonical form (one token, one spelling).
    const std::string mac(64, 'a');
    for (std::string bad : {std::string(""), std::string("snw2."), std::string("worker-t"),
                            "snw1.1." + mac + ".r1",                       // the old, unbound form
                            "snw2.01.2.1001.42.beta." + mac + ".r1",       // leading zero
                            "snw2.1.2.01001.42.beta." + mac + ".r1",
                            "snw2.0.2.1001.42.beta." + mac + ".r1",        // attempt 0
                            "snw2.1.0.1001.42.beta." + mac + ".r1",        // world 0
                            "snw2.1.2.1001.0.beta." + mac + ".r1",         // job 0
                            "snw2.1.2.4294967296.42.beta." + mac + ".r1",  // past uint32
                            "snw2.1.2.1001.42.be/ta." + mac + ".r1",       // not a cluster name
                            "snw2.1.2.1001.42.." + mac + ".r1",
                            "snw2.1.2.1001.42.beta." + std::string(64, 'A') + ".r1",
                            "snw2.1.2.1001.42.beta." + mac + "./etc",
                            "snw2.1.2.1001.42.beta." + mac + "."}) {
        CAPTURE(bad);
        CHECK_FALSE(parse_worker_token(bad, c));
    }
    CHECK(worker_claim_error(WorkerClaim{"r1", 1, 1, 0, 1, "c\nurl=x"}).find("cluster") != std::string::npos);
    CHECK(worker_claim_error(WorkerClaim{"../x", 1, 1, 0, 1, "c"}).find("run") != std::string::npos);
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
    // Readable by others: any job's user could derive any token.
    REQUIRE(chmod(tmpl, 0644) == 0);
    err.clear();
    CHECK(read_worker_key(tmpl, err).empty());
    CHECK(err.find("mode 0644") != std::string::npos);
    REQUIRE(chmod(tmpl, 0600) == 0);
    err.clear();
    CHECK(read_worker_key(tmpl, err) == kKey);
    CHECK(err.empty());
    unlink(tmpl);
    CHECK(read_worker_key("/nonexistent/key", err).empty());
    CHECK(err.find("/nonexistent/key") != std::string::npos);
}

TEST_CASE("a reader token carries the same claim under its own prefix and MAC: neither kind passes as the other") {
    const WorkerClaim claim{"run-1", 2, 4, 1001, 77, "alpha"};
    const std::string reader = derive_reader_token(kKey, claim), agent = derive_worker_token(kKey, claim);
    CHECK(reader.rfind("snr2.2.4.1001.77.alpha.", 0) == 0);
    WorkerTokenClaim r, a;
    REQUIRE(parse_worker_token(reader, r));
    REQUIRE(parse_worker_token(agent, a));
    CHECK(r.reader);
    CHECK_FALSE(a.reader);
    CHECK((r.run == claim.run && r.attempt == 2 && r.world == 4 && r.uid == 1001 && r.job == 77 && r.cluster == "alpha"));
    CHECK(verify_worker_token(kKey, r));
    CHECK(verify_worker_token(kKey, a));
    CHECK(r.mac_hex != a.mac_hex);
    // The agent's MAC under the reader's prefix, and the other way round.
    std::string swapped = agent;
    swapped.replace(0, 5, "snr2.");
    WorkerTokenClaim s;
    REQUIRE(parse_worker_token(swapped, s));
    CHECK_FALSE(verify_worker_token(kKey, s));
    swapped = reader;
    swapped.replace(0, 5, "snw2.");
    REQUIRE(parse_worker_token(swapped, s));
    CHECK_FALSE(verify_worker_token(kKey, s));
    CHECK_FALSE(verify_worker_token(std::string(40, 'x'), r));
}
