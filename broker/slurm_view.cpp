#include "slurm_view.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "slurm_calls.hpp"
#include "slurm_job.hpp"

extern char **environ;

namespace shardnet::broker {

namespace {
// squeue --json lists every job slurmctld holds (Slurm 22.05 ignores -j
// there): a few KB each.
constexpr std::size_t kMaxSlurmOutput = 64u << 20;
}  // namespace

int run_slurm(const std::string &slurm_conf, std::vector<std::string> argv, std::string &out, bool with_stderr) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    if (with_stderr) posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    else posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    std::vector<char *> args;
    for (auto &a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    std::string conf = "SLURM_CONF=" + slurm_conf;
    std::vector<char *> env{conf.data(), const_cast<char *>("PATH=/usr/bin:/bin"), nullptr};
    pid_t pid;
    int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), env.data());
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) { close(fds[0]); return -1; }
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0)
        if (out.size() < kMaxSlurmOutput) out.append(buf, size_t(n));
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

namespace {

bool tcp_answers(const std::string &host, int port, int timeout_ms) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) return false;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    bool ok = false;
    if (fd >= 0) {
        int rc = connect(fd, res->ai_addr, res->ai_addrlen);
        if (rc == 0) ok = true;
        else if (errno == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            if (poll(&p, 1, timeout_ms) == 1) {
                int err = 0;
                socklen_t len = sizeof err;
                ok = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
            }
        }
        close(fd);
    }
    freeaddrinfo(res);
    return ok;
}

}  // namespace

std::string scontrol_field(const std::string &line, const std::string &key) {
    const std::string k = key + "=";
    std::size_t pos = 0;
    while ((pos = line.find(k, pos)) != std::string::npos) {
        if (pos == 0 || line[pos - 1] == ' ') {
            auto end = line.find(' ', pos);
            return line.substr(pos + k.size(), end == std::string::npos ? std::string::npos : end - pos - k.size());
        }
        pos += k.size();
    }
    return "";
}

bool node_state_bad(const std::string &s) {
    for (const char *bad : {"DOWN", "NOT_RESPONDING", "FAIL", "DRAIN", "POWER", "UNKNOWN", "REBOOT"})
        if (s.find(bad) != std::string::npos) return true;
    return false;
}

bool job_state_running(const std::string &s) {
    return s == "RUNNING" || s == "COMPLETING" || s == "SUSPENDED" || s == "CONFIGURING" || s == "STOPPED";
}

SlurmView ask_slurm(SlurmCalls &calls, const std::string &slurm_conf, long long job, const std::string &node,
                    int connect_timeout_ms) {
    auto run = [&calls](const std::string &conf, std::vector<std::string> argv, std::string &out) {
        return calls.query(conf, argv, out);
    };
    SlurmView v;
    std::string out;
    // The job's state from Slurm's JSON: in `scontrol show job` text the
    // job's name (the user's to choose) comes first and could say JobState=.
    int rc = run(slurm_conf, {std::begin(kSqueueJson), std::end(kSqueueJson)}, out);
    SlurmJob j;
    if (rc == 0 && find_slurm_job(out, job, j).empty()) {
        v.controller_ok = true;
        v.job_state = j.state;
    } else {
        // A purged job and an unreachable controller both fail; ping tells them apart.
        std::string ping;
        if (run(slurm_conf, {"scontrol", "ping"}, ping) == 0 && ping.find("UP") != std::string::npos) {
            v.controller_ok = true;
            v.job_state = "GONE";
        } else {
            v.error = "slurmctld did not answer scontrol";
            return v;
        }
    }
    out.clear();
    if (run(slurm_conf, {"scontrol", "-o", "show", "node", node}, out) == 0) {
        v.node_state = scontrol_field(out, "State");
        v.node_addr = scontrol_field(out, "NodeAddr");
        std::string port = scontrol_field(out, "Port");
        v.node_port = port.empty() ? 6818 : std::atoi(port.c_str());
        if (!v.node_addr.empty()) v.slurmd_answers = tcp_answers(v.node_addr, v.node_port, connect_timeout_ms);
    }
    return v;
}

}  // namespace shardnet::broker
