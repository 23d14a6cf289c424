// Per-run, per-attempt worker tokens. The plugin (as root in slurmstepd)
// derives one from the site's worker key and hands only that to the job
// user's heartbeat agent; the broker, holding the same key, checks it
// without a lookup. A stolen agent token reports for its own run and
// attempt and nothing else, and an older attempt's token is fenced.
//
//   snw1.<attempt>.<hex HMAC-SHA256(key, "shardnet-worker\0" run "\0" attempt)>.<run>
#pragma once
#include <string>
#include <string_view>

namespace shardnet {

constexpr std::size_t kMinWorkerKeyBytes = 32;

std::string derive_worker_token(std::string_view key, std::string_view run, unsigned long long attempt);

struct WorkerTokenClaim {
    std::string run;
    unsigned long long attempt = 0;
    std::string mac_hex;
};
// Splits a token of the form above; false when it is not one.
bool parse_worker_token(std::string_view token, WorkerTokenClaim &out);
// True when token is exactly what key derives for its claim (constant time).
bool verify_worker_token(std::string_view key, const WorkerTokenClaim &claim);

// Reads a key file as its owner reads it: the content, trailing newline
// dropped; err names the file and what is wrong (short, unreadable).
std::string read_worker_key(const std::string &path, std::string &err);
// The same for any secret file (tokens too): at least min_bytes, no symlink.
std::string read_secret_file(const std::string &path, std::size_t min_bytes, std::string &err);

}  // namespace shardnet
