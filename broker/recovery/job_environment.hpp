// The submitter's environment, as the batch step of attempt 1 saw it: sent
// once by that step's agent, checked, filtered by the site's policy, and
// kept root-only beside the broker's database (never in an API answer or a
// receipt: a digest only). A requeued attempt is submitted with it
// (sbatch --export-file on a descriptor), so its tasks see what attempt 1's
// saw; sbatch's own process never gets it (no SBATCH_* or SLURM_CONF of the
// user's steers the requeue).
#pragma once
#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shardnet::broker {

class Core;
class Store;

// Limits on one job's environment: entries, one entry, all of it.
inline constexpr std::size_t kEnvMaxEntries = 4096, kEnvMaxEntry = 128u << 10, kEnvMaxBytes = 768u << 10;

// Reads a JSON array of "NAME=VALUE" strings into out, whole or not at all:
// "" or why not, naming the entry (a NUL, a bad name, a name twice, sizes).
std::string read_environment(const boost::json::value &list, std::vector<std::string> &out);

// Whether NAME matches one of the patterns (NAME, or PREFIX*); never the
// names that carry sbatch options (step_option_variable, job_options.hpp).
bool environment_dropped(const std::string &name, const std::vector<std::string> &patterns);

// The broker's own directory beside its database (0700, the broker's
// owner; made when missing; a symlink, another owner or a wider mode is
// refused). "" with err when it is not usable.
std::string private_dir(const std::string &database, std::string &err);

// Whose a kept environment is: the run's owner (uid) and the job whose
// batch step sent it (attempt 1's job at this broker, or the job a peer's
// decision made here). A file is replayed only into a job of that owner,
// for a run that job belongs to (environment_belongs).
struct EnvironmentOrigin {
    long long uid = -1;
    std::string cluster;
    long long job = 0;
    bool operator==(const EnvironmentOrigin &) const = default;
};
struct KeptEnvironment {
    EnvironmentOrigin origin;   // uid -1: a file of an earlier version, no origin recorded
    std::string text;           // NUL-terminated NAME=VALUE entries
    std::vector<std::string> entries() const;   // text's entries, one each
};

// A run's kept environment, as NUL-terminated entries after a first record
// that names its origin, mode 0600, written whole (a temporary file renamed
// into place). existed: a file of the same origin was there already (the
// same job's agent sent it again): left as it is. A file of another origin
// (written for another owner or job: a squatted run id) is replaced:
// attempt 1's own environment always wins.
std::string write_environment_file(const std::string &dir, const std::string &run, const EnvironmentOrigin &origin,
                                   const std::vector<std::string> &env, bool &existed);
// nullopt when none was kept (err empty) or it cannot be read (err says why).
std::optional<KeptEnvironment> read_environment_file(const std::string &dir, const std::string &run, std::string &err);
// "" when an environment of origin may be replayed into a job of uid for a
// run whose jobs are these (cluster, job); else why not, naming both.
std::string environment_belongs(const EnvironmentOrigin &origin, long long uid,
                                const std::vector<std::pair<std::string, long long>> &run_jobs);
// Attempt's job as its spec was captured from Slurm (uid as Slurm numbers
// it); nullopt when none is kept. Store thread only.
std::optional<EnvironmentOrigin> spec_origin(Store &store, const std::string &run, long long attempt);
// "" when a kept environment of origin is run's to replay into a job of
// uid (environment_belongs against the run's jobs in memory and attempt
// 1's job as Slurm gave it); else why not. Any thread but the store's.
std::string environment_is_runs(Core &core, const std::string &run, long long uid, const EnvironmentOrigin &origin);
// Whose attempt 1's environment is: the run's owner and attempt 1's job,
// from memory or the spec captured from Slurm. Store thread only.
std::optional<EnvironmentOrigin> first_attempt_origin(Core &core, const std::string &run);
// A kept file of an earlier version (no origin) for a live run: stamped
// with attempt 1's origin when it was written after the run was created
// here (a squatted one is older than the run: the first writer won then),
// else deleted. Store thread only.
void adopt_legacy_environment(Core &core, const std::string &dir, const std::string &run);
// The run ended: its environment (secrets, maybe) is deleted.
void forget_environment_file(const std::string &dir, const std::string &run);
// The runs whose environments are kept in dir (the files' names).
std::vector<std::string> kept_environment_runs(const std::string &dir);

}  // namespace shardnet::broker
