// The user's --shardnet-* options (or their SHARDNET_* env fallbacks),
// checked against the site's plugstack configuration.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/plugstack_config.hpp"

namespace shardnet {

// Each user-facing option: its name without "--", the SHARDNET_* variable
// that stands in for it when the command line does not give it, and help.
enum class Opt { run, ckpt_dir, ckpt_every, heartbeat, resume, requeue, max_attempts, fatal_exit, on_timeout, spares, straggler, count };
struct OptSpec { const char *name; const char *env; const char *arginfo; const char *usage; };
const OptSpec &opt_spec(Opt o);

struct JobOptionsRaw {
    bool enabled = false;
    std::optional<std::string> value[static_cast<int>(Opt::count)];
    std::optional<std::string> &operator[](Opt o) { return value[static_cast<int>(o)]; }
    const std::optional<std::string> &operator[](Opt o) const { return value[static_cast<int>(o)]; }
};

enum class Requeue { federated, local, off };

struct JobOptions {
    std::string run;          // "" until the remote side names it (cluster.jobid)
    std::string ckpt_dir;     // "" until the remote side applies the default
    std::string ckpt_every = "auto";
    int heartbeat = 0;
    std::string resume;       // "", "latest", a checkpoint name or an absolute path
    Requeue requeue = Requeue::federated;
    int max_attempts = 0;     // the run's attempts at most (0: no budget of its own)
    std::vector<int> fatal_exit;   // exit codes that end the run FAILED, never retried (ascending)
    // --shardnet-on-timeout=requeue: a job that reaches its time limit after
    // sealing a checkpoint past the pre-limit signal is requeued from it.
    bool requeue_timeout = false;
    // --shardnet-spares=N: nodes of the job held back for `shard launch`
    // to relaunch the step on when one dies (the world is nodes - N).
    int spares = 0;
    // --shardnet-straggler=replace: `shard launch` swaps a node the broker
    // names a straggler for a spare at the next sealed checkpoint.
    bool replace_stragglers = false;
};

// The most spares a job may hold (a bound, not a recommendation).
constexpr int kMaxSpares = 64;

// "" when value is acceptable for option o under cfg, else the reason.
std::string check_option(Opt o, const std::string &value, const PlugstackConfig &cfg);

// Resolves raw into out; "" on success, else "--shardnet-X=V: reason".
std::string resolve_job_options(const JobOptionsRaw &raw, const PlugstackConfig &cfg, JobOptions &out);

const char *requeue_name(Requeue r);

// --shardnet-fatal-exit: the exit codes (1..255, a comma list of at most
// kMaxFatalExit) that say "do not retry": a rank or batch script ending
// with one ends the run FAILED at once. The codes ascending without
// repeats, or nullopt when v is malformed.
constexpr std::size_t kMaxFatalExit = 16;
std::optional<std::vector<int>> parse_fatal_exit(std::string_view v);
std::string fatal_exit_text(const std::vector<int> &codes);   // "3,7"

}  // namespace shardnet
