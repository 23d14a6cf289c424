// What the agent knows about this node's ranks, and the heartbeat body
// built from it. Pure functions, unit-tested.
#pragma once
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "common/agent_protocol.hpp"

namespace shardnet {

struct RankState {
    unsigned rank = 0;
    unsigned local_rank = 0;
    pid_t pid = 0;
    std::optional<int> wait_status;     // set once the task ended
    std::optional<long long> step;      // last step the trainer wrote
    double progress_time = 0;           // when it wrote it (mtime)
    bool checkpointing = false;         // the trainer says it is writing a checkpoint
    std::string committed;              // the last checkpoint the trainer finished
    std::string reported;               // ... and the last the broker took
    double write_seconds = -1;          // how long the trainer took to write `committed` (-1: not known)
    double ckpt_began = 0;              // mtime of the first "checkpointing" seen since the last commit
    // What the trainer runs with (its library's report, rank-N.env beside
    // the progress file): a JSON object's text, "null" when the trainer
    // reports none, "" while not known yet.
    std::string environment;
    double exit_time = 0;               // when the agent heard of the task's end (wall clock)
};

// The trainer's report of rank's environment from its file (at most
// environment::kMaxFileBytes, checked field by field): the object's JSON
// text. nullopt when there is no file yet; "null" with err set when the
// file is there but not a report (the rank is reported without one).
std::optional<std::string> read_environment_file(const std::string &path, std::string &err);

// The body of POST /v1/runs/RUN/ranks: this node's ranks of the attempt and
// what each runs with, once each is known (doc/receipts.md).
std::string ranks_report_json(const AgentConfig &c, const std::vector<RankState> &ranks);

// The trainer's step from a progress file: "STEP", "STEP checkpointing"
// (while it writes a checkpoint, so that slow writes are not a hang) or
// "STEP committed NAME" (its shards of checkpoint NAME are written, listed
// in NAME/rank-R.manifest). Never follows a symlink, reads 200 bytes.
// "STEP committed NAME took SECONDS": the trainer timed the write (its
// "checkpointing" to "committed"); took is -1 when the line does not say.
std::optional<long long> read_progress(const std::string &path, double *mtime, bool *checkpointing = nullptr,
                                       std::string *committed = nullptr, double *took = nullptr);

// A rank's manifest of checkpoint shards: lines "SHA256 BYTES PATH" (PATH
// relative to the checkpoint). The commit body for the broker, or "" with err.
// write_seconds: how long the rank took to write it (-1: not known).
std::string commit_json(const std::string &manifest_text, unsigned attempt, unsigned rank, unsigned world, std::string &err,
                        double write_seconds = -1);

// state: "running" or "ended". seq counts heartbeats of this agent.
// The names in the broker's answer to GET /v1/runs/RUN/checkpoints (every
// listed checkpoint is sealed), each with its line for the SEALED marker.
// Empty with err set when the answer cannot be read.
struct SealedCheckpoint { std::string name, marker; };
std::vector<SealedCheckpoint> sealed_checkpoints(const std::string &body, std::string &err);

// policy: the checkpoint policy version the agent holds (sent when c.ckpt_auto).
// stderr_tail: the batch script's last lines of standard error, sent with
// its non-zero end ("": none).
std::string heartbeat_json(const AgentConfig &c, const std::vector<RankState> &ranks, const char *state,
                           unsigned long long seq, double now, bool prelimit_signalled, long long policy = 0,
                           const std::string &stderr_tail = "");

// The broker's answer to a heartbeat of an auto job when the policy
// changed: {"policy": {"version", "every_steps", "seconds"}}.
struct PolicyAnswer { long long version = 0, every_steps = 0; double seconds = 0; };
std::optional<PolicyAnswer> parse_policy_answer(const std::string &body, std::string &err);
// The policy file's line for the trainer's library (SHARDNET_CKPT_POLICY):
// "every_steps=N version=V seconds=S".
std::string policy_file_text(const PolicyAnswer &p);

}  // namespace shardnet
