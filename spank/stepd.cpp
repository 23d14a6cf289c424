// slurmstepd side: turns the job's options into the task environment
// contract, makes the step's progress directory (as root, for the job user)
// and its checkpoint directory (as the job user), and runs the heartbeat
// agent for the step on this node.
//
// Trust: slurmstepd runs us as root. What Slurm itself says (spank items,
// slurmstepd's slurm.conf and environment) is believed; everything from the
// user or the job's environment is checked before it is used, and never
// reaches the agent's config unchecked (agent_protocol.hpp).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fcntl.h>
#include <memory>
#include <pwd.h>
#include <string>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

extern "C" {
#include <slurm/slurm.h>
// slurmstepd's own parse of slurm.conf (libslurm's global, which slurmstepd
// exports): the cluster's name as the site configured it. Weak, so that the
// plugin still loads where no such symbol exists (srun, sbatch).
extern slurm_conf_t slurm_conf __attribute__((weak));
// slurmstepd's node table (read_config.c, exported by libslurmfull): a
// NodeName's NodeAddr as the site configured it, xmalloc'd, or null. Weak
// for the same reason; MASTER_ADDR is then the NodeName itself.
char *slurm_conf_get_address(const char *node_name) __attribute__((weak));
void slurm_xfree(void **p) __attribute__((weak));
#pragma weak slurm_hostlist_create
#pragma weak slurm_hostlist_shift
#pragma weak slurm_hostlist_destroy
}

#include "spank/agent_link.hpp"
#include "spank/slurm_hostlist.hpp"
#include "common/agent_protocol.hpp"
#include "common/checkpoint_layout.hpp"
#include "spank/contexts.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"
#include "spank/state.hpp"
#include "spank/step_env.hpp"
#include "spank/torch_env.hpp"
#include "common/worker_token.hpp"

