#include "prelimit.hpp"

extern "C" {
#include <slurm/slurm.h>
}

namespace shardnet {

std::time_t job_end_time(unsigned long jobid) {
    static bool initialised = false;
    if (!initialised) {
        slurm_init(nullptr);  // SLURM_CONF from the agent's environment
        initialised = true;
    }
    job_info_msg_t *msg = nullptr;
    if (slurm_load_job(&msg, uint32_t(jobid), SHOW_ALL) != 0 || !msg) return 0;
    std::time_t end = 0;
    if (msg->record_count > 0 && msg->job_array[0].time_limit != INFINITE && msg->job_array[0].time_limit != NO_VAL)
        end = msg->job_array[0].end_time;
    slurm_free_job_info_msg(msg);
    return end;
}

}  // namespace shardnet
