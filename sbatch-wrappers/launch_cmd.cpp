#include "sbatch-wrappers/launch_cmd.hpp"

#include <boost/json.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <signal.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include "common/parse_util.hpp"
#include "sbatch-wrappers/client.hpp"
#include "sbatch-wrappers/launch_plan.hpp"
#include "sbatch-wrappers/launch_slurm.hpp"

extern char **environ;

namespace shardnet::cli {

namespace json = boost::json;

namespace {

constexpr const char *kUsage =
    "usage: shard launch [--ntasks-per-node N] [--grace SECONDS] [--max-stalled-restarts N] -- CMD [ARGS...]\n"
    "  run from a --shardnet batch script: CMD on the job's active nodes (srun), relaunched on a spare when a node dies\n";

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

void say(const std::string &s) { std::fprintf(stderr, "shard launch: %s\n", s.c_str()); }

std::string env_or(const char *k, const char *d = "") {
    const char *v = std::getenv(k);
    return v ? v : d;
}

struct Options {
    std::vector<std::string> cmd;
    long long tasks_per_node = 1, max_stalled = 1;
    double grace = 10;
};

int parse(int argc, char **argv, Options &o) {
    const std::string tpn = env_or("SLURM_NTASKS_PER_NODE");
    if (auto n = parse_int(tpn, 1, 1024)) o.tasks_per_node = *n;
    int i = 0;
    for (; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") { ++i; break; }
        if (i + 1 >= argc) return say(a + ": unknown, or it needs a value\n" + kUsage), kLaunchUsage;
        const std::string v = argv[++i];
        std::optional<long long> n = parse_int(v, 0, 100000);
        if (a == "--ntasks-per-node" && n && *n >= 1) o.tasks_per_node = *n;
        else if (a == "--grace" && n && *n <= 600) o.grace = double(*n);
        else if (a == "--max-stalled-restarts" && n && *n <= 1000) o.max_stalled = *n;
        else return say(a + " " + v + ": unknown option or bad value\n" + kUsage), kLaunchUsage;
    }
    for (; i < argc; ++i) o.cmd.emplace_back(argv[i]);
    if (o.cmd.empty()) return say(std::string("no command after --\n") + kUsage), kLaunchUsage;
    return 0;
}

// One supervised job: its identity, where its ranks run, what the broker said.
struct Supervisor {
    Options opt;
    std::string job, run;
    long long attempt = 1, restart = 0;
    BrokerRef broker;
    Placement place;
    long long last_event = 0;
    std::string latest_seal;
    StormGuard storm;
    pid_t srun = -1;
    std::string step_name;

