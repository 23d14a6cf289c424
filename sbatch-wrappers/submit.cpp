#include "sbatch-wrappers/submit.hpp"

#include "sbatch-wrappers/image.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace shardnet::cli {

namespace json = boost::json;

namespace {

std::string shell_quote(const std::string &s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

}  // namespace

json::object manifest_of(const JobSpec &s) {
    json::object req{{"nodes", s.nodes}};
    if (!s.accelerator.empty()) req["accelerator_class"] = s.accelerator;
    if (s.gpus_per_node) req["gpus_per_node"] = s.gpus_per_node;
    if (s.gpu_memory_gb > 0) req["gpu_memory_gb"] = s.gpu_memory_gb;
    if (!s.fabric.empty()) req["fabric"] = s.fabric;
    if (!s.clusters.empty()) req["clusters"] = json::value_from(s.clusters);
    if (!s.regions.empty()) req["regions"] = json::value_from(s.regions);
    // In an image: only where containers run (and, with image_layout
    // below, where the pinned layout is read: clusters.NAME.image_roots).
    if (!s.image_pinned.empty()) req["containers"] = true;
    json::object m{{"name", s.name}, {"command", s.command}, {"gpus", s.gpus}, {"nodes", s.nodes},
                   {"tasks_per_node", s.tasks_per_node}, {"checkpoint", json::object{{"root", s.ckpt_root}, {"every", s.ckpt_every}}},
                   {"heartbeat", s.heartbeat}, {"requeue", s.requeue}, {"requires", req}};
    if (!s.image.empty()) m["image"] = s.image;
    if (!s.image_digest.empty()) m["image_digest"] = s.image_digest;
    // Its real path (a home behind a symlink is where the file system is
    // mounted): what the broker compares with each cluster's image_roots.
    if (auto dir = image::layout_of(s.image_pinned); !dir.empty()) {
        if (char real[PATH_MAX]; ::realpath(dir.c_str(), real)) dir = real;
        m["image_layout"] = dir;
    }
    if (!s.time_limit.empty()) m["time_limit"] = s.time_limit;
    if (s.max_attempts > 0) m["max_attempts"] = s.max_attempts;
    if (!s.fatal_exit.empty()) m["fatal_exit"] = s.fatal_exit;
    if (s.on_timeout == "requeue") m["on_timeout"] = s.on_timeout;
    if (s.spares > 0) m["spares"] = s.spares;
    if (s.straggler == "replace") m["straggler"] = s.straggler;
    return m;
}

std::string batch_script(const JobSpec &s, const std::string &shard_path) {
    // With spares, `shard launch` runs the step and relaunches it on a
    // spare when a node dies (shard(1)). The path is this shard's own,
    // which may hold spaces or quotes.
    std::string step = s.spares > 0 ? shell_quote(shard_path) + " launch -- " : "srun ";
    std::string image;
    if (!s.image_pinned.empty()) {
        // The digest pinned at submit, in the script itself: Slurm's own
        // requeue reruns it, and the broker's resubmits it (doc/containers.md).
        image = "# image " + s.image + ", pinned at submit: every attempt runs " + s.image_digest + "\n"
                "export SHARDNET_IMAGE=" + shell_quote(s.image) + " SHARDNET_IMAGE_DIGEST=" + s.image_digest + "\n"
                "bundle=$(" + shell_quote(shard_path) + " bundle " + shell_quote(s.image_pinned) +
                ") || { echo \"shardnet: no bundle of " + s.image_digest + "\" >&2; exit 1; }\n"
                // shard launch's srun takes the bundle from here (srun does not).
                "export SLURM_CONTAINER=\"$bundle\"\n";
        if (s.spares == 0) step = "srun --container=\"$bundle\" ";
    }
    return "#!/bin/bash\n"
           "# written by shard run: " + s.name + "\n"
           "# every rank sees SHARDNET_RUN, SHARDNET_RANK, SHARDNET_CKPT_DIR, SHARDNET_RESUME_FROM, ... (shardnet(8))\n" +
           image + "exec " + step + s.command + "\n";
}

std::vector<std::string> sbatch_argv(const JobSpec &s, const std::string &run, const std::string &cluster,
                                     const std::string &slurm_conf, const std::string &script_path,
                                     const std::vector<std::string> &exclude) {
    std::vector<std::string> a{"sbatch", "--parsable", "--job-name=" + s.name, "--nodes=" + std::to_string(s.nodes + s.spares),
                               "--ntasks-per-node=" + std::to_string(s.tasks_per_node), "--shardnet=" + run,
                               "--shardnet-heartbeat=" + std::to_string(s.heartbeat), "--shardnet-requeue=" + s.requeue,
                               "--shardnet-ckpt-every=" + s.ckpt_every};
    if (!s.ckpt_root.empty()) a.push_back("--shardnet-ckpt-dir=" + s.ckpt_root + "/" + run);
    if (s.max_attempts > 0) a.push_back("--shardnet-max-attempts=" + std::to_string(s.max_attempts));
    if (!s.fatal_exit.empty()) a.push_back("--shardnet-fatal-exit=" + s.fatal_exit);
    if (s.on_timeout == "requeue") a.push_back("--shardnet-on-timeout=requeue");
    // The job must outlive a node for a spare to take its place.
    if (s.spares > 0) a.push_back("--no-kill"), a.push_back("--shardnet-spares=" + std::to_string(s.spares));
    if (s.straggler == "replace") a.push_back("--shardnet-straggler=replace");   // shard launch reads SHARDNET_STRAGGLER
    if (s.gpus_per_node > 0)
        a.push_back("--gres=gpu:" + std::to_string(s.gpus_per_node));
    if (!s.time_limit.empty()) a.push_back("--time=" + s.time_limit);
    if (!exclude.empty()) {
        std::string list;
        for (const auto &n : exclude) list += (list.empty() ? "" : ",") + n;
        a.push_back("--exclude=" + list);
    }
    a.push_back("--output=" + run + "-%j.out");   // job ids repeat across clusters; run ids do not
    if (slurm_conf.empty() && !cluster.empty()) a.push_back("--clusters=" + cluster);
    a.push_back(script_path);
    return a;
}

long long run_sbatch(const std::vector<std::string> &argv, const std::string &slurm_conf, std::string &err) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) { err = std::strerror(errno); return 0; }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    std::vector<char *> args;
    std::vector<std::string> copy = argv;
    for (auto &x : copy) args.push_back(x.data());
    args.push_back(nullptr);
    // The user's environment, with the cluster's SLURM_CONF when we know it.
    std::vector<std::string> env_store;
    for (char **e = environ; *e; ++e)
        if (std::strncmp(*e, "SLURM_CONF=", 11) != 0) env_store.emplace_back(*e);
    if (!slurm_conf.empty()) env_store.push_back("SLURM_CONF=" + slurm_conf);
    std::vector<char *> env;
    for (auto &x : env_store) env.push_back(x.data());
    env.push_back(nullptr);
    pid_t pid;
    int rc = posix_spawnp(&pid, "sbatch", &fa, nullptr, args.data(), env.data());
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    if (rc != 0) { close(out[0]); err = std::string("cannot run sbatch: ") + std::strerror(rc); return 0; }
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(out[0], buf, sizeof buf)) > 0) text.append(buf, size_t(n));
    close(out[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { err = text.empty() ? "sbatch failed" : text; return 0; }
    const long long job = std::atoll(text.c_str() + (text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1));
    if (job <= 0) err = "sbatch answered '" + text + "'";
    return job;
}

}  // namespace shardnet::cli
