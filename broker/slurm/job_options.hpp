// The options that shaped a job, as Slurm recorded them (squeue --json),
// kept with its spec so that every later attempt is submitted with them:
// attempt N is the job that was submitted. One table maps each kept option
// to its sbatch flag; a spec from a peer is checked against the same table.
#pragma once
#include <boost/json/object.hpp>
#include <string>
#include <vector>

namespace shardnet::broker {

// Reads the options of one job object of squeue --json into opts (option
// name -> value, as sbatch takes it) and names in uncarried what a requeue
// cannot carry ("dependency afterok:12", "array task 3 of job 40", ...).
// The requeue's own marker is taken out of the user's comment.
void read_job_options(const boost::json::object &job, boost::json::object &opts, std::vector<std::string> &uncarried);

// The sbatch arguments for opts ("--partition=gpu", "--exclusive", ...).
// An option that is unknown or malformed (a peer's spec is untrusted) is
// never used: named in dropped when given (the requeue goes on without
// it), else the answer is empty and err names it.
std::vector<std::string> sbatch_options(const boost::json::object &opts, std::string &err, std::vector<std::string> *dropped = nullptr);

// Options that sbatch hands only to the batch script's environment, for
// the srun steps in it (Slurm's record does not show them):
// SLURM_DISTRIBUTION (--distribution), SLURM_MEM_BIND and
// SLURM_MEM_BIND_VERBOSE (--mem-bind). They are the user's options, not
// Slurm's values for one job: a site's environment policy keeps them.
bool step_option_variable(const std::string &name);
// Takes them out of a kept environment (NUL-terminated entries) and answers
// their sbatch arguments; a malformed value is named in not_carried.
std::vector<std::string> step_options(std::string &environment, std::vector<std::string> &not_carried);

// The requeue's marker in a job's comment: the user's words, then this.
inline constexpr const char *kDecisionMarker = "shardnet-decision:";
// The comment a requeued job is submitted with: the user's, then the marker.
std::string comment_with_marker(const std::string &user_comment, const std::string &decision);
// The user's part of a comment (the marker, if any, taken out).
std::string user_comment(const std::string &comment);

}  // namespace shardnet::broker