namespace shardnet {

namespace {

std::string job_env(spank_t sp, const char *name) {
    char buf[PATH_MAX];
    if (spank_getenv(sp, name, buf, sizeof buf) != ESPANK_SUCCESS) return "";
    return buf;
}

template <typename T>
T item(spank_t sp, spank_item_t what, T fallback) {
    T v{};
    return spank_get_item(sp, what, &v) == ESPANK_SUCCESS ? v : fallback;
}

bool set_env(spank_t sp, const char *name, const std::string &value) {
    spank_err_t rc = spank_setenv(sp, name, value.c_str(), 1);
    if (rc != ESPANK_SUCCESS) slurm_error("shardnet: cannot set %s: %s", name, spank_strerror(rc));
    return rc == ESPANK_SUCCESS;
}

bool copy_to(char *dst, size_t cap, const std::string &src) {
    if (src.size() >= cap) return false;
    std::memcpy(dst, src.c_str(), src.size() + 1);
    return true;
}

// Read as root, before user_init drops to the job user; handed to the agent
// over its control socket, never through argv or the environment.
std::string read_token(const std::string &path, std::string &err) {
    std::string t = read_secret_file(path, 1, err);
    if (err.empty() && (has_control_chars(t) || t.find(' ') != std::string::npos)) {
        err = "token file '" + path + "' holds more than one token";
        explicit_bzero(t.data(), t.size());
        return "";
    }
    return t;
}

char g_token[1025];  // plain storage: wiped as soon as the agent has it
char g_key[4097];    // the site's worker key, wiped likewise

// Every path out of the step's setup ends here: the key and the token are
// needed only to start the agent.
void wipe_secrets() {
    explicit_bzero(g_key, sizeof g_key);
    explicit_bzero(g_token, sizeof g_token);
}

// Wipes a string's bytes when the scope ends, whichever way it ends.
struct WipeOnExit {
    std::string &s;
    explicit WipeOnExit(std::string &str) : s(str) {}
    WipeOnExit(const WipeOnExit &) = delete;
    WipeOnExit &operator=(const WipeOnExit &) = delete;
    ~WipeOnExit() { explicit_bzero(s.data(), s.size()); }
};

// Keeps the first message of its kind for the tasks; task_init must then
// run to deliver it.
template <std::size_t N>
void keep_for_tasks(char (&slot)[N], const std::string &why) {
    if (slot[0]) return;
    std::snprintf(slot, N, "%s", why.c_str());
    g.active = true;
}

// Logs why and makes every task of the step fail with that message.
int refuse(const std::string &why) {
    slurm_error("shardnet: %s", why.c_str());
    wipe_secrets();
    keep_for_tasks(g.refusal, why);
    return 0;
}

// A condition the user did not make (another user's squat, a site root
// that is missing or wrong). Only mode=required makes it fatal; otherwise
// the step runs without ShardNet and says why, once, on its stderr.
int site_problem(const std::string &what) {
    if (g.cfg->mode == BrokerMode::required) return refuse(what + " (mode=required: the step does not start)");
    const std::string why = what + "; this step runs without ShardNet (mode=optional)";
    // Not slurm_error: slurmstepd copies errors to the job's stderr too, and
    // the user is to see the reason once, from task_init.
    slurm_info("shardnet: warning: %s", why.c_str());
    wipe_secrets();
    keep_for_tasks(g.warning, why);
    return 0;
}

// A broker problem is only fatal to the step when the site said so.
int broker_problem(const std::string &what) {
    if (g.cfg->mode == BrokerMode::required) return refuse(what + " (mode=required: the step does not start)");
    slurm_error("shardnet: %s; the job goes on without heartbeats", what.c_str());
    wipe_secrets();
    g.broker_off = true;
    return 0;
}

// This node's Slurm name: slurmstepd sets SLURMD_NODENAME in its own
// environment from slurmd's configuration, out of the job's reach.
std::string node_name() {
    const char *n = std::getenv("SLURMD_NODENAME");
    return n && agent_config_value_error("node", n).empty() ? n : "";
}

// The step's node list from the job's environment, which the job can set
// to anything: only a well-formed host list is passed on.
std::string step_nodelist(spank_t sp, bool batch) {
    for (const char *name : {batch ? "SLURM_JOB_NODELIST" : "SLURM_STEP_NODELIST", "SLURM_NODELIST"}) {
        const std::string v = job_env(sp, name);
        if (v.empty()) continue;
        if (auto err = agent_config_value_error("nodelist", v); err.empty()) return v;
        else slurm_error("shardnet: %s in the job's environment is ignored: %s", name, err.c_str());
    }
    return "";
}

// The step's first node as every node of the step reaches it: Slurm's
// NodeAddr for it (slurmstepd's node table), else its NodeName. "" when
// the step's node list is not known.
std::string first_node_address(spank_t sp) {
    const std::string list = step_nodelist(sp, false);
    if (list.empty() || !slurm_hostlist_create) return "";
    hostlist_handle hl = slurm_hostlist_create(list.c_str());
    if (!hl) return "";
    char *first = slurm_hostlist_shift(hl);
    std::string node = first ? first : "";
    free(first);
    slurm_hostlist_destroy(hl);
    if (node.empty()) return "";
    if (slurm_conf_get_address && slurm_xfree) {
        char *addr = slurm_conf_get_address(node.c_str());
        std::string a = addr ? addr : "";
        if (addr) slurm_xfree(reinterpret_cast<void **>(&addr));
        if (is_host_address(a)) return a;
    }
    return is_host_address(node) ? node : "";
}

// The cluster's name from slurmstepd's slurm.conf; the job's environment
// only where that is not to be had (then a user could name another cluster
// of their own: the token still carries their uid, and the broker checks
// the job's owner with that cluster's Slurm).
std::string cluster_name(spank_t sp) {
    if (&slurm_conf != nullptr && slurm_conf.cluster_name && is_cluster_name(slurm_conf.cluster_name))
        return slurm_conf.cluster_name;
    std::string env = job_env(sp, "SLURM_CLUSTER_NAME");
    return is_cluster_name(env) ? env : "";
}

// The agent's SLURM_CONF (for its time-limit queries, as the job user):
// the job's, as a clean absolute path, else slurmstepd's own.
std::string agent_slurm_conf(spank_t sp) {
    std::string c = job_env(sp, "SLURM_CONF");
    if (!c.empty() && check_path_syntax(c).empty()) return c;
    if (!c.empty()) slurm_error("shardnet: SLURM_CONF in the job's environment is ignored: not a clean absolute path");
    const char *own = std::getenv("SLURM_CONF");
    return own ? own : "";
}

int start_agent(spank_t sp, uint32_t jobid, uint32_t stepid, uid_t uid, gid_t gid, const std::string &user) {
    AgentConfig ac;
    std::string config;  // holds the token once encoded
    WipeOnExit wipe_token{ac.token}, wipe_config{config};
    ac.url = g.cfg->broker_url;
    ac.cluster = cluster_name(sp);
    ac.world = stepid == SLURM_BATCH_SCRIPT ? 1 : std::max(1u, item<uint32_t>(sp, S_JOB_TOTAL_TASK_COUNT, 1));
    if (g_key[0]) {
        // Everything in the claim comes from Slurm's items and slurmstepd's
        // configuration: nothing the job's environment says.
        const WorkerClaim claim{g.run, g.attempt, ac.world, uid, jobid, ac.cluster};
        const std::string bad = worker_claim_error(claim);
        if (!bad.empty()) {
            explicit_bzero(g_key, sizeof g_key);
            return broker_problem("no worker token for this step: " + bad);
        }
        ac.token = derive_worker_token(g_key, claim);
        // The tasks' own: a token that only reads their run (the sealed
        // digests a resume checks shards against); never the agent's.
        std::string reader = derive_reader_token(g_key, claim);
        WipeOnExit wipe_reader{reader};
        explicit_bzero(g_key, sizeof g_key);
        if (!set_env(sp, "SHARDNET_BROKER_URL", g.cfg->broker_url) || !set_env(sp, "SHARDNET_BROKER_TOKEN", reader) ||
            !set_env(sp, "SHARDNET_BROKER_CA", g.cfg->ca_file))
            slurm_info("shardnet: the tasks get no broker reader token: cannot set the task environment");
    } else {
        ac.token = g_token;
    }
    ac.ca_file = g.cfg->ca_file;
    ac.run = g.run;
    ac.attempt = g.attempt;
    // Several slurmd may share a host: the node's Slurm name comes from
    // slurmstepd, else from the step's node list and our index in it (the
    // agent expands the list).
    ac.node = node_name();
    ac.nodelist = step_nodelist(sp, stepid == SLURM_BATCH_SCRIPT);
    ac.nodeid = item<uint32_t>(sp, S_JOB_NODEID, 0);
    ac.job = jobid;
    ac.step = stepid == SLURM_BATCH_SCRIPT ? "batch" : std::to_string(stepid);
    ac.interval = g.job->heartbeat;
    ac.timeout_ms = g.cfg->timeout_ms;
    ac.prelimit_signal = g.cfg->prelimit_signal;
    ac.prelimit_secs = g.cfg->prelimit_secs;
    ac.progress_dir = g.progress_dir;
    ac.requeue = requeue_name(g.job->requeue);
    ac.ckpt_dir = g.ckpt_dir;
    ac.ckpt_every = g.job->ckpt_every;
    ac.max_attempts = g.job->max_attempts;
    ac.fatal_exit = g.job->fatal_exit;
    ac.requeue_timeout = g.job->requeue_timeout;
    ac.spares = g.job->spares;
    ac.replace_stragglers = g.job->replace_stragglers;
    // This node's tasks, local index -> global rank.
    uint32_t ntasks = g.local_tasks;
    for (uint32_t i = 0; i < ntasks; ++i) {
        uint32_t global = i;
        if (spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, i, &global) != ESPANK_SUCCESS) global = i;
        ac.ranks.push_back({global, i});
    }
    // Required mode waits for the first heartbeat: no grace period there.
    const bool required = g.cfg->mode == BrokerMode::required;
    std::string bad = encode_agent_config(ac, config);
    wipe_secrets();
    if (!bad.empty()) return broker_problem(bad);
    AgentSpawn spawn{g.cfg->agent_path, std::move(config), agent_slurm_conf(sp), uid, gid, user,
                     required ? 0 : g.cfg->start_grace_ms};
    WipeOnExit wipe_spawn{spawn.config};
    if (auto err = agent_start(spawn); !err.empty()) return broker_problem("heartbeat agent not started: " + err);
    if (required) {
        if (auto err = agent_wait_verdict(g.cfg->timeout_ms + 500); !err.empty()) {
            agent_finish(0);
            return broker_problem("broker " + g.cfg->broker_url + " did not take the first heartbeat: " + err);
        }
    }
    return 0;
}

}  // namespace

