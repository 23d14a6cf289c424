// The heartbeat body, read in one pass with Boost.JSON's SAX parser: the
// hot path takes only the fields it uses and builds no DOM (a DOM parse was
// a quarter of the broker's instructions per heartbeat).
#pragma once
#include <bitset>
#include <optional>
#include <string>
#include <string_view>

namespace shardnet::broker {

// The strings are views: into the body read (a JSON string as written, the
// usual case), or into the decoded copies the body keeps of strings that had
// escapes. Valid while both the body text and this object live; not copied.
struct HeartbeatBody {
    std::string_view run, node, step, cluster, requeue = "federated", state = "running", ckpt_dir, ckpt_every;
    long long attempt = 0, interval = 10, job = 0;
    std::size_t ranks = 0;                   // entries of "ranks"
    std::optional<long long> top_step;       // highest ranks[].step
    bool checkpointing = false;              // any ranks[].checkpointing
    std::optional<long long> exit_code, exit_signal;  // ranks[0].exit
    // The rank of this report that failed first (a non-zero code or a
    // signal), by the time its agent heard of it: who a FAILED run names.
    struct RankExit {
        long long rank = -1;
        std::optional<long long> code, signal;
        double time = 0;   // 0: the agent did not say
        bool failed() const { return (code && *code != 0) || (signal && *signal != 0); }
    };
    std::optional<RankExit> first_failure;
    // The checkpoint policy version the agent's trainer has (0: none yet);
    // present only for a job with --shardnet-ckpt-every=auto.
    std::optional<long long> policy;
    long long max_attempts = 0;   // the job's --shardnet-max-attempts (batch step; 0: none)
    // The job's --shardnet-fatal-exit (every step says it): bit c set for
    // exit code c (1..255). fatal_failure: this report's earliest failed
    // rank whose exit code is one of them.
    std::bitset<256> fatal_exit;
    std::optional<RankExit> fatal_failure;
    // The batch script's last lines of standard error (its end's report):
    // the job's own text, at most kMaxStderrTail bytes and lines, UTF-8,
    // no control characters but newline and tab.
    static constexpr std::size_t kMaxStderrTail = 4096, kMaxStderrLines = 10;
    std::string_view stderr_tail;
    // The job's --shardnet-on-timeout=requeue (the batch step says it), and
    // whether the step's agent has sent the pre-limit signal to its ranks.
    bool requeue_timeout = false, prelimit_signalled = false;
    // The job's --shardnet-spares and --shardnet-straggler=replace (the batch step says them).
    long long spares = 0;
    bool replace_stragglers = false;

    HeartbeatBody() = default;
    HeartbeatBody(const HeartbeatBody &) = delete;
    HeartbeatBody &operator=(const HeartbeatBody &) = delete;
    std::string decoded[9];   // backing of the views of escaped strings, one per field
};

struct BodyError {
    std::string code;     // bad_json or bad_field
    std::string field;    // the field, for bad_field
    std::string message;  // "attempt: expected an integer"
};

// True when body is a well-formed heartbeat; else err says what is wrong.
bool read_heartbeat(std::string_view body, HeartbeatBody &out, BodyError &err);

}  // namespace shardnet::broker
