// shardnet-oci-run RUNTIME ARGS...: the front of oci.conf's RunTimeRun
// (doc/containers.md), e.g.
//   RunTimeRun="/usr/libexec/shardnet/shardnet-oci-run crun --rootless=true run --bundle %b %n.%u.%j.%s.%t"
// Slurm 22.05 runs it once per task, as the job's user, from the task's
// process but with slurmstepd's own environment; the bundle it names is the
// step's config.json that Slurm generated before any SPANK plugin ran.
// ShardNet's plugin left the task's whole environment (its contract, and
// Slurm's per-task SLURM_PROCID etc.) in a file of the step's progress dir
// and that file's path in SHARDNET_OCI_ENV. This writes the task's own copy
// of the bundle beside that file: process.env the task's, its working dir
// the task's, and the progress dir, the checkpoint dir and the working dir
// bind-mounted at the same paths; it makes the mount points in the shared
// rootfs (spank/oci_mounts.hpp); then it execs RUNTIME with --bundle
// pointing there. A task with no SHARDNET_IMAGE_DIGEST whose bundle umoci
// unpacked gets the digest umoci.json records. Without SHARDNET_OCI_ENV (no --shardnet, no plugin) it
// execs RUNTIME ARGS unchanged. With it, any failure (the file unreadable or
// not ours, no bundle config, the task's bundle not written) exits 1 with
// the reason: the task does not run without its environment.
#include <boost/json.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "spank/oci_bundle.hpp"
#include "spank/oci_mounts.hpp"

