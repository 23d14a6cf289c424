// Per-job worker tokens. The plugin (as root in slurmstepd) derives one from
// the site's worker key and hands only that to the job user's heartbeat
// agent; the broker, holding the same key, checks it without a lookup.
//
// A token binds everything the broker acts on: the run and attempt, and the
// job it was made for, taken in slurmstepd from Slurm's own items (job id,
// the job's uid, the step's task count) and slurmstepd's own configuration
// (the cluster's name), never from the job's environment. A stolen or
// copied token reports for its own job and nothing else: it cannot name
// another user's job, a larger or smaller world, or an attempt the broker
// did not issue to that job (the broker checks the last against its own
// record of what it submitted).
//
//   snw2.<attempt>.<world>.<uid>.<job>.<cluster>.<mac>.<run>
//   mac = hex HMAC-SHA256(key, "shardnet-worker-v2\0" run "\0" attempt "\0"
//                              world "\0" uid "\0" job "\0" cluster)
// Numbers are decimal without leading zeros; cluster is 1-64 of
// [A-Za-z0-9_-]; run is a safe name (common/parse_util.hpp).
#pragma once
#include <string>
#include <string_view>

namespace shardnet {

constexpr std::size_t kMinWorkerKeyBytes = 32;

struct WorkerClaim {
    std::string run;
    unsigned long long attempt = 0;   // 1 or more
    unsigned long long world = 1;     // the step's task count (S_JOB_TOTAL_TASK_COUNT); 1 for a batch step
    unsigned long long uid = 0;       // the job's owner (S_JOB_UID)
    unsigned long long job = 0;       // the Slurm job id (S_JOB_ID)
    std::string cluster;              // the Slurm cluster the job runs on
};

// "" when claim can be put in a token, else what is wrong with it.
std::string worker_claim_error(const WorkerClaim &claim);
bool is_cluster_name(std::string_view s);

// The token for claim (which must be valid: see worker_claim_error).
std::string derive_worker_token(std::string_view key, const WorkerClaim &claim);

// A reader token: the same claim under another prefix and MAC domain
// ("snr2.", "shardnet-reader-v2"), given to the job's tasks (the trainer)
// so that they can read what the broker holds of their own run (the sealed
// digests a resume checks shards against), and nothing else: the broker
// answers it on GET routes only. A task holding it cannot heartbeat,
// commit or report for its job (the agent's token, which the tasks never
// see, does that).
std::string derive_reader_token(std::string_view key, const WorkerClaim &claim);

struct WorkerTokenClaim : WorkerClaim {
    std::string mac_hex;
    bool reader = false;   // "snr2.": a reader token
};
// Splits a token of the form above; false when it is not one (including a
// number that is not in canonical form).
bool parse_worker_token(std::string_view token, WorkerTokenClaim &out);
// True when token is exactly what key derives for its claim (constant time).
bool verify_worker_token(std::string_view key, const WorkerTokenClaim &claim);

// Reads a key file as its owner reads it: the content, trailing newline
// dropped; err names the file and what is wrong (short, unreadable).
std::string read_worker_key(const std::string &path, std::string &err);
// The same for any secret file (tokens too): at least min_bytes, no symlink.
std::string read_secret_file(const std::string &path, std::size_t min_bytes, std::string &err);

}  // namespace shardnet
