// What the agent asks of Slurm itself: the job's end time (for the signal
// before the limit), its standard error's path (for the tail a failed
// batch script reports) and this node's name within the step's node list.
#pragma once
#include <ctime>
#include <string>

namespace shardnet {

// 0 when the job has no limit or slurmctld could not be asked.
std::time_t job_end_time(unsigned long jobid);

// The job's standard error as Slurm expands it (%j, %u, %x, ...; its
// output file when it has no --error, slurm-%j.out in its working
// directory when neither), absolute; "" when slurmctld could not be asked.
std::string job_stderr_path(unsigned long jobid);

// The nodeid-th host of a Slurm host list ("alpha[1-2]", 1 -> "alpha2");
// "" when the list is malformed or too short.
std::string nth_host(const std::string &nodelist, unsigned nodeid);

}  // namespace shardnet
