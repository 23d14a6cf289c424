// shard: start from a job, not a vendor console. See shard(1).
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <map>
#include <random>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/parse_util.hpp"
#include "sbatch-wrappers/ckpt_plan.hpp"
#include "sbatch-wrappers/ckpt_policy.hpp"
#include "sbatch-wrappers/client.hpp"
#include "sbatch-wrappers/failure_view.hpp"
#include "sbatch-wrappers/image.hpp"
#include "sbatch-wrappers/kept_heads.hpp"
#include "sbatch-wrappers/launch_cmd.hpp"
#include "sbatch-wrappers/spec.hpp"
#include "sbatch-wrappers/submit.hpp"
#include "sbatch-wrappers/receipts_cmd.hpp"
#include "sbatch-wrappers/verify_cmd.hpp"

using namespace shardnet::cli;
namespace json = boost::json;

namespace {

// Exit codes (shard(1)).
enum Exit { ok = 0, run_failed = 1, usage = 2, broker_error = 3, no_capacity = 4 };

constexpr const char *kUsage =
    "usage: shard [--broker URL] [--token T] [--ca-file F] COMMAND ...\n"
    "  run SPEC.yaml [--gpus N] [--class C] [--cluster C] [--dry-run] [--json]\n"
    "  watch RUN                 live status and events until the run ends (its exit status)\n"
    "  capacity [--class C] [--gpus N] [--gpus-per-node N] [--fabric F] [--region R] [--cluster C] [--json]\n"
    "  runs | show RUN | events RUN | ckpt ls RUN | ckpt verify RUN | ckpt policy RUN | cancel RUN   [--json]\n"
    "  nodes [clear CLUSTER/NODE] [--json]   bad-node memory: nodes that faulted runs (an admin's token)\n"
    "  validate SPEC.yaml        check a spec alone (no broker needed)\n"
    "  bundle oci:DIR@sha256:HEX in a batch script: the image's OCI bundle, unpacked once per digest (doc/containers.md)\n"
    "  launch [--ntasks-per-node N] [--grace S] [--max-stalled-restarts N] -- CMD ARGS\n"
    "                            in a batch script: CMD on the job's active nodes, relaunched on a spare when a node dies\n"
    "  ckpt plan --write-cost D --mtbf D --restart D [--work D] [--json]\n"
    "                            the checkpoint interval for these inputs (D: 90s, 5m, 6h, 2d)\n"
    "  ckpt simulate (--write-cost D --mtbf D --restart D | --grid) [--weibull-shape K] [--seed N] [--json]\n"
    "  receipts RUN [--json]     the run's signed receipts from its brokers (--json: the envelopes)\n"
    "  verify (RUN | FILE...) [--key PUB.pem ...] [--checkpoint-dir DIR [--files LIST.json]] [--head HEAD.json] [--forget-head] [--witness] [--json]\n"
    "                            receipts checked offline: signatures, each run's chain, the log head, the shards on disk\n"
    "                            (RUN: fetched with the log heads and proofs; no --key: the brokers' own keys, with a warning;\n"
    "                            each broker's head must extend the last one verified from it: --forget-head resets that;\n"
    "                            --witness: and be the history the config's other brokers witnessed of it)\n"
    "Broker and token also from SHARD_BROKER, SHARD_TOKEN, SHARD_CA_FILE or ~/.config/shardnet/shard.json.\n";

struct Args {
    std::vector<std::string> pos;
    std::map<std::string, std::string> opt;   // --key value (flags: "1")
    std::map<std::string, std::vector<std::string>> all;   // every value of an option given more than once (--key)
    bool has(const std::string &k) const { return opt.count(k) > 0; }
    std::string get(const std::string &k) const { auto it = opt.find(k); return it == opt.end() ? "" : it->second; }
};

int fail(int code, const std::string &msg) {
    std::fprintf(stderr, "shard: %s\n", msg.c_str());
    return code;
}

bool tty() { return isatty(1); }
const char *bold(bool on) { return on && tty() ? "\033[1m" : ""; }
const char *plain() { return tty() ? "\033[0m" : ""; }

std::string hhmmss(double t) {
    char b[16];
    std::time_t s = std::time_t(t);
    std::strftime(b, sizeof b, "%H:%M:%S", std::localtime(&s));
    return b;
}

std::string str(const json::value &v, const char *k) {
    if (!v.is_object()) return "";
    auto *x = v.as_object().if_contains(k);
    if (!x || x->is_null()) return "";
    if (x->is_string()) return std::string(x->as_string());
    return json::serialize(*x);
}

int print_json(const json::value &v) {
    std::printf("%s\n", json::serialize(v).c_str());
    return ok;
}

// Capacity rows for a spec (or filters), from the broker and its peers.
Answer capacity_query(const CliConfig &cfg, const std::string &cls, int gpus, int gpn, const std::string &fabric,
                      const std::string &region, const std::string &cluster, bool containers = false,
                      const std::string &image_layout = "") {
    std::string q;
    auto add = [&](const char *k, const std::string &v) { if (!v.empty()) q += (q.empty() ? "" : "&") + std::string(k) + "=" + v; };
    add("class", cls);
    add("gpus", gpus ? std::to_string(gpus) : "");
    add("gpus_per_node", gpn ? std::to_string(gpn) : "");
    add("fabric", fabric);
    add("region", region);
    add("cluster", cluster);
    add("containers", containers ? "1" : "");   // an image: only clusters that run containers
    add("image_layout", shardnet::percent_encode(image_layout));   // and read its layout
    return call(cfg.broker, "GET", "/v1/capacity" + (q.empty() ? "" : "?" + q));
}

void print_capacity(const json::value &v) {
    std::printf("%s%-14s %-8s %-6s %-14s %5s %7s %-11s %9s  %s%s\n", bold(true), "BROKER", "CLUSTER", "REGION", "ACCELERATOR", "GPUS",
                "MEM_GB", "FABRIC", "IDLE/ALL", "QUERIED", plain());
    const std::string at = hhmmss(v.as_object().at("queried_at").to_number<double>());
    for (const auto &r : v.as_object().at("clusters").as_array()) {
        if (str(r, "status") != "ok") {
            std::printf("%-14s %-8s %-6s %-14s %5s %7s %-11s %9s  %s (%s)\n", str(r, "broker").c_str(), str(r, "cluster").c_str(),
                        str(r, "region").c_str(), "?", "?", "?", "?", "unknown", at.c_str(), str(r, "reason").c_str());
            continue;
        }
        std::string mem = str(r, "gpu_memory_gb");
        std::printf("%-14s %-8s %-6s %-14s %5s %7s %-11s %4s/%-4s  %s\n", str(r, "broker").c_str(), str(r, "cluster").c_str(),
                    str(r, "region").c_str(), str(r, "accelerator_class").c_str(), str(r, "gpus_per_node").c_str(),
                    mem.empty() ? "-" : mem.c_str(), str(r, "fabric").c_str(), str(r, "idle_nodes").c_str(), str(r, "total_nodes").c_str(),
                    at.c_str());
    }
    for (const auto &p : v.as_object().at("peers").as_array())
        if (str(p, "status") != "ok")
            std::printf("%-14s %-8s %s\n", str(p, "name").c_str(), "*", ("unknown: " + str(p, "reason")).c_str());
}

int cmd_capacity(const CliConfig &cfg, const Args &a) {
    std::string cls = a.get("class");
    if (!cls.empty() && accelerator_class(cls).empty()) return fail(usage, "--class " + cls + ": not an accelerator class");
    if (!cls.empty()) cls = accelerator_class(cls);
    Answer r = capacity_query(cfg, cls, std::atoi(a.get("gpus").c_str()), std::atoi(a.get("gpus-per-node").c_str()),
                              a.get("fabric"), a.get("region"), a.get("cluster"));
    if (!r.ok()) return fail(broker_error, "capacity: " + r.error);
    if (a.has("json")) return print_json(r.body);
    print_capacity(r.body);
    return ok;
}

// The cluster for a run: enough compatible idle nodes, this broker's own
// clusters first; else a compatible cluster where it will queue.
struct Choice {
    std::string broker, cluster;
    long long idle = 0, total = 0;
    bool queued = false;
    std::vector<std::string> no_runtime;   // nodes a run in an image must not get (the broker's probes say so)
};
std::optional<Choice> choose(const json::value &cap, const JobSpec &s, const std::string &home, const std::string &start) {
    std::map<std::pair<std::string, std::string>, Choice> by;
    for (const auto &r : cap.as_object().at("clusters").as_array()) {
        if (str(r, "status") != "ok") continue;
        const std::string cl = str(r, "cluster");
        if (!s.clusters.empty() && std::find(s.clusters.begin(), s.clusters.end(), cl) == s.clusters.end()) continue;
        if (!start.empty() && cl != start) continue;
        auto &c = by[{str(r, "broker"), cl}];
        c.broker = str(r, "broker");
        c.cluster = cl;
        c.idle += r.as_object().at("idle_nodes").as_int64();
        c.total += r.as_object().at("total_nodes").as_int64();
        if (auto *n = r.as_object().if_contains("no_runtime"); n && n->is_array() && c.no_runtime.empty())
            for (const auto &x : n->as_array())
                if (x.is_string() && shardnet::is_safe_name(x.as_string())) c.no_runtime.emplace_back(x.as_string());
    }
    std::optional<Choice> best;
    const long long need = s.nodes + s.spares;   // the spares are nodes of the job too
    auto rank = [&](const Choice &c) { return std::make_tuple(c.idle >= need ? 0 : 1, c.broker == home ? 0 : 1, c.cluster); };
    for (auto &[k, c] : by) {
        if (c.total < need) continue;
        if (!best || rank(c) < rank(*best)) best = c;
    }
    if (best) best->queued = best->idle < need;
    return best;
}

std::string new_run_id(const std::string &name) {
    std::random_device rd;
    char b[16];
    std::snprintf(b, sizeof b, "%06x", unsigned(rd()) & 0xffffff);
    return name + "-" + b;
}

// The spec and the options that change it, checked before anything asks a
// broker: a bad spec is the user's to fix wherever they are.
int spec_of(const Args &a, const char *cmd, JobSpec &s) {
    if (a.pos.size() != 1) return fail(usage, std::string(cmd) + ": give one SPEC.yaml");
    if (auto err = load_spec(a.pos[0], s); !err.empty()) return fail(usage, err);
    if (a.has("gpus")) s.gpus = std::atoi(a.get("gpus").c_str());
    if (a.has("class")) {
        s.accelerator = accelerator_class(a.get("class"));
        if (s.accelerator.empty()) return fail(usage, "--class " + a.get("class") + ": not an accelerator class");
    }
    // --cluster picks where the run starts; the spec's clusters (if any)
    // bound where it may ever run, requeues included.
    const std::string start = a.get("cluster");
    if (!start.empty() && !s.clusters.empty() && std::find(s.clusters.begin(), s.clusters.end(), start) == s.clusters.end())
        return fail(usage, "--cluster " + start + " is not among the spec's clusters");
    if (auto err = resolve_shape(s); !err.empty()) return fail(usage, a.pos[0] + ": " + err);
    return ok;
}

int cmd_validate(const Args &a) {
    JobSpec s;
    if (int rc = spec_of(a, "validate", s); rc != ok) return rc;
    std::printf("%s: ok: %d node(s), %d task(s) per node%s\n", a.pos[0].c_str(), s.nodes, s.tasks_per_node,
                s.accelerator.empty() ? "" : (", " + std::to_string(s.gpus_per_node) + "x " + s.accelerator + " per node").c_str());
    return ok;
}

int cmd_run(CliConfig &cfg, const Args &a, JobSpec &s) {
    const std::string start = a.get("cluster");
    Answer cap = capacity_query(cfg, s.accelerator, 0, s.gpus_per_node, s.fabric, s.regions.size() == 1 ? s.regions[0] : "",
                                !start.empty() ? start : s.clusters.size() == 1 ? s.clusters[0] : "", !s.image.empty(),
                                image::layout_of(s.image_pinned));
    if (!cap.ok()) return fail(broker_error, "capacity: " + cap.error);
    const std::string home = str(cap.body, "broker");
    auto choice = choose(cap.body, s, home, start);
    if (!choice) {
        if (!a.has("json")) print_capacity(cap.body);
        return fail(no_capacity, "no cluster has " + std::to_string(s.nodes) + " compatible node(s)" +
                                     (s.accelerator.empty() ? "" : " with " + s.accelerator) + (s.fabric.empty() ? "" : " and " + s.fabric) +
                                     "; nothing submitted");
    }
    const std::string run = new_run_id(s.name);
    BrokerRef owner = cfg.broker;
    if (choice->broker != home) {
        auto it = cfg.brokers.find(choice->broker);
        if (it == cfg.brokers.end())
            return fail(usage, "cluster " + choice->cluster + " belongs to broker " + choice->broker + ", which is not in your config's \"brokers\"");
        owner = it->second;
    }
    const std::string conf = cfg.slurm_conf.count(choice->cluster) ? cfg.slurm_conf.at(choice->cluster) : "";
    // The batch script calls this very shard for `shard launch`.
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const std::string script_text = batch_script(s, n > 0 ? std::string(self, size_t(n)) : std::string("shard"));
    char path[] = "/tmp/shard-run-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return fail(usage, "cannot write the batch script");
    (void)!write(fd, script_text.data(), script_text.size());
    close(fd);
    auto argv = sbatch_argv(s, run, choice->cluster, conf, path, s.image.empty() ? std::vector<std::string>{} : choice->no_runtime);
    json::object manifest = manifest_of(s);
    std::string cmdline;
    for (const auto &x : argv) cmdline += (cmdline.empty() ? "" : " ") + x;
    if (!a.has("json")) {
        std::printf("%sresolution%s  %s/%s: %d node(s) x %d task(s)%s%s, %lld of %lld node(s) idle%s\n", bold(true), plain(),
                    choice->broker.c_str(), choice->cluster.c_str(), s.nodes, s.tasks_per_node,
                    s.gpus ? (", " + std::to_string(s.gpus) + " GPU(s) " + s.accelerator).c_str() : "",
                    s.fabric.empty() ? "" : (", " + s.fabric).c_str(), choice->idle, choice->total, choice->queued ? " (it will queue)" : "");
        std::printf("%srun%s         %s\n", bold(true), plain(), run.c_str());
        if (!s.image_digest.empty())
            std::printf("%simage%s       %s pinned to %s\n", bold(true), plain(), s.image.c_str(), s.image_digest.c_str());
        std::printf("%scheckpoint%s  every %s, %s, requeue %s\n", bold(true), plain(), s.ckpt_every.c_str(),
                    s.ckpt_root.empty() ? "default directory" : (s.ckpt_root + "/" + run).c_str(), s.requeue.c_str());
        std::printf("%smanifest%s    %s\n", bold(true), plain(), json::serialize(manifest).c_str());
    }
    if (a.has("dry-run")) {
        unlink(path);
        if (a.has("json"))
            return print_json(json::object{{"run", run}, {"broker", choice->broker}, {"cluster", choice->cluster}, {"manifest", manifest},
                                           {"sbatch", cmdline}, {"script", script_text}, {"submitted", false}});
        std::printf("%ssbatch%s      %s\n--- batch script ---\n%s--- dry run: nothing submitted ---\n", bold(true), plain(), cmdline.c_str(),
                    script_text.c_str());
        return ok;
    }
    Answer created = call(owner, "POST", "/v1/runs", json::serialize(json::object{{"id", run}, {"manifest", manifest}}));
    if (!created.ok()) { unlink(path); return fail(broker_error, "creating run " + run + " at " + owner.url + ": " + created.error); }
    std::string err;
    const long long job = run_sbatch(argv, conf, err);
    unlink(path);
    if (!job) {
        call(owner, "POST", "/v1/runs/" + run + "/cancel");
        return fail(broker_error, "sbatch on " + choice->cluster + ": " + err);
    }
    if (a.has("json"))
        return print_json(json::object{{"run", run}, {"broker", choice->broker}, {"cluster", choice->cluster}, {"job", job}, {"submitted", true}});
    std::printf("%ssubmitted%s   job %lld on %s; follow it with: shard watch %s\n", bold(true), plain(), job, choice->cluster.c_str(), run.c_str());
    return ok;
}

int exit_of(const std::string &state) { return state == "SUCCEEDED" ? ok : run_failed; }
bool ended(const std::string &state) { return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED"; }

int cmd_watch(CliConfig &cfg, const Args &a) {
    if (a.pos.size() != 1) return fail(usage, "watch: give one RUN");
    const std::string run = a.pos[0];
    BrokerRef b = cfg.broker;
    long long after = 0;
    int misses = 0;
    std::string sealed = "-";   // the last sealed checkpoint seen
    std::string policy;         // the last checkpoint policy line ("ckpt every 480 steps · Daly · M 6.1 h · δ 41 s")
    for (;;) {
        Answer ev = call(b, "GET", "/v1/runs/" + run + "/events?after=" + std::to_string(after), "", 5000);
        if (!ev.ok()) {
            if (ev.status == 404) return fail(usage, "no run " + run + " at " + b.url);
            if (++misses > 30) return fail(broker_error, "broker " + b.url + " unreachable: " + ev.error);
            std::this_thread::sleep_for(std::chrono::seconds(1));
            continue;
        }
        misses = 0;
        std::string moved_to;
        for (const auto &e : ev.body.as_object().at("events").as_array()) {
            after = std::max<long long>(after, e.as_object().at("id").as_int64());
            const std::string kind = str(e, "kind");
            if (tty()) std::printf("\r\033[K");
            std::printf("%s %s%-10s%s %s\n", hhmmss(e.as_object().at("time").to_number<double>()).c_str(), bold(true), kind.c_str(), plain(),
                        str(e, "cause").c_str());
            if (kind == "MOVED") moved_to = str(e.as_object().at("evidence"), "peer");
            if (kind == "SEALED") sealed = str(e.as_object().at("evidence"), "checkpoint");
            if (kind == "POLICY") policy = str(e, "cause");
        }
        std::fflush(stdout);
        if (!moved_to.empty()) {
            auto it = cfg.brokers.find(moved_to);
            if (it == cfg.brokers.end()) return fail(broker_error, "the run moved to broker " + moved_to + ", which is not in your config's \"brokers\"");
            b = it->second;
            after = 0;
            std::printf("-- following %s to broker %s (%s)\n", run.c_str(), moved_to.c_str(), b.url.c_str());
            continue;
        }
        Answer r = call(b, "GET", "/v1/runs/" + run, "", 5000);
        if (r.ok()) {
            const std::string state = str(r.body, "state");
            if (ended(state)) return exit_of(state);
            if (tty()) {
                long long up = 0, n = 0, step = -1;
                for (const auto &w : r.body.as_object().at("workers").as_array())
                    if (str(w, "role") == "step" && w.as_object().at("attempt").as_int64() == r.body.as_object().at("attempt").as_int64()) {
                        ++n;
                        up += str(w, "health") == "healthy";
                        if (w.as_object().at("step").is_int64()) step = std::max<long long>(step, w.as_object().at("step").as_int64());
                    }
                std::printf("\r\033[K%s %s | attempt %s | workers %lld/%lld | step %s | sealed %s%s%s", run.c_str(), state.c_str(),
                            str(r.body, "attempt").c_str(), up, n, step < 0 ? "-" : std::to_string(step).c_str(), sealed.c_str(),
                            policy.empty() ? "" : " | ", policy.c_str());
                std::fflush(stdout);
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
}

// Bad-node memory (GET /v1/bad-nodes): which nodes faulted runs, when,
// and whether placement leaves them out now; `clear CLUSTER/NODE` forgets one.
int cmd_nodes(CliConfig &cfg, const Args &a) {
    if (!a.pos.empty()) {
        const auto slash = a.pos.size() == 2 ? a.pos[1].find('/') : std::string::npos;
        if (a.pos[0] != "clear" || slash == std::string::npos || slash == 0 || slash + 1 == a.pos[1].size())
            return fail(usage, "nodes: give nothing, or clear CLUSTER/NODE");
        const std::string cluster = a.pos[1].substr(0, slash), node = a.pos[1].substr(slash + 1);
        if (!shardnet::is_safe_name(cluster, 128) || !shardnet::is_safe_name(node, 128))
            return fail(usage, "nodes clear: CLUSTER/NODE are names of [A-Za-z0-9._-]");
        Answer r = call(cfg.broker, "POST", "/v1/bad-nodes/" + cluster + "/" + node + "/clear");
        if (!r.ok()) return fail(broker_error, "nodes clear: " + r.error);
        if (a.has("json")) return print_json(r.body);
        std::printf("%s/%s: %s fault(s) forgotten; %s\n", cluster.c_str(), node.c_str(), str(r.body, "cleared_faults").c_str(),
                    str(r.body, "note").c_str());
        return ok;
    }
    Answer r = call(cfg.broker, "GET", "/v1/bad-nodes");
    if (!r.ok()) return fail(broker_error, "nodes: " + r.error);
    if (a.has("json")) return print_json(r.body);
    std::printf("%s%-24s %6s %6s %-14s %-8s %s%s\n", bold(true), "NODE", "FAULTS", "RECENT", "HELD", "LAST", "LAST CAUSE (RUN)", plain());
    for (const auto &n : r.body.as_object().at("nodes").as_array()) {
        const auto &o = n.as_object();
        const bool held = o.at("held").as_bool();
        std::printf("%-24s %6s %6s %-14s %-8s %s (%s)\n", (str(n, "cluster") + "/" + str(n, "node")).c_str(), str(n, "faults").c_str(),
                    str(n, "recent_faults").c_str(), held ? ("until " + hhmmss(o.at("held_until").to_number<double>())).c_str() : "no",
                    hhmmss(o.at("last").to_number<double>()).c_str(), str(n, "last_cause").c_str(), str(n, "last_run").c_str());
    }
    return ok;
}

int cmd_simple(CliConfig &cfg, const std::string &cmd, const Args &a) {
    std::string path;
    std::string method = "GET";
    if (cmd == "runs") path = "/v1/runs";
    else if (a.pos.empty()) return fail(usage, cmd + ": give a RUN");
    else if (cmd == "show") path = "/v1/runs/" + a.pos[0];
    else if (cmd == "events") path = "/v1/runs/" + a.pos[0] + "/events";
    else if (cmd == "cancel") { path = "/v1/runs/" + a.pos[0] + "/cancel"; method = "POST"; }
    Answer r = call(cfg.broker, method, path);
    if (!r.ok()) return fail(r.status == 404 ? usage : broker_error, cmd + ": " + r.error);
    if (a.has("json")) return print_json(r.body);
    if (cmd == "runs") {
        std::printf("%s%-28s %-11s %7s %s%s\n", bold(true), "RUN", "STATE", "ATTEMPT", "OWNER", plain());
        for (const auto &x : r.body.as_object().at("runs").as_array())
            std::printf("%-28s %-11s %7s %s\n", str(x, "id").c_str(), str(x, "state").c_str(), str(x, "attempt").c_str(), str(x, "owner").c_str());
    } else if (cmd == "events") {
        for (const auto &e : r.body.as_object().at("events").as_array())
            std::printf("%s %-10s %s\n", hhmmss(e.as_object().at("time").to_number<double>()).c_str(), str(e, "kind").c_str(), str(e, "cause").c_str());
    } else if (cmd == "show") {
        std::printf("run %s: %s, attempt %s, owner %s\n", str(r.body, "id").c_str(), str(r.body, "state").c_str(), str(r.body, "attempt").c_str(),
                    str(r.body, "owner").c_str());
        if (auto *im = r.body.as_object().if_contains("image"))
            std::printf("image %s pinned to %s (every attempt)\n", str(*im, "ref").c_str(), str(*im, "digest").c_str());
        for (const auto &w : r.body.as_object().at("workers").as_array())
            std::printf("  %-20s %-6s attempt %s ranks %s step %s %s\n", str(w, "node").c_str(), str(w, "role").c_str(), str(w, "attempt").c_str(),
                        str(w, "ranks").c_str(), str(w, "step").c_str(), str(w, "health").c_str());
        // Where its time went: productive, unsealed, lost per fault.
        std::fputs(render_goodput(r.body).c_str(), stdout);
        // Where it went, when it moved to a peer broker (as that broker tells it).
        std::fputs(render_onward(r.body).c_str(), stdout);
        // Why it failed, and what the job last wrote to its standard error.
        if (str(r.body, "state") == "FAILED")
            if (Answer ev = call(cfg.broker, "GET", "/v1/runs/" + a.pos[0] + "/events"); ev.ok()) std::fputs(render_failure(ev.body).c_str(), stdout);
    } else {
        std::printf("%s: %s\n", a.pos[0].c_str(), str(r.body, "state").c_str());
    }
    return ok;
}

int cmd_ckpt(CliConfig &cfg, const Args &a) {
    if (a.pos.size() != 2 || (a.pos[0] != "ls" && a.pos[0] != "verify" && a.pos[0] != "policy"))
        return fail(usage, "ckpt: ls RUN | verify RUN | policy RUN");
    if (a.pos[0] == "policy") {
        Answer p = call(cfg.broker, "GET", "/v1/runs/" + a.pos[1] + "/policy");
        if (!p.ok()) return fail(p.status == 404 ? usage : broker_error, "ckpt policy: " + p.error);
        if (a.has("json")) return print_json(p.body);
        const std::string report = render_policy(p.body);
        if (report.empty()) return fail(broker_error, "ckpt policy: the broker's answer is not a policy");
        std::fputs(report.c_str(), stdout);
        return ok;
    }
    // Every page of the run's seals (the broker sends a page at a time).
    boost::json::array cps;
    for (std::string after = "0";;) {
        Answer r = call(cfg.broker, "GET", "/v1/runs/" + a.pos[1] + "/checkpoints?after=" + after);
        if (!r.ok()) return fail(r.status == 404 ? usage : broker_error, "ckpt: " + r.error);
        const auto *page = r.body.is_object() ? r.body.as_object().if_contains("checkpoints") : nullptr;
        if (!page || !page->is_array()) return fail(broker_error, "ckpt: the broker's answer is not {\"checkpoints\": [...]}");
        for (const auto &c : page->as_array()) cps.push_back(c);
        const auto *next = r.body.as_object().if_contains("next");
        if (!next || !next->is_int64() || page->as_array().empty()) break;
        // A broker's answer is not trusted to end: each page must move on,
        // and a run has at most a million seals here.
        if (next->as_int64() <= std::stoll(after) || cps.size() > 1000000)
            return fail(broker_error, "ckpt: the broker's pages do not move on (next " + std::to_string(next->as_int64()) + " after " + after + ")");
        after = std::to_string(next->as_int64());
    }
    if (a.pos[0] == "ls") {
        if (a.has("json")) return print_json(boost::json::object{{"checkpoints", cps}});
        std::printf("%s%-20s %7s %5s %-20s %s%s\n", bold(true), "CHECKPOINT", "ATTEMPT", "RANKS", "PARENT", "SEALED", plain());
        for (const auto &c : cps)
            std::printf("%-20s %7s %5s %-20s %s\n", str(c, "name").c_str(), str(c, "attempt").c_str(), str(c, "ranks").c_str(),
                        str(c, "parent").empty() ? "-" : str(c, "parent").c_str(), hhmmss(c.as_object().at("sealed_at").to_number<double>()).c_str());
        return ok;
    }
    // verify: the lineage is a chain, each parent sealed before its child.
    std::map<std::string, double> sealed;
    int bad = 0;
    for (const auto &c : cps) {
        const std::string name = str(c, "name"), parent = str(c, "parent");
        const double at = c.as_object().at("sealed_at").to_number<double>();
        if (!parent.empty() && (!sealed.count(parent) || sealed[parent] > at)) {
            std::printf("%s: parent %s is not an earlier sealed checkpoint\n", name.c_str(), parent.c_str());
            ++bad;
        }
        sealed[name] = at;
    }
    std::printf("%zu checkpoint(s), lineage %s\n", cps.size(), bad ? "BROKEN" : "ok");
    return bad ? run_failed : ok;
}

}  // namespace

namespace {

int shard_main(int argc, char **argv) {
    // The batch script's step supervisor has options of its own, and
    // everything after -- is the step's command.
    if (argc >= 2 && std::string(argv[1]) == "launch") return launch_main(argc - 2, argv + 2);
    Args a;
    BrokerRef flags;
    std::string cmd;
    for (int i = 1; i < argc; ++i) {
        std::string s = argv[i];
        if (s == "-h" || s == "--help") { std::fputs(kUsage, stdout); return ok; }
        if (s.rfind("--", 0) == 0) {
            std::string k = s.substr(2), v = "1";
            if (auto eq = k.find('='); eq != std::string::npos) { v = k.substr(eq + 1); k.resize(eq); }
            else if (k != "json" && k != "dry-run" && k != "grid" && k != "forget-head" && k != "witness") {
                if (i + 1 >= argc) return fail(usage, "--" + k + " needs a value\n" + kUsage);
                v = argv[++i];
            }
            static const char *known[] = {"broker", "token", "ca-file", "json", "dry-run", "gpus", "class", "cluster",
                                          "gpus-per-node", "fabric", "region", "write-cost", "mtbf", "restart", "work",
                                          "weibull-shape", "seed", "grid", "key", "checkpoint-dir", "head", "statement",
                                          "payload-type", "from", "forget-head", "witness", "files"};
            if (std::none_of(std::begin(known), std::end(known), [&](const char *x) { return k == x; }))
                return fail(usage, "unknown option --" + k + "\n" + kUsage);
            if (k == "broker") flags.url = v;
            else if (k == "token") flags.token = v;
            else if (k == "ca-file") flags.ca_file = v;
            else a.opt[k] = v, a.all[k].push_back(v);
        } else if (cmd.empty()) {
            cmd = s;
        } else {
            a.pos.push_back(s);
        }
    }
    static const char *commands[] = {"run", "watch", "capacity", "runs", "show", "events", "ckpt", "cancel", "validate", "verify", "receipts", "nodes",
                                     "receipt-sign", "log-head", "bundle"};
    if (cmd.empty() || std::none_of(std::begin(commands), std::end(commands), [&](const char *x) { return cmd == x; }))
        return fail(usage, (cmd.empty() ? std::string("no command") : "unknown command " + cmd) + "\n" + kUsage);
    // The inputs of ckpt plan/simulate mean nothing to any other command.
    if (!(cmd == "ckpt" && a.pos.size() == 1 && (a.pos[0] == "plan" || a.pos[0] == "simulate")))
        for (const char *k : {"write-cost", "mtbf", "restart", "work", "weibull-shape", "seed", "grid"})
            if (a.has(k)) return fail(usage, std::string("--") + k + " is an option of shard ckpt plan / simulate\n" + kUsage);
    // The receipt tools' options mean nothing to any other command.
    const bool receipts = cmd == "verify" || cmd == "receipt-sign" || cmd == "log-head";
    for (const char *k : {"key", "checkpoint-dir", "head", "statement", "payload-type", "from", "forget-head", "witness", "files"})
        if (!receipts && a.has(k)) return fail(usage, std::string("--") + k + " is an option of shard verify / receipt-sign / log-head\n" + kUsage);
    // What needs no broker comes first.
    if (cmd == "verify") {
        for (const char *k : {"statement", "payload-type", "from"})
            if (a.has(k)) return fail(usage, std::string("--") + k + " is not an option of shard verify\n" + kUsage);
        VerifyArgs v{a.pos, a.all["key"], a.get("checkpoint-dir"), a.get("head"), a.has("json"), "", a.has("forget-head"), a.has("witness"), a.get("files")};
        if (!v.files_file.empty() && v.checkpoint_dir.empty()) return fail(usage, std::string("--files FILE goes with --checkpoint-dir DIR\n") + kUsage);
        // Files only: no broker is needed (nor its config). A RUN (a name
        // that is no file, as verify_receipts reads it): its brokers.
        const bool run_named = std::any_of(a.pos.begin(), a.pos.end(), [](const std::string &p) {
            struct stat st;
            return ::stat(p.c_str(), &st) != 0 && shardnet::is_safe_name(p, 128);
        });
        if (!run_named) {
            if (v.forget_head) return fail(usage, "verify: --forget-head is for a RUN fetched from its brokers (their kept log heads)");
            if (v.witness) return fail(usage, "verify: --witness is for a RUN fetched from its brokers (what the others witnessed of each)");
            return verify_receipts(v);
        }
        CliConfig cfg;
        if (auto err = load_cli_config(cfg, flags); !err.empty()) return fail(usage, err);
        // Each broker's last verified head is kept, and the next must extend it.
        std::string why;
        if (v.heads_dir = heads_dir(why); v.heads_dir.empty()) return fail(usage, "verify: " + why);
        return verify_receipts(v, broker_fetcher(cfg, v.witness));
    }
    if (cmd == "receipt-sign") return receipt_sign(a.opt);
    if (cmd == "log-head") return log_head(a.opt, a.pos);
    if (cmd == "validate") return cmd_validate(a);
    if (cmd == "bundle") {
        if (a.pos.size() != 1) return fail(usage, "bundle: give one pinned image, oci:DIR@sha256:HEX");
        std::string dir;
        if (auto err = image::bundle(a.pos[0], dir); !err.empty()) return fail(run_failed, "bundle: " + err);
        std::printf("%s\n", dir.c_str());
        return ok;
    }
    if (cmd == "ckpt" && a.pos.size() == 1 && a.pos[0] == "plan") return ckpt_plan(a.opt);
    if (cmd == "ckpt" && a.pos.size() == 1 && a.pos[0] == "simulate") return ckpt_simulate(a.opt);
    JobSpec spec;
    if (cmd == "run") {
        if (int rc = spec_of(a, "run", spec); rc != ok) return rc;
        // The image, pinned here (no broker needed): every attempt runs this
        // digest, whatever its tag names later. A reference that names no
        // image submits nothing.
        if (!spec.image.empty())
            if (auto err = image::resolve(spec.image, spec.image_pinned, spec.image_digest); !err.empty())
                return fail(usage, a.pos[0] + ": image: " + err + "; nothing submitted");
    }
    CliConfig cfg;
    // A dry run needs the broker for capacity too: the same rules.
    if (auto err = load_cli_config(cfg, flags); !err.empty()) return fail(usage, err);
    if (cmd == "run") return cmd_run(cfg, a, spec);
    if (cmd == "watch") return cmd_watch(cfg, a);
    if (cmd == "capacity") return cmd_capacity(cfg, a);
    if (cmd == "ckpt") return cmd_ckpt(cfg, a);
    if (cmd == "nodes") return cmd_nodes(cfg, a);
    if (cmd == "receipts") {
        if (a.pos.size() != 1) return fail(usage, "receipts: give one RUN");
        return show_receipts(cfg, a.pos[0], a.has("json"));
    }
    return cmd_simple(cfg, cmd, a);
}

}  // namespace

// No input makes shard abort: whatever throws is said, with a nonzero exit.
int main(int argc, char **argv) {
    try {
        return shard_main(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "shard: error: %s\n", e.what());
    } catch (...) {
        std::fprintf(stderr, "shard: error: an unexpected failure\n");
    }
    return 1;
}