namespace {

// The step's progress dir, made here as root: below a root-owned root, with
// a fresh name, handed to the job user. Nobody else can have made it first.
std::string make_progress_dir(spank_t sp, uint32_t stepid) {
    const uid_t uid = item<uid_t>(sp, S_JOB_UID, uid_t(-1));
    const gid_t gid = item<gid_t>(sp, S_JOB_GID, gid_t(-1));
    const uint32_t jobid = item<uint32_t>(sp, S_JOB_ID, 0);
    if (uid == uid_t(-1) || gid == gid_t(-1) || jobid == 0) return "Slurm did not give the job's uid, gid or id";
    const std::string &root = g.cfg->progress_root;
    int fd = -1;
    if (auto err = open_step_root(root, 0, true, &fd); !err.empty()) return "progress root refused: " + err;
    // Job ids repeat across clusters (and a cluster's restarts), and several
    // slurmd may share a host: the name says whose step it is, the random
    // part makes it this step's own.
    const std::string cluster = cluster_name(sp);
    const std::string prefix = (cluster.empty() ? "cluster" : cluster) + "." + std::to_string(jobid) + "." +
                               (stepid == SLURM_BATCH_SCRIPT ? "batch" : std::to_string(stepid)) + ".n" +
                               std::to_string(item<uint32_t>(sp, S_JOB_NODEID, 0));
    auto dir = std::make_unique<StepDir>();
    std::string err = make_step_dir(fd, prefix, uid, gid, *dir);
    ::close(fd);
    if (!err.empty()) return "progress dir refused: " + err;
    if (!copy_to(g.progress_dir, sizeof g.progress_dir, root + "/" + dir->name)) err = "progress dir path is too long";
    delete g.progress;
    g.progress = dir.release();
    return err;
}

void remove_progress_dir() {
    if (!g.progress || !g.cfg) return;
    if (auto err = remove_step_dir(g.cfg->progress_root, *g.progress); !err.empty())
        slurm_info("shardnet: progress dir left in place: %s", err.c_str());
    delete g.progress;
    g.progress = nullptr;
}

// As root, before user_init drops to the job user. The key never leaves
// slurmstepd: the agent gets a token derived for its run and attempt once
// those are known (user_init).
void read_broker_secret() {
    std::string err;
    if (!g.cfg->worker_key_file.empty()) {
        std::string key = read_worker_key(g.cfg->worker_key_file, err);
        WipeOnExit wipe{key};
        if (err.empty() && !copy_to(g_key, sizeof g_key, key)) err = "worker key '" + g.cfg->worker_key_file + "' is too long";
    } else if (!g.cfg->token_file.empty()) {
        std::string tok = read_token(g.cfg->token_file, err);
        WipeOnExit wipe{tok};
        if (err.empty() && !copy_to(g_token, sizeof g_token, tok))
            err = "token file '" + g.cfg->token_file + "' holds more than " + std::to_string(sizeof g_token - 1) + " bytes";
    }
    if (!err.empty()) broker_problem(err);
}

}  // namespace