namespace {

volatile sig_atomic_t g_signal = 0;

void on_signal(int sig) { g_signal = sig; }

[[noreturn]] void exec_args(std::vector<std::string> &args) {
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "shardnet-oci-run: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
}

// The runtime, watched. Slurm runs RunTimeRun through "/bin/sh -c", which a
// cancelled step's SIGTERM ends at once: the runtime, reparented, is then no
// descendant of slurmstepd for the SIGKILL that follows, and the container's
// init (pid 1 of its namespace, which a signal without a handler does not
// reach) keeps the step's output open: the step never ends and the node is
// drained ("Kill task failed"). So the runtime runs as a child: a signal is
// passed on to it (crun passes it to the container), and 3 s after a
// SIGTERM, SIGINT or SIGHUP the container is killed (RUNTIME GLOBALS kill ID
// SIGKILL); its exit status is ours.
int run(std::vector<std::string> &args) {
    size_t sub = 1;
    while (sub < args.size() && args[sub] != "run") ++sub;
    const pid_t child = ::fork();
    if (child < 0) exec_args(args);   // no fork: as before, the runtime in our place
    if (child == 0) exec_args(args);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigemptyset(&sa.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT}) ::sigaction(sig, &sa, nullptr);
    int status = 0, ticks = -1;   // ticks: tenths of a second until the container is killed; -1: not yet asked to end
    for (;;) {
        const pid_t r = ::waitpid(child, &status, WNOHANG);
        if (r == child) break;
        if (r < 0 && errno != EINTR) return 1;
        if (const int sig = g_signal) {
            g_signal = 0;
            ::kill(child, sig);
            if (ticks < 0 && (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)) ticks = 30;
        }
        if (ticks == 0 && sub + 1 < args.size()) {
            std::vector<std::string> kill(args.begin(), args.begin() + long(sub));
            kill.insert(kill.end(), {"kill", args.back(), "SIGKILL"});
            if (const pid_t k = ::fork(); k == 0) {
                const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null >= 0) ::dup2(null, 1), ::dup2(null, 2);
                exec_args(kill);
            } else if (k > 0) {
                while (::waitpid(k, nullptr, 0) < 0 && errno == EINTR) {}
            }
            ticks = 30;   // again, until the runtime is gone
        }
        ::usleep(100000);
        if (ticks > 0) --ticks;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A regular file (never through a symlink) of at most CAP bytes; when OWN,
// only one of ours (we are the job user).
bool read_file(const std::string &path, size_t cap, bool own, std::string &out) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    bool ok = ::fstat(fd, &st) == 0;
    if (ok && !S_ISREG(st.st_mode)) ok = false, errno = EINVAL;
    else if (ok && own && st.st_uid != ::geteuid()) ok = false, errno = EPERM;
    else if (ok && size_t(st.st_size) > cap) ok = false, errno = EFBIG;
    char buf[65536];
    ssize_t n;
    while (ok && (n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
    ::close(fd);
    return ok && out.size() <= cap;
}

bool write_file(const std::string &path, const std::string &text) {
    ::unlink(path.c_str());
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    ::close(fd);
    return ok;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: shardnet-oci-run RUNTIME ARGS... (oci.conf's RunTimeRun; see doc/containers.md)\n");
        return 2;
    }
    std::vector<std::string> args(argv + 1, argv + argc);
    const char *env_file = std::getenv("SHARDNET_OCI_ENV");
    const std::string env_path = env_file ? env_file : "";
    ::unsetenv("SHARDNET_OCI_ENV");
    size_t at = 0;
    const std::string bundle = shardnet::oci::bundle_arg(args, at);
    if (env_path.empty()) return run(args);
    // The plugin meant this task to have ShardNet's environment: without it
    // every rank would see SLURM_PROCID=0 and no SHARDNET_RANK. Refuse.
    auto warn = [&](const std::string &why) {
        std::fprintf(stderr, "shardnet-oci-run: error: %s; the task is not started without ShardNet's environment (doc/containers.md)\n",
                     why.c_str());
        return 1;
    };
    if (bundle.empty()) return warn("the runtime's arguments name no --bundle (oci.conf's RunTimeRun: --bundle %b)");
    std::string env_text, config_text;
    if (!read_file(env_path, 1u << 20, true, env_text)) return warn("cannot read " + env_path + " (SHARDNET_OCI_ENV): " + std::strerror(errno));
    auto env = shardnet::oci::split_env(env_text);
    if (env.empty()) return warn(env_path + " (SHARDNET_OCI_ENV) holds no NAME=VALUE entries");
    // Slurm's generated config.json is root's, readable by the job's group.
    if (!read_file(bundle + "/config.json", 4u << 20, false, config_text)) return warn("cannot read " + bundle + "/config.json");
    // A user's own bundle: its digest, as umoci recorded it (shard run's jobs have theirs).
    shardnet::oci::add_bundle_digest(env, [](const std::string &path) {
        std::string text;
        return read_file(path, 1u << 20, true, text) ? text : std::string();
    });
    // The image's own environment (PATH, CUDA_HOME, ...), from the bundle the
    // job named: Slurm's generated config may have dropped it.
    std::vector<std::string> image_env;
    for (const auto &e : env)
        if (e.rfind("SLURM_CONTAINER=", 0) == 0 && e.size() > 16 && e[16] == '/') {
            std::string text;
            if (read_file(e.substr(16) + "/config.json", 4u << 20, false, text)) image_env = shardnet::oci::config_env(text);
        }
    std::string err;
    const std::string task_config = shardnet::oci::task_config(config_text, bundle, env, err, image_env);
    if (task_config.empty()) return warn(err);
    // Beside the env file: oci-task-N.env -> oci-task-N/config.json.
    std::string dir = env_path;
    if (dir.size() > 4 && dir.compare(dir.size() - 4, 4, ".env") == 0) dir.resize(dir.size() - 4);
    else dir += ".bundle";
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return warn("cannot make " + dir + ": " + std::strerror(errno));
    if (!write_file(dir + "/config.json", task_config)) return warn("cannot write " + dir + "/config.json: " + std::strerror(errno));
    // The mount points, made before the runtime races another task for them
    // in the shared rootfs. One that cannot be made (a user's read-only
    // bundle) is left to the runtime, which says what is wrong.
    std::string rootfs;
    const auto points = shardnet::oci::mount_points(task_config, rootfs);
    if (!rootfs.empty()) shardnet::oci::make_mount_points(rootfs, points);
    shardnet::oci::set_bundle_arg(args, at, dir);
    return run(args);
}
