// SPANK entry points. Each one dispatches on spank_context() to the file
// that owns that context: options.cpp (srun/sbatch/salloc and the option
// callbacks), stepd.cpp (slurmstepd). No exception leaves this file:
// every entry point runs through guarded() (guard.hpp).
#include <cstring>

extern "C" {
#include <slurm/spank.h>
}

#include "spank/contexts.hpp"
#include "spank/guard.hpp"
#include "spank/state.hpp"

// SPANK_PLUGIN() spelled out: in C++ a namespace-scope const has internal
// linkage, and Slurm must find these by name.
extern "C" {
extern const char plugin_name[] = "shardnet";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
extern const unsigned int spank_plugin_version = 1;
}

namespace shardnet {
PluginState g;
}

using namespace shardnet;

namespace {

bool in_stepd() { return spank_context() == S_CTX_REMOTE; }
bool in_client() { return spank_context() == S_CTX_LOCAL || spank_context() == S_CTX_ALLOCATOR; }

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char **av) {
    return guarded("init", [&] {
        if (!in_stepd() && !in_client()) return 0;  // slurmd, prolog/epilog: nothing to do
        if (init_config(ac, av) != 0) return -1;
        return register_options(sp);
    });
}

int slurm_spank_init_post_opt(spank_t sp, int, char **) {
    return guarded("init_post_opt", [&] {
        if (!g.cfg) return 0;
        return in_stepd() ? stepd_post_opt(sp) : client_post_opt();
    });
}

int slurm_spank_user_init(spank_t sp, int, char **) {
    return guarded("user_init", [&] { return in_stepd() && g.cfg ? stepd_user_init(sp) : 0; });
}

int slurm_spank_task_init(spank_t sp, int, char **) {
    return guarded("task_init", [&] { return in_stepd() && g.active ? stepd_task_init(sp) : 0; });
}

int slurm_spank_task_post_fork(spank_t sp, int, char **) {
    return guarded("task_post_fork", [&] { return in_stepd() && g.active ? stepd_task_post_fork(sp) : 0; });
}

int slurm_spank_task_exit(spank_t sp, int, char **) {
    return guarded("task_exit", [&] { return in_stepd() && g.active ? stepd_task_exit(sp) : 0; });
}

int slurm_spank_exit(spank_t, int, char **) {
    return guarded("exit", [&] {
        if (in_stepd()) stepd_exit();  // also when inactive: secrets and the progress dir go
        delete g.job;
        delete g.cfg;
        g.job = nullptr;
        g.cfg = nullptr;
        return 0;
    });
}

}  // extern "C"
