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
    "usage: shard launch [--ntasks-per-node N] [--grace SECONDS] [--max-stalled-restarts N] [--straggler report|replace] -- CMD [ARGS...]\n"
    "  run from a --shardnet batch script: CMD on the job's active nodes (srun), relaunched on a spare when a node dies;\n"
    "  --straggler replace (or --shardnet-straggler=replace): a node the broker names a straggler is swapped for a spare\n"
    "  at the next sealed checkpoint\n";

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

void say(const std::string &s) { std::fprintf(stderr, "shard launch: %s\n", s.c_str()); }

// Signals to the batch script (scancel, --signal=B:USR1@T, a pre-limit
// signal, Ctrl-C under salloc): noted here, acted on in the loop.
volatile sig_atomic_t g_signals = 0;   // a bit per signal number
constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT};
extern "C" void note_signal(int sig) { g_signals = g_signals | (1 << sig); }
void catch_signals() {
    struct sigaction sa {};
    sa.sa_handler = note_signal;
    sigfillset(&sa.sa_mask);   // one handler at a time: no bit lost
    for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
}
int take_signals() {
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    const int s = g_signals;
    g_signals = 0;
    sigprocmask(SIG_SETMASK, &old, nullptr);
    return s;
}

std::string env_or(const char *k, const char *d = "") {
    const char *v = std::getenv(k);
    return v ? v : d;
}

struct Options {
    std::vector<std::string> cmd;
    long long tasks_per_node = 1, max_stalled = 1;
    double grace = 10;
    bool replace_stragglers = false;
};

int parse(int argc, char **argv, Options &o) {
    const std::string tpn = env_or("SLURM_NTASKS_PER_NODE");
    if (auto n = parse_int(tpn, 1, 1024)) o.tasks_per_node = *n;
    o.replace_stragglers = env_or("SHARDNET_STRAGGLER") == "replace";
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
        else if (a == "--straggler" && (v == "report" || v == "replace")) o.replace_stragglers = v == "replace";
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
    // A straggler the broker named (--straggler replace): swapped for a
    // spare once a checkpoint newer than seal_at_slow is sealed.
    std::string slow, seal_at_slow;
    StormGuard storm;
    pid_t srun = -1;
    std::string step_name;
    int stop_signal = 0;          // SIGTERM/SIGINT/SIGHUP/SIGQUIT came: no relaunch, the step's end is the end
    int unread = 0;               // event reads in a row the broker did not answer
    std::string unread_why;

    int start();
    int supervise();
    void read_events(std::vector<std::string> &dead);
    bool post(json::object body, bool quiet = false);
    void register_supervision();
    pid_t launch();
    void end_step();
    int give_up(const std::string &why, int code);
    bool swap_due() const { return !slow.empty() && latest_seal != seal_at_slow && !place.spares.empty(); }
    int relaunch(const std::vector<std::string> &out, bool straggler, double seen);
    bool wait_exit(int &code);
    void forward_signals();
};