    int start();
    int supervise();
    void read_events(std::vector<std::string> &dead);
    bool post(json::object body, bool quiet = false);
    void register_supervision();
    pid_t launch();
    void end_step();
    int give_up(const std::string &why, int code);
    bool wait_exit(int &code);
};

bool Supervisor::post(json::object body, bool quiet) {
    if (broker.url.empty()) return false;
    body["attempt"] = attempt;
    Answer a = call(broker, "POST", "/v1/runs/" + run + "/restarts", json::serialize(body), 5000);
    if (!a.ok() && !quiet) say("the broker did not take the report (" + std::to_string(a.status) + " " + a.error + ")");
    return a.ok();
}

// The run is the broker's once the batch step's agent has reported (its
// first heartbeat may still be on its way): asked again for a while, so
// that a FAULT of the attempt waits for the relaunch rather than requeues.
void Supervisor::register_supervision() {
    const json::object body{{"kind", "supervising"}, {"spares", (long long)place.spares.size()},
                            {"nodes", json::array(place.active.begin(), place.active.end())}};
    for (int i = 0; i < 60; ++i) {
        if (post(body, true)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    post(body, false);
    say("the broker does not know this run's supervisor: a node's FAULT may requeue the job before it is relaunched");
}

void Supervisor::read_events(std::vector<std::string> &dead) {
    if (broker.url.empty()) return;
    Answer a = call(broker, "GET", "/v1/runs/" + run + "/events?after=" + std::to_string(last_event), "", 3000);
    if (!a.ok() || !a.body.is_object()) return;
    const auto *events = a.body.as_object().if_contains("events");
    if (!events || !events->is_array()) return;
    for (const auto &e : events->as_array()) {
        if (e.is_object())
            if (const auto *id = e.as_object().if_contains("id"); id && id->is_int64()) last_event = std::max<long long>(last_event, id->as_int64());
        if (auto s = sealed_of(e); !s.empty()) latest_seal = s;
        const std::string d = dead_node_of(e, attempt);
        if (d.empty()) continue;
        if (std::find(place.spares.begin(), place.spares.end(), d) != place.spares.end()) {
            place.spares.erase(std::find(place.spares.begin(), place.spares.end(), d));
            say("spare node " + d + " died; " + std::to_string(place.spares.size()) + " spare(s) left");
        } else if (std::find(place.active.begin(), place.active.end(), d) != place.active.end() &&
                   std::find(dead.begin(), dead.end(), d) == dead.end()) {
            dead.push_back(d);
        }
    }
}

pid_t Supervisor::launch() {
    step_name = "shardnet-launch-" + std::to_string(restart);
    const long long n = (long long)place.active.size();
    std::vector<std::string> argv{"srun", "--overlap", "-N", std::to_string(n), "-n", std::to_string(n * opt.tasks_per_node),
                                  "--ntasks-per-node=" + std::to_string(opt.tasks_per_node), "-w", joined(place.active),
                                  "-J", step_name, "--kill-on-bad-exit=1"};
    if (restart > 0) argv.push_back("--shardnet-resume=latest");
    // The image's bundle (a spec's image: the batch script exports it,
    // doc/containers.md): srun 22.05 does not take it from the environment.
    if (const char *c = std::getenv("SLURM_CONTAINER"); c && *c) argv.push_back(std::string("--container=") + c);
    argv.insert(argv.end(), opt.cmd.begin(), opt.cmd.end());
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e)
        if (std::strncmp(*e, "SHARDNET_RESTART=", 17) != 0) env.emplace_back(*e);
    env.push_back("SHARDNET_RESTART=" + std::to_string(restart));
    std::string err;
    const pid_t pid = spawn(argv, env, err);
    if (pid < 0) say(err);
    else say("restart " + std::to_string(restart) + ": ranks on " + joined(place.active) + (place.spares.empty() ? "; no spare" : "; spare " + joined(place.spares)));
    return pid;
}

void Supervisor::end_step() {
    // The step itself first (srun killed alone would leave it running),
    // then srun, which may wait for the dead node until Slurm marks it DOWN.
    if (const std::string id = step_named(job, step_name); !id.empty()) {
        std::string out;
        run_capture({"scancel", "--quiet", id}, out, 5000);
    }
    if (srun > 0) {
        kill(srun, SIGKILL);
        while (waitpid(srun, nullptr, 0) < 0 && errno == EINTR) {}
        srun = -1;
    }
}

int Supervisor::give_up(const std::string &why, int code) {
    say("gave up: " + why);
    post(json::object{{"kind", "gave_up"}, {"reason", why.substr(0, 200)}, {"spares", (long long)place.spares.size()}});
    end_step();
    return code;
}

bool Supervisor::wait_exit(int &code) {
    int status = 0;
    const pid_t r = waitpid(srun, &status, WNOHANG);
    if (r != srun) return false;
    srun = -1;
    code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
}

int Supervisor::start() {
    job = env_or("SLURM_JOB_ID");
    run = env_or("SHARDNET_RUN");
    if (job.empty()) return say("not inside a Slurm job (no SLURM_JOB_ID): run it from a batch script"), kLaunchUsage;
    if (run.empty()) return say("the job is not under ShardNet (no SHARDNET_RUN): submit it with --shardnet"), kLaunchUsage;
    attempt = parse_int(env_or("SHARDNET_ATTEMPT", "1"), 1, 1000000).value_or(1);
    const long long spares = parse_int(env_or("SHARDNET_SPARES", "0"), 0, 64).value_or(0);
    broker = BrokerRef{"", env_or("SHARDNET_BROKER_URL"), env_or("SHARDNET_BROKER_TOKEN"), env_or("SHARDNET_BROKER_CA")};
    if (broker.token.empty()) broker.url.clear();
    if (broker.url.empty()) say("no broker in the job's environment: no node's death can be told from a program error; nothing is relaunched");
    std::vector<std::string> nodes;
    std::string batch_host;
    if (auto err = job_nodes(job, nodes, batch_host); !err.empty()) return say(err), 1;
    if ((long long)nodes.size() <= spares)
        return say("job " + job + " has " + std::to_string(nodes.size()) + " node(s); --shardnet-spares=" + std::to_string(spares) +
                   " leaves none for ranks"), kLaunchUsage;
    place = *::shardnet::cli::place(nodes, batch_host, nodes.size() - std::size_t(spares), {});
    storm.max_stalled = int(opt.max_stalled);
    std::vector<std::string> ignored;
    read_events(ignored);   // what happened before this launch is not its business
    if (!broker.url.empty()) register_supervision();
    return supervise();
}

int Supervisor::supervise() {
    if ((srun = launch()) < 0) return 1;
    for (;;) {
        std::vector<std::string> dead;
        int code = 0;
        double exited_at = 0;
        for (;;) {
            if (exited_at == 0 && wait_exit(code)) {
                if (code == 0) return say("the step ended 0"), 0;
                exited_at = now_s();
            }
            read_events(dead);
            if (!dead.empty()) break;
            if (exited_at > 0 && now_s() - exited_at >= opt.grace)
                return give_up("the step exited " + std::to_string(code) + " with no node of it dead (no node FAULT from the broker within " +
                               std::to_string(int(opt.grace)) + " s): a program error, not retried", code);
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        const double seen = now_s();
        say("node " + joined(dead) + " died (the broker's FAULT, confirmed with Slurm)");
        if (auto why = storm.admit(latest_seal); !why.empty()) return give_up(why, kLaunchGaveUp);
        std::vector<std::string> took;
        auto next = replace(place, dead, took);
        if (!next) return give_up("node " + joined(dead) + " died and no spare node is left", kLaunchGaveUp);
        end_step();
        place = *next;
        ++restart;
        if ((srun = launch()) < 0) return 1;
        const double relaunch = now_s() - seen;
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.2f", relaunch);
        say("relaunched " + std::string(secs) + " s after the evidence, without " + joined(dead) + ", with " + joined(took));
        post(json::object{{"kind", "restarted"}, {"restart", restart}, {"dead", json::array(dead.begin(), dead.end())},
                          {"took", json::array(took.begin(), took.end())}, {"nodes", json::array(place.active.begin(), place.active.end())},
                          {"spares", (long long)place.spares.size()}, {"relaunch_seconds", relaunch}});
    }
}

}  // namespace

int launch_main(int argc, char **argv) {
    Supervisor s;
    if (int rc = parse(argc, argv, s.opt); rc != 0) return rc;
    return s.start();
}

}  // namespace shardnet::cli
