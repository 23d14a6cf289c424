// A Slurm job as Slurm itself describes it, from `squeue --json` (Slurm's
// OpenAPI data, numbers as numbers). Never from `scontrol show job` text:
// there a job name (which the user chooses) is printed raw before UserId=,
// so `-J 'x UserId=(0)'` could pose as any account.
#pragma once
#include <boost/json/object.hpp>
#include <string>
#include <vector>

namespace shardnet::broker {

struct SlurmJob {
    long long id = 0;
    long long uid = -1, gid = -1;       // numeric, as Slurm resolved them
    std::string user, name, state, cluster;
    std::string workdir, stdout_pattern, stderr_pattern, nodes, batch_host, comment;
    long long node_count = 0, tasks = 0;
    double submit_time = 0;
};

// The squeue arguments whose JSON find_slurm_job reads. Slurm 22.05's
// squeue ignores -j with --json, so the job is looked up in the answer.
// --states=all: 24.11's squeue --json lists only pending and running jobs
// unless asked (22.05's listed every job slurmctld still holds); a job that
// ended is not a job that is gone (doc/slurm-versions.md).
inline const char *const kSqueueJson[] = {"squeue", "--json", "--states=all"};

// What a look-up of a job in squeue's answer found. An answer that cannot
// be read (slurm_json.hpp) is unreadable, never absent: it says nothing
// about the job.
enum class JobLookup { found, absent, unreadable };
struct JobRead {
    JobLookup lookup = JobLookup::unreadable;
    std::string why;   // when not found: why not, naming what
    // Fields of the job's record that were not UTF-8 (raw bytes the job
    // was given), now with U+FFFD in their place: a path among them is not
    // the job's real one.
    std::vector<std::string> not_utf8;
    JobRead() = default;
    JobRead(JobLookup l, std::string w, std::vector<std::string> n = {}) : lookup(l), why(std::move(w)), not_utf8(std::move(n)) {}
    bool found() const { return lookup == JobLookup::found; }
};

// Finds job id in squeue's JSON, of any data_parser version the broker
// reads. record, when given, gets the job's whole object in 22.05's shape
// (its options: job_options.hpp).
JobRead find_slurm_job(const std::string &squeue_json, long long id, SlurmJob &out, boost::json::object *record = nullptr);

// The id of a job in squeue's JSON whose comment is this marker (alone or
// after the user's own words) and owned by uid; 0 when there is none, -1
// (and why) when the answer cannot be read.
long long submitted_for(const std::string &squeue_json, const std::string &comment, long long uid, std::string *why = nullptr);

// The job's output file for the next attempt: Slurm's pattern with what
// names the old job filled in (%j, %A: the old job id; %u; %x; %%), so that
// every attempt writes where the first one did. Slurm's default when the
// job named none: WORKDIR/slurm-JOBID.out.
std::string output_for_next_attempt(const SlurmJob &j);
// The same for the job's --error file ("" when it named none: stderr then
// goes with stdout).
std::string error_for_next_attempt(const SlurmJob &j);

// Why the broker must not submit a job as uid/gid, or "": never root, never
// the cluster's SlurmUser, never a uid below the site's min_uid.
std::string submit_identity_error(long long uid, long long gid, long long min_uid, long long slurm_user_uid);

// A value that becomes one sbatch argument (a path): absolute, no control
// characters, at most 4096 bytes. "" or why not, naming what.
std::string sbatch_path_error(const std::string &what, const std::string &value);

// SlurmUser's uid from `scontrol show config` ("SlurmUser = slurm(64030)"); -1 when absent.
long long slurm_user_uid(const std::string &show_config);

}  // namespace shardnet::broker