int stepd_post_opt(spank_t sp) {
    auto raw = collect_raw([&](const char *name, std::string &out) {
        char buf[PATH_MAX];
        if (spank_getenv(sp, name, buf, sizeof buf) != ESPANK_SUCCESS) return false;
        out = buf;
        return true;
    });
    if (!raw.enabled) return 0;
    const uint32_t stepid = item<uint32_t>(sp, S_JOB_STEPID, 0);
    if (stepid == SLURM_EXTERN_CONT) return 0;  // no tasks of the user's there
    auto job = std::make_unique<JobOptions>();
    if (auto err = resolve_job_options(raw, *g.cfg, *job); !err.empty()) return refuse(err);
    if (auto err = make_progress_dir(sp, stepid); !err.empty()) return site_problem(err);
    if (!g.cfg->broker_url.empty()) read_broker_secret();
    if (g.refusal[0]) return 0;
    delete g.job;
    g.job = job.release();
    return 0;
}

namespace {

int user_init_step(spank_t sp) {
    if (!g.job || g.refusal[0] || g.warning[0]) return 0;
    const uint32_t stepid = item<uint32_t>(sp, S_JOB_STEPID, 0);
    if (stepid == SLURM_EXTERN_CONT) return 0;
    const uint32_t jobid = item<uint32_t>(sp, S_JOB_ID, 0);
    const uid_t uid = item<uid_t>(sp, S_JOB_UID, uid_t(-1));
    const gid_t gid = item<gid_t>(sp, S_JOB_GID, gid_t(-1));
    const uint32_t restarts = item<uint32_t>(sp, S_SLURM_RESTART_COUNT, 0);
    g.local_tasks = item<uint32_t>(sp, S_JOB_LOCAL_TASK_COUNT, 1);
    g.exited_tasks = 0;
    g.uid = uid;

    struct passwd pw, *pwr = nullptr;
    char pwbuf[4096];
    if (getpwuid_r(uid, &pw, pwbuf, sizeof pwbuf, &pwr) != 0 || !pwr)
        return site_problem("cannot look up job uid " + std::to_string(uid));
    const std::string user = pw.pw_name, home = pw.pw_dir;

    const std::string cluster = cluster_name(sp);
    std::string run = !g.job->run.empty() ? g.job->run : (cluster.empty() ? "job" : cluster) + "." + std::to_string(jobid);
    if (!is_safe_name(run)) run = "job." + std::to_string(jobid);  // cluster names are site-chosen; stay safe
    auto attempt = parse_int(job_env(sp, "SHARDNET_ATTEMPT"), 1, 1000000);
    g.attempt = attempt ? unsigned(*attempt) : restarts + 1;
    // `shard launch` counts the step's relaunches within the attempt: the
    // job's word, for the tasks' environment only (nothing is judged by it).
    auto restart = parse_int(job_env(sp, "SHARDNET_RESTART"), 0, 1000000);
    g.restart = restart ? unsigned(*restart) : 0;

    // A dir the user named is theirs to get right: refused. The default one
    // fails only through others (a squatted or foreign ckpt_root/USER, a
    // missing root, a home not theirs): a warning in mode=optional.
    const bool named = !g.job->ckpt_dir.empty();
    std::string ckpt = g.job->ckpt_dir;
    if (!named)
        ckpt = g.cfg->ckpt_root.empty() ? home + "/.shardnet/checkpoints/" + run : g.cfg->ckpt_root + "/" + user + "/" + run;
    // We run with the job user's euid here: directories are made as them.
    if (auto err = make_user_dir(ckpt, g.cfg->ckpt_root, home, uid, true); !err.empty())
        return named ? refuse("checkpoint dir refused: " + err) : site_problem("default checkpoint dir refused: " + err);
    std::string resume = resolve_resume(g.job->resume, ckpt);
    if (g.job->resume == "latest" && resume.empty())
        slurm_info("shardnet: --shardnet-resume=latest: no sealed checkpoint in %s yet; starting fresh", ckpt.c_str());
    if (!copy_to(g.run, sizeof g.run, run) || !copy_to(g.ckpt_dir, sizeof g.ckpt_dir, ckpt) ||
        !copy_to(g.resume_from, sizeof g.resume_from, resume))
        return refuse("a checkpoint path is too long");
    bool ok = set_env(sp, "SHARDNET_RUN", run) && set_env(sp, "SHARDNET_ATTEMPT", std::to_string(g.attempt)) &&
              set_env(sp, "SHARDNET_CKPT_DIR", ckpt) && set_env(sp, "SHARDNET_RESUME_FROM", resume) &&
              set_env(sp, "SHARDNET_CKPT_EVERY", g.job->ckpt_every) &&
              set_env(sp, "SHARDNET_REQUEUE", requeue_name(g.job->requeue)) &&
              // Which signal comes before the time limit (plugstack prelimit=),
              // so that the trainer's library watches that one; "" when none.
              set_env(sp, "SHARDNET_PRELIMIT_SIGNAL", g.cfg->prelimit_signal ? std::to_string(g.cfg->prelimit_signal) : "") &&
              set_env(sp, "SHARDNET_RESTART", std::to_string(g.restart)) &&
              // The nodes `shard launch` holds back (--shardnet-spares); "" none.
              (g.job->spares == 0 || set_env(sp, "SHARDNET_SPARES", std::to_string(g.job->spares))) &&
              // What `shard launch` does with a straggler (--shardnet-straggler).
              (!g.job->replace_stragglers || set_env(sp, "SHARDNET_STRAGGLER", "replace"));
    if (!ok) return refuse("cannot set the task environment");
    // torchrun's contract (torch_env.hpp): the rendezvous of an srun step,
    // the same on every node of it. The batch script is no rank: its srun
    // steps get their own values.
    g.master_addr[0] = 0;
    g.master_port = 0;
    if (stepid != SLURM_BATCH_SCRIPT) {
        const std::string addr = first_node_address(sp);
        const unsigned reserved = first_reserved_port(job_env(sp, "SLURM_STEP_RESV_PORTS"));
        g.master_port = reserved ? reserved : derived_port(cluster, jobid, stepid);
        if (!copy_to(g.master_addr, sizeof g.master_addr, addr) || addr.empty())
            slurm_info("shardnet: the step's first node has no known address; MASTER_ADDR is not set");
    }
    g.active = true;
    if (g.cfg->broker_url.empty() || g.broker_off) return 0;
    if (stepid == SLURM_BATCH_SCRIPT) save_job_environment(sp);
    return start_agent(sp, jobid, stepid, uid, gid, user);
}

}  // namespace

