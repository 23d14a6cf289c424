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

// A run's kept environment: written once (the first attempt's stands), as
// NUL-separated entries, mode 0600. read: nullopt when none was kept.
std::string write_environment_file(const std::string &dir, const std::string &run, const std::vector<std::string> &env, bool &existed);
std::optional<std::string> read_environment_file(const std::string &dir, const std::string &run, std::string &err);
// The run ended: its environment (secrets, maybe) is deleted.
void forget_environment_file(const std::string &dir, const std::string &run);

}  // namespace shardnet::broker
