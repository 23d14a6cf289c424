// The step's environment as files in its progress dir: the job's, for a
// requeued attempt, and a --container task's, for shardnet-oci-run.
#include "spank/step_env.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

extern "C" {
#include <slurm/slurm.h>
}

#include "common/oci_runtime.hpp"
#include "spank/state.hpp"

namespace shardnet {

namespace {

bool has_container(spank_t sp) {
    char buf[PATH_MAX];
    return spank_getenv(sp, "SLURM_CONTAINER", buf, sizeof buf) == ESPANK_SUCCESS && buf[0];
}

// ENV (NAME=VALUE entries) as a file of NUL-separated entries, 0600, made
// here (never one that was there). False when too large or not written.
bool write_env_file(char **env, const std::string &path) {
    std::string text;
    for (char **e = env; *e; ++e) {
        text += *e;
        text += '\0';
        if (text.size() > (768u << 10)) return false;
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    if (!ok) ::unlink(path.c_str());
    ::close(fd);
    return ok;
}

}  // namespace

// The batch script's environment as Slurm gives it (the submitter's, as
// sbatch exported it), for the broker to replay into a later attempt: a
// file of NUL-separated NAME=VALUE entries in the step's progress dir, made
// as the job's user (we run with its euid here), which the agent sends
// once. Nothing of it is read or judged here; too large, it is not saved.
void save_job_environment(spank_t sp) {
    char **env = nullptr;
    if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env || !g.progress_dir[0]) return;
    if (!write_env_file(env, std::string(g.progress_dir) + "/job.environment"))
        slurm_info("shardnet: the job's environment was not saved (over 768 KiB?); a requeued attempt will not get it");
}

namespace {

// The slurm.conf beside the oci.conf slurmstepd reads here, as sure as the
// plugin can be of it: the site's oci_conf= (plugstack.conf), else
// $SLURM_CONF (slurmd exports it in configless mode and when started with
// it), else /etc/slurm/slurm.conf when that exists; "" when it cannot tell.
std::string node_slurm_conf() {
    if (!g.cfg->oci_conf.empty()) return g.cfg->oci_conf.substr(0, g.cfg->oci_conf.rfind('/') + 1) + "slurm.conf";
    if (const char *e = std::getenv("SLURM_CONF"); e && *e == '/') return e;
    struct stat st;
    return ::stat("/etc/slurm/slurm.conf", &st) == 0 ? "/etc/slurm/slurm.conf" : "";
}

}  // namespace

// A --container task (Slurm's OCI support, doc/containers.md): Slurm 22.05
// starts it with the environment it wrote into the step's config.json before
// any plugin ran, so none of the contract set here reaches it, and
// SLURM_PROCID and the like are the step's, not the task's. The task's whole
// environment goes to a file in the progress dir (made as the job user), and
// its path to oci.conf's RunTimeRun command (shardnet-oci-run), which Slurm
// starts from this very process with this process's own environment (not
// the task's): shardnet-oci-run writes it into the task's own copy of the
// bundle's config.json.
// False (the task fails, the reason on its stderr) when the step has a
// container and its environment cannot go there: its ranks would all see
// SLURM_PROCID=0 and no SHARDNET_RANK.
bool export_container_env(spank_t sp, uint32_t local) {
    if (!has_container(sp)) return true;
    // A node with no usable oci.conf: Slurm 22.05 logs "OCI Container not
    // configured" and starts the task on the host, outside the image it
    // pinned. Not started, saying why (the probe's descriptor keeps such a
    // node out of placement; this is for every other way here).
    if (const std::string conf = node_slurm_conf(); !conf.empty()) {
        const OciSupport oci = discover_oci(conf);
        if (oci.known && !oci.ready) {
            dprintf(2, "shardnet: error: this node runs no containers (%s); the task would run outside its image: not started\n",
                    oci.why.c_str());
            return false;
        }
    }
    char **env = nullptr;
    const std::string path = std::string(g.progress_dir) + "/oci-task-" + std::to_string(local) + ".env";
    if (!g.progress_dir[0] || spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) {
        dprintf(2, "shardnet: error: no task environment for the container (no progress dir); the task is not started\n");
        return false;
    }
    ::unlink(path.c_str());   // a relaunched step's (shard launch): this task's is written anew
    if (!write_env_file(env, path)) {
        dprintf(2, "shardnet: error: the task's environment for its container could not be written to %s (over 768 KiB?); "
                   "the task is not started\n", path.c_str());
        return false;
    }
    ::setenv("SHARDNET_OCI_ENV", path.c_str(), 1);
    return true;
}

}  // namespace shardnet