// A report is sent again while the broker cannot take it yet (no answer,
// 429, 5xx: a restart, a busy store), for 30 s at most; a refusal (400,
// 403, 409 stale_attempt) is final.
bool Supervisor::post(json::object body, bool quiet) {
    if (broker.url.empty()) return false;
    body["attempt"] = attempt;
    const std::string text = json::serialize(body);
    const double until = now_s() + 30;
    Answer a;
    for (int delay_ms = 250;; delay_ms = std::min(delay_ms * 2, 4000)) {
        a = call(broker, "POST", "/v1/runs/" + run + "/restarts", text, 5000);
        const bool again = a.status == 0 || a.status == 429 || a.status >= 500;
        if (a.ok() || !again || quiet || now_s() + delay_ms / 1000.0 > until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        forward_signals();   // a scancel meanwhile still reaches the ranks in time
    }
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
    const auto *events = a.ok() && a.body.is_object() ? a.body.as_object().if_contains("events") : nullptr;
    if (!events || !events->is_array()) {
        // Said once (after 2 s of failures), not at every poll: until the
        // broker answers, a node's death cannot be seen here.
        unread_why = a.status ? std::to_string(a.status) + " " + a.error : a.error;
        if (++unread == 8) say("the broker's events cannot be read (" + unread_why + "): a node's death is not seen until it answers");
        return;
    }
    if (unread >= 8) say("the broker answers again");
    unread = 0;
    for (const auto &e : events->as_array()) {
        if (e.is_object())
            if (const auto *id = e.as_object().if_contains("id"); id && id->is_int64()) last_event = std::max<long long>(last_event, id->as_int64());
        if (auto s = sealed_of(e); !s.empty()) latest_seal = s;
        if (auto n = straggler_of(e, attempt); !n.empty() && slow.empty() &&
            std::find(place.active.begin(), place.active.end(), n) != place.active.end()) {
            if (!opt.replace_stragglers) say("the broker names node " + n + " a straggler (--straggler replace would swap it for a spare)");
            else if (place.spares.empty()) say("the broker names node " + n + " a straggler; no spare to swap it for: it stays");
            else {
                slow = n, seal_at_slow = latest_seal;
                say("the broker names node " + n + " a straggler: swapped for spare " + place.spares.front() + " at the next sealed checkpoint");
            }
        }
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

// What came to the batch script goes on to the step's tasks. One that ends the job also ends the supervision: the step's
// end is then the end, nothing is relaunched.
void Supervisor::forward_signals() {
    const int got = take_signals();
    if (!got) return;
    // To the step's tasks through Slurm: srun itself takes SIGTERM as
    // "force the step's end" (SIGKILL to the tasks), which leaves a rank
    // no time to save anything.
    const std::string step = step_named(job, step_name);
    for (int sig : kForwarded) {
        if (!(got & (1 << sig))) continue;
        std::string out;
        if (step.empty() || run_capture({"scancel", "--quiet", "-s", sigabbrev_np(sig), step}, out, 5000) != 0)
            if (srun > 0) kill(srun, sig);
        if (sig != SIGUSR1 && sig != SIGUSR2 && !stop_signal) {
            stop_signal = sig;
            say(std::string("got SIG") + sigabbrev_np(sig) + ": passed to the step; no relaunch after it");
        }
    }
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
    catch_signals();
    return supervise();
}

int Supervisor::supervise() {
    if ((srun = launch()) < 0) return 1;
    for (;;) {
        std::vector<std::string> dead;
        int code = 0;
        double exited_at = 0;
        for (;;) {
            forward_signals();
            if (exited_at == 0 && wait_exit(code)) {
                if (code == 0) return say("the step ended 0"), 0;
                if (stop_signal)
                    return give_up(std::string("the step ended ") + std::to_string(code) + " after SIG" + std::string(sigabbrev_np(stop_signal)), code);
                exited_at = now_s();
            }
            read_events(dead);
            if (!dead.empty() && !stop_signal) break;
            if (exited_at == 0 && !stop_signal && swap_due()) break;
            // A program error is the broker's word (no node FAULT in the
            // grace time); while its events cannot be read the wait goes
            // on, three times the grace at most.
            const double waited = exited_at > 0 ? now_s() - exited_at : 0;
            if (exited_at > 0 && waited >= opt.grace && (unread == 0 || waited >= 3 * opt.grace))
                return give_up("the step exited " + std::to_string(code) + " with no node of it dead (no node FAULT from the broker within " +
                               std::to_string(int(waited)) + " s" +
                               (unread ? "; its events could not be read: " + unread_why : std::string()) + "): a program error, not retried",
                               code);
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        const double seen = now_s();
        if (dead.empty()) {   // a straggler's swap, at the checkpoint sealed since it was named
            say("checkpoint " + latest_seal + " sealed: swapping straggler " + slow + " for a spare");
            const std::vector<std::string> out{slow};
            slow.clear();
            if (int rc = relaunch(out, true, seen); rc != 0) return rc;
            continue;
        }
        say("node " + joined(dead) + " died (the broker's FAULT, confirmed with Slurm)");
        if (auto why = storm.admit(latest_seal); !why.empty()) return give_up(why, kLaunchGaveUp);
        if (std::find(dead.begin(), dead.end(), slow) == dead.end() && !slow.empty()) seal_at_slow = latest_seal;
        else slow.clear();
        if (int rc = relaunch(dead, false, seen); rc != 0) return rc;
    }
}

// The step again without `out` (dead nodes, or a straggler), spares in
// their places, and the broker told (kind restarted, or swapped).
int Supervisor::relaunch(const std::vector<std::string> &out, bool straggler, double seen) {
    std::vector<std::string> took;
    auto next = replace(place, out, took);
    if (!next) return give_up("node " + joined(out) + " died and no spare node is left", kLaunchGaveUp);
    // The step ended here: its agents may not live to say so (scancel ends them too).
    const std::string old = step_named(job, step_name);
    const std::string ended_step = old.find('.') == std::string::npos ? "" : old.substr(old.find('.') + 1);
    end_step();
    place = *next;
    ++restart;
    if ((srun = launch()) < 0) return 1;
    const double relaunch = now_s() - seen;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", relaunch);
    say("relaunched " + std::string(secs) + " s after the " + (straggler ? "seal" : "evidence") + ", without " + joined(out) + ", with " +
        joined(took));
    json::object body{{"kind", straggler ? "swapped" : "restarted"}, {"restart", restart},
                      {"took", json::array(took.begin(), took.end())}, {"nodes", json::array(place.active.begin(), place.active.end())},
                      {"spares", (long long)place.spares.size()}, {"relaunch_seconds", relaunch}};
    body[straggler ? "slow" : "dead"] = json::array(out.begin(), out.end());
    if (!ended_step.empty()) body["ended_step"] = ended_step;
    post(std::move(body));
    return 0;
}

}  // namespace

int launch_main(int argc, char **argv) {
    Supervisor s;
    if (int rc = parse(argc, argv, s.opt); rc != 0) return rc;
    return s.start();
}

}  // namespace shardnet::cli
