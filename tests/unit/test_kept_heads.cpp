// The log heads `shard verify RUN` keeps per broker (sbatch-wrappers/
// kept_heads.hpp): a later head must extend the kept one by an RFC 9162
// consistency proof; smaller is a rollback, unprovable a fork. The file is
// the user's, 0600, in $XDG_STATE_HOME (else ~/.local/state).
#include <cstdlib>
#include <doctest/doctest.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "sbatch-wrappers/kept_heads.hpp"

using namespace shardnet;
using namespace shardnet::cli;

namespace {

merkle::MemoryTree log_of(int n, const std::string &tag = "r") {
    merkle::MemoryTree t;
    for (int i = 0; i < n; ++i) t.append(tag + std::to_string(i));
    return t;
}

KeptHead kept_at(const merkle::MemoryTree &t, unsigned long long size) {
    return KeptHead{"https://beta:8443", "beta", size, merkle::root(size, t.source()), "", "2026-01-01T00:00:00.000Z"};
}

}  // namespace

TEST_CASE("a new head must extend the kept one: rollback and fork fail, naming both sizes and roots") {
    const auto t = log_of(7);
    const KeptHead kept = kept_at(t, 5);
    const auto root7 = merkle::root(7, t.source());
    // Grown: the consistency proof joins them.
    CHECK(check_extends(kept, 7, root7, merkle::consistency_proof(5, 7, t.source()), "broker beta", "F") == "");
    CHECK(check_extends(kept, 5, kept.root, {}, "broker beta", "F") == "");
    // Smaller: rolled back, whatever it proves.
    const std::string back = check_extends(kept, 3, merkle::root(3, t.source()), {}, "broker beta", "F");
    CHECK(back.rfind("broker beta: log rolled back: its log head of size 3 (root " + merkle::hex(merkle::root(3, t.source())) +
                         ") is smaller than the head of size 5 (root " + merkle::hex(kept.root) +
                         ") this CLI verified at 2026-01-01T00:00:00.000Z (kept in F)", 0) == 0);
    CHECK(back.find("--forget-head") != std::string::npos);
    // Another log: the same size with another root, or a larger one the proof does not join.
    const auto other = log_of(7, "x");
    CHECK(check_extends(kept, 5, merkle::root(5, other.source()), {}, "broker beta", "F").find("log forked: its log head of size 5") !=
          std::string::npos);
    const std::string fork = check_extends(kept, 7, merkle::root(7, other.source()), merkle::consistency_proof(5, 7, other.source()),
                                           "broker beta", "F");
    CHECK(fork.find("log forked: its log head of size 7 (root " + merkle::hex(merkle::root(7, other.source())) +
                    ") does not extend the head of size 5 (root " + merkle::hex(kept.root)) != std::string::npos);
    CHECK(fork.find("(the consistency proof fails)") != std::string::npos);
    // The right proof for the wrong root, and no proof at all, fail too.
    CHECK(check_extends(kept, 7, merkle::root(7, other.source()), merkle::consistency_proof(5, 7, t.source()), "b", "F") != "");
    CHECK(check_extends(kept, 7, root7, {}, "b", "F") != "");
}

TEST_CASE("kept heads: one 0600 file per broker URL in $XDG_STATE_HOME/shardnet/heads, written whole") {
    char tmpl[] = "/tmp/shardnet-heads-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const char *saved = std::getenv("XDG_STATE_HOME");
    const std::string before = saved ? saved : "";
    setenv("XDG_STATE_HOME", dir.c_str(), 1);
    std::string err;
    const std::string heads = heads_dir(err);
    CHECK(heads == dir + "/shardnet/heads");
    setenv("XDG_STATE_HOME", "relative/dir", 1);   // not absolute: ignored, as XDG says
    CHECK(heads_dir(err).find("/.local/state/shardnet/heads") != std::string::npos);
    if (saved) setenv("XDG_STATE_HOME", before.c_str(), 1); else unsetenv("XDG_STATE_HOME");

    const std::string a = kept_head_path(heads, "https://beta:8443"), b = kept_head_path(heads, "https://beta:8443/");
    CHECK(a != b);   // two URLs never share a file
    CHECK(a.rfind(heads + "/https___beta_8443-", 0) == 0);
    CHECK(!read_kept_head(a, err));
    CHECK(err == "");
    const auto t = log_of(4);
    KeptHead h = kept_at(t, 4);
    h.head = R"({"payload":"x","payloadType":"t","signatures":[]})";
    REQUIRE(write_kept_head(a, h) == "");
    struct stat st;
    REQUIRE(stat(a.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(stat(heads.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    CHECK(access((a + ".tmp." + std::to_string(getpid())).c_str(), F_OK) != 0);   // renamed into place
    const auto back = read_kept_head(a, err);
    REQUIRE(back);
    CHECK(err == "");
    CHECK(back->size == 4);
    CHECK(back->root == h.root);
    CHECK(back->url == "https://beta:8443");
    CHECK(back->head == h.head);
    // A file that is not a head is said, never read as "nothing kept".
    std::ofstream(b) << "{\"tree_size\": \"many\"}";
    CHECK(!read_kept_head(b, err));
    CHECK(err.find("not a kept log head") != std::string::npos);
    CHECK(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
}