int stepd_user_init(spank_t sp) {
    // The key and token serve only to start the agent: gone after this,
    // whichever way it returns.
    struct Wipe { ~Wipe() { wipe_secrets(); } } wipe;
    return user_init_step(sp);
}

int stepd_task_init(spank_t sp) {
    if (g.refusal[0]) {
        // We are the task, about to exec the user's program as the user:
        // end it here, with the reason on the job's stderr.
        dprintf(2, "shardnet: this step was refused: %s\n", g.refusal);
        _exit(1);
    }
    if (g.warning[0]) {
        // Once per node, from its first task: the step goes on without us.
        if (item<uint32_t>(sp, S_TASK_ID, 0) == 0) dprintf(2, "shardnet: warning: %s\n", g.warning);
        return 0;
    }
    // The batch script is one process whatever the job's task count.
    const bool batch = item<uint32_t>(sp, S_JOB_STEPID, 0) == SLURM_BATCH_SCRIPT;
    const uint32_t rank = batch ? 0 : item<uint32_t>(sp, S_TASK_GLOBAL_ID, 0);
    const uint32_t local = batch ? 0 : item<uint32_t>(sp, S_TASK_ID, 0);
    const uint32_t world = batch ? 1 : item<uint32_t>(sp, S_JOB_TOTAL_TASK_COUNT, 1);
    bool ok = set_env(sp, "SHARDNET_RANK", std::to_string(rank)) &&
              set_env(sp, "SHARDNET_LOCAL_RANK", std::to_string(local)) &&
              set_env(sp, "SHARDNET_WORLD_SIZE", std::to_string(world ? world : 1)) &&
              set_env(sp, "SHARDNET_PROGRESS", std::string(g.progress_dir) + "/rank-" + std::to_string(rank)) &&
              // The broker's interval for --shardnet-ckpt-every=auto, written by the agent.
              set_env(sp, "SHARDNET_CKPT_POLICY", g.job && g.job->ckpt_every == "auto" && g.agent.pid > 0
                                                      ? std::string(g.progress_dir) + "/ckpt-policy" : std::string());
    if (!ok) return -1;
    // A later attempt appends to the first one's output: a line says where
    // one ends and the next begins.
    if (batch && g.attempt > 1)
        dprintf(1, "=== shardnet: attempt %u of %s on %s, job %u ===\n", g.attempt, g.run,
                cluster_name(sp).empty() ? "this cluster" : cluster_name(sp).c_str(), item<uint32_t>(sp, S_JOB_ID, 0));
    if (batch) {
        return export_container_env(sp, 0) ? 0 : -1;   // sbatch --container: the batch script runs in the image
    }
    StepLayout l;
    l.rank = rank;
    l.local_rank = local;
    l.world = world ? world : 1;
    l.local_world = std::max(1u, item<uint32_t>(sp, S_JOB_LOCAL_TASK_COUNT, 1));
    l.node_index = item<uint32_t>(sp, S_JOB_NODEID, 0);
    l.nodes = std::max(1u, item<uint32_t>(sp, S_JOB_NNODES, 1));
    l.attempt = g.attempt;
    l.restart = g.restart;
    l.requeue = g.job && g.job->requeue != Requeue::off;
    l.max_attempts = g.job ? unsigned(g.job->max_attempts) : 0;
    l.run = g.run;
    l.master_addr = g.master_addr;
    l.master_port = g.master_port;
    for (const auto &[name, value] : torch_env(l)) {
        if (value.empty()) continue;   // MASTER_ADDR unknown: left to the job
        if (!set_env(sp, name, value)) return -1;
    }
    return export_container_env(sp, local) ? 0 : -1;
}

