// Options and site configuration: registered in every context that parses
// a command line (srun, sbatch, salloc) and in slurmstepd, which receives
// the values. Callbacks only record; checks happen in init_post_opt, because
// on the remote side callbacks run before slurm_spank_init.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <pwd.h>
#include <string>
#include <unistd.h>

#include "spank/contexts.hpp"
#include "spank/guard.hpp"
#include "spank/no_kill.hpp"
#include "common/safe_path.hpp"
#include "spank/state.hpp"

#ifndef SHARDNET_AGENT_PATH
#define SHARDNET_AGENT_PATH "/usr/libexec/shardnet/shardnet-agent"
#endif

namespace shardnet {

namespace {

int record_option(int val, const char *optarg, int remote) {
    if (val < 0 || val >= static_cast<int>(Opt::count)) return -1;
    Opt o = static_cast<Opt>(val);
    RawOption &r = g.opt[val];
    const char *v = optarg ? optarg : "";
    // sbatch hands its options to the job's sruns through the environment,
    // where an absent optional value arrives spelled "(null)".
    if (o == Opt::run && std::strcmp(v, "(null)") == 0) v = "";
    if (std::strlen(v) >= sizeof r.value) {
        slurm_error("shardnet: --%s: value is longer than %zu bytes", opt_spec(o).name, sizeof r.value - 1);
        return -1;
    }
    std::strcpy(r.value, v);
    r.set = true;
    g.enabled_by_option = true;  // any --shardnet-* option turns ShardNet on
    // Fail fast on the user's terminal; slurmstepd checks again after init.
    if (!remote && g.cfg) {
        if (auto err = check_option(o, v, *g.cfg); !err.empty()) {
            slurm_error("shardnet: --%s=%s: %s", opt_spec(o).name, v, err.c_str());
            return -1;
        }
    }
    return 0;
}

// Slurm calls this through a plain C function pointer, outside every other
// entry point: it gets the same guard.
int option_cb(int val, const char *optarg, int remote) noexcept {
    return guarded("option", [&] { return record_option(val, optarg, remote); });
}

}  // namespace

int init_config(int ac, char **av) {
    auto *cfg = new PlugstackConfig;
    std::string err = parse_plugstack_args(ac, av, *cfg);
    if (!err.empty()) {
        slurm_error("shardnet: %s; the plugin refuses to run until plugstack.conf is fixed", err.c_str());
        delete cfg;
        return -1;
    }
    if (cfg->agent_path.empty()) cfg->agent_path = SHARDNET_AGENT_PATH;
    delete g.cfg;
    g.cfg = cfg;
    g.no_kill_env_had = no_kill_value(std::getenv(no_kill_env(program_invocation_short_name)));
    return 0;
}

int register_options(spank_t sp) {
    for (int i = 0; i < static_cast<int>(Opt::count); ++i) {
        const OptSpec &s = opt_spec(static_cast<Opt>(i));
        struct spank_option opt;
        opt.name = const_cast<char *>(s.name);
        opt.arginfo = const_cast<char *>(s.arginfo);
        opt.usage = const_cast<char *>(s.usage);
        opt.has_arg = (i == static_cast<int>(Opt::run)) ? 2 : 1;
        opt.val = i;
        opt.cb = option_cb;
        spank_err_t rc = spank_option_register(sp, &opt);
        if (rc != ESPANK_SUCCESS) {
            slurm_error("shardnet: cannot register --%s: %s", s.name, spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}

// Collects command-line values, falling back to SHARDNET_* variables read
// with getenv (the client's environment) or spank_getenv (the job's).
JobOptionsRaw collect_raw(const std::function<bool(const char *, std::string &)> &env) {
    JobOptionsRaw raw;
    raw.enabled = g.enabled_by_option;
    for (int i = 0; i < static_cast<int>(Opt::count); ++i) {
        Opt o = static_cast<Opt>(i);
        std::string v;
        if (g.opt[i].set) raw[o] = std::string(g.opt[i].value);
        else if (env(opt_spec(o).env, v)) {
            raw[o] = v;
            raw.enabled = true;
        }
    }
    return raw;
}

int client_post_opt() {
    auto raw = collect_raw([](const char *name, std::string &out) {
        const char *v = std::getenv(name);
        if (!v) return false;
        out = v;
        return true;
    });
    if (!raw.enabled) return 0;
    JobOptions job;
    if (auto err = resolve_job_options(raw, *g.cfg, job); !err.empty()) {
        slurm_error("shardnet: %s", err.c_str());
        return -1;
    }
    // An srun inside a job takes the job's spares as they are (its steps
    // are what `shard launch` places).
    const std::string program = program_invocation_short_name;
    if (job.spares > 0 && !(program == "srun" && std::getenv("SLURM_JOB_ID"))) {
        if (auto err = no_kill_refusal(own_args(), g.no_kill_env_had, program); !err.empty()) {
            slurm_error("shardnet: %s", err.c_str());
            return -1;
        }
    }
    if (!job.ckpt_dir.empty() && getuid() != 0) {
        // The same rule slurmstepd applies, checked here as the user so the
        // refusal shows on their terminal rather than only in a node's log.
        // root submitting for a user (sbatch --uid, the broker's requeue) is
        // checked where it counts: in slurmstepd, as the job's user.
        struct passwd pw, *res = nullptr;
        char buf[4096];
        std::string home;
        if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &res) == 0 && res) home = pw.pw_dir;
        if (auto err = make_user_dir(job.ckpt_dir, g.cfg->ckpt_root, home, getuid(), false); !err.empty()) {
            slurm_error("shardnet: --shardnet-ckpt-dir refused: %s", err.c_str());
            return -1;
        }
    }
    return 0;
}

}  // namespace shardnet
