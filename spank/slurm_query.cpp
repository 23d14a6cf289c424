#include "spank/slurm_query.hpp"
#include "spank/slurm_hostlist.hpp"

#include <cstdlib>

extern "C" {
#include <slurm/slurm.h>
}

namespace shardnet {

namespace {
void init_once() {
    static bool initialised = false;
    if (!initialised) {
        slurm_init(nullptr);  // SLURM_CONF from the agent's environment
        initialised = true;
    }
}
}  // namespace

std::time_t job_end_time(unsigned long jobid) {
    init_once();
    job_info_msg_t *msg = nullptr;
    if (slurm_load_job(&msg, uint32_t(jobid), SHOW_ALL) != 0 || !msg) return 0;
    std::time_t end = 0;
    if (msg->record_count > 0 && msg->job_array[0].time_limit != INFINITE && msg->job_array[0].time_limit != NO_VAL)
        end = msg->job_array[0].end_time;
    slurm_free_job_info_msg(msg);
    return end;
}

std::string job_stderr_path(unsigned long jobid) {
    init_once();
    job_info_msg_t *msg = nullptr;
    if (slurm_load_job(&msg, uint32_t(jobid), SHOW_ALL) != 0 || !msg) return "";
    char buf[4097] = {};
    if (msg->record_count > 0) slurm_get_job_stderr(buf, sizeof buf, &msg->job_array[0]);
    slurm_free_job_info_msg(msg);
    return buf[0] == '/' ? buf : "";
}

std::string nth_host(const std::string &nodelist, unsigned nodeid) {
    hostlist_handle hl = slurm_hostlist_create(nodelist.c_str());
    if (!hl) return "";
    std::string name;
    for (unsigned i = 0; i <= nodeid; ++i) {
        char *h = slurm_hostlist_shift(hl);
        if (!h) { name.clear(); break; }
        if (i == nodeid) name = h;
        std::free(h);
    }
    slurm_hostlist_destroy(hl);
    return name;
}

}  // namespace shardnet