int stepd_task_post_fork(spank_t sp) {
    if (g.refusal[0] || g.warning[0]) return 0;
    const uint32_t rank = item<uint32_t>(sp, S_TASK_GLOBAL_ID, 0);
    const pid_t pid = item<pid_t>(sp, S_TASK_PID, 0);
    if (pid > 0) agent_send("pid=" + std::to_string(rank) + ":" + std::to_string(pid) + "\n");
    return 0;
}

int stepd_task_exit(spank_t sp) {
    if (g.refusal[0] || g.warning[0]) return 0;
    const uint32_t rank = item<uint32_t>(sp, S_TASK_GLOBAL_ID, 0);
    const int status = item<int>(sp, S_TASK_EXIT_STATUS, 0);
    agent_send("exit=" + std::to_string(rank) + ":" + std::to_string(status) + "\n");
    // The step daemon kills whatever is left of the step soon after the last
    // task ends: the final report has to leave now.
    if (++g.exited_tasks >= g.local_tasks) agent_finish(g.cfg->exit_wait_ms);
    return 0;
}

void stepd_exit() {
    wipe_secrets();
    if (g.cfg) agent_finish(g.cfg->exit_wait_ms);
    remove_progress_dir();  // as root: the agent that read it has ended
    g.active = false;
}

}  // namespace shardnet
