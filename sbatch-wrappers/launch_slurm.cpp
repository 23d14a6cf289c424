#include "sbatch-wrappers/launch_slurm.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "common/parse_util.hpp"

namespace shardnet::cli {

namespace {

std::vector<char *> c_strings(std::vector<std::string> &v) {
    std::vector<char *> out;
    for (auto &s : v) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

extern "C" char **environ;

}  // namespace

int run_capture(const std::vector<std::string> &argv, std::string &out, int timeout_ms) {
    out.clear();
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    std::vector<std::string> copy = argv;
    auto args = c_strings(copy);
    pid_t pid;
    const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) { close(fds[0]); return -1; }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    char buf[4096];
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) { kill(pid, SIGKILL); break; }
        pollfd p{fds[0], POLLIN, 0};
        if (poll(&p, 1, int(left)) <= 0) continue;
        const ssize_t n = read(fds[0], buf, sizeof buf);
        if (n <= 0) break;
        if (out.size() < (1u << 20)) out.append(buf, size_t(n));
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string job_nodes(const std::string &job, std::vector<std::string> &nodes, std::string &batch_host) {
    nodes.clear();
    std::string out;
    if (run_capture({"squeue", "-h", "-j", job, "-o", "%N %B"}, out) != 0) return "squeue -j " + job + " failed: " + out;
    std::istringstream line(out);
    std::string list;
    line >> list >> batch_host;
    if (list.empty()) return "squeue lists no nodes for job " + job;
    if (run_capture({"scontrol", "show", "hostnames", list}, out) != 0) return "scontrol show hostnames " + list + " failed: " + out;
    std::istringstream names(out);
    for (std::string n; names >> n;)
        if (shardnet::is_safe_name(n, 128)) nodes.push_back(n);
    if (!shardnet::is_safe_name(batch_host, 128)) batch_host.clear();
    return nodes.empty() ? "no node names in Slurm's answer for job " + job : "";
}

std::string step_named(const std::string &job, const std::string &name) {
    std::string out;
    if (run_capture({"squeue", "-h", "-s", "-j", job, "-o", "%i %j"}, out) != 0) return "";
    std::istringstream lines(out);
    for (std::string id, n; lines >> id >> n;)
        if (n == name) return id;
    return "";
}

pid_t spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env, std::string &err) {
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    std::vector<std::string> a = argv, e = env;
    auto args = c_strings(a), envp = c_strings(e);
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, args[0], nullptr, &at, args.data(), envp.data());
    posix_spawnattr_destroy(&at);
    if (rc != 0) { err = std::string("cannot run ") + argv[0] + ": " + std::strerror(rc); return -1; }
    return pid;
}

}  // namespace shardnet::cli
