// The job's end time, asked of slurmctld, for the signal before the limit.
#pragma once
#include <ctime>

namespace shardnet {

// 0 when the job has no limit or slurmctld could not be asked.
std::time_t job_end_time(unsigned long jobid);

}  // namespace shardnet
