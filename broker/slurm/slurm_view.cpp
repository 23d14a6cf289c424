#include "broker/slurm/slurm_view.hpp"

#include "broker/slurm/slurm.hpp"

#include <arpa/inet.h>
#include <cctype>
#include <string_view>
#include <cerrno>
#include <fcntl.h>
#include <netdb.h>
#include <grp.h>
#include <poll.h>
#include <sys/mman.h>
#include <pwd.h>
#include <spawn.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "broker/slurm/slurm_calls.hpp"
#include "common/find_program.hpp"
#include "broker/slurm/slurm_job.hpp"

extern char **environ;

namespace shardnet::broker {

namespace {
// squeue --json lists every job slurmctld holds (Slurm 22.05 ignores -j
// there): a few KB each.
constexpr std::size_t kMaxSlurmOutput = 64u << 20;

// A started command's end: input written to in_fd (-1: none; closed when
// written), its output read from out_fd up to max bytes, then its exit
// status. Writes and reads take turns, so that an input larger than the
// pipe never waits on an output the command cannot write.
int collect(pid_t pid, int in_fd, const std::string &input, int out_fd, std::size_t max, std::string &out) {
    std::size_t written = 0;
    bool in_open = in_fd >= 0;
    if (in_open && input.empty()) { close(in_fd); in_open = false; }
    pollfd fds[2] = {{-1, POLLOUT, 0}, {out_fd, POLLIN, 0}};
    char rbuf[4096];
    for (;;) {
        fds[0].fd = in_open ? in_fd : -1;
        if (poll(fds, 2, -1) < 0) { if (errno == EINTR) continue; break; }
        if (in_open && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
            const ssize_t n = write(in_fd, input.data() + written, std::min<std::size_t>(input.size() - written, 65536));
            if (n > 0) written += std::size_t(n);
            if (n < 0 || written == input.size()) { close(in_fd); in_open = false; }
        }
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            const ssize_t n = read(out_fd, rbuf, sizeof rbuf);
            if (n <= 0) break;
            if (out.size() < max) out.append(rbuf, std::size_t(n));
        }
    }
    if (in_open) close(in_fd);
    close(out_fd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

int run_slurm(const std::string &slurm_conf, std::vector<std::string> argv, std::string &out, bool with_stderr) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    if (with_stderr) posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    else posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    // Nothing of the broker's but the three: its listening socket, its
    // clients' connections and its files are not the command's, and a
    // command that outlives a broker killed -9 must not hold its port.
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
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
    return collect(pid, -1, "", fds[0], kMaxSlurmOutput, out);
}

int run_slurm_as(const std::string &slurm_conf, const std::vector<std::string> &argv, const RunAs &as, std::string &out) {
    if (argv.empty() || as.uid <= 0 || as.gid <= 0) return -1;
    // Everything the child needs is made here: after fork only
    // async-signal-safe calls are made (the broker has many threads).
    const std::string path = find_program(argv[0], "/usr/bin:/bin:/usr/local/bin");
    if (path.empty()) { out = argv[0] + ": not found"; return -1; }
    struct passwd pw, *res = nullptr;
    std::vector<char> buf(16384);
    std::vector<gid_t> groups(64);
    int ngroups = int(groups.size());
    if (getpwuid_r(uid_t(as.uid), &pw, buf.data(), buf.size(), &res) == 0 && res) {
        if (getgrouplist(pw.pw_name, gid_t(as.gid), groups.data(), &ngroups) < 0) {
            groups.resize(std::size_t(ngroups));
            getgrouplist(pw.pw_name, gid_t(as.gid), groups.data(), &ngroups);
        }
    } else {
        groups = {gid_t(as.gid)};
        ngroups = 1;
    }
    std::vector<std::string> args(argv);
    std::vector<char *> cargs;
    for (auto &a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    std::string conf = "SLURM_CONF=" + slurm_conf;
    std::string home = std::string("HOME=") + (res ? pw.pw_dir : "/");
    std::vector<char *> env{conf.data(), const_cast<char *>("PATH=/usr/bin:/bin"), home.data(), nullptr};
    // The third input, in memory (a file the user cannot see or swap).
    int extra = -1;
    if (as.fd3) {
        extra = memfd_create("shardnet-fd3", MFD_CLOEXEC);
        if (extra < 0) return -1;
        if (write(extra, as.fd3->data(), as.fd3->size()) != ssize_t(as.fd3->size()) || lseek(extra, 0, SEEK_SET) != 0) {
            close(extra);
            return -1;
        }
    }
    int in[2], o[2];
    if (pipe2(in, O_CLOEXEC) != 0) { if (extra >= 0) close(extra); return -1; }
    if (pipe2(o, O_CLOEXEC) != 0) { close(in[0]); close(in[1]); if (extra >= 0) close(extra); return -1; }
    const pid_t pid = fork();
    if (pid < 0) { close(in[0]); close(in[1]); close(o[0]); close(o[1]); if (extra >= 0) close(extra); return -1; }
    if (pid == 0) {
        if (dup2(in[0], 0) < 0 || dup2(o[1], 1) < 0 || dup2(o[1], 2) < 0) _exit(126);
        if (extra >= 0 && (extra == 3 ? fcntl(3, F_SETFD, 0) : dup2(extra, 3)) < 0) _exit(126);
        // The user's command gets none of the broker's descriptors (its
        // sockets, its database), and cannot keep its port past a crash.
        if (close_range(extra >= 0 ? 4 : 3, ~0U, 0) != 0) _exit(126);
        if (setgroups(std::size_t(ngroups), groups.data()) != 0 || setresgid(gid_t(as.gid), gid_t(as.gid), gid_t(as.gid)) != 0 ||
            setresuid(uid_t(as.uid), uid_t(as.uid), uid_t(as.uid)) != 0)
            _exit(126);
        execve(path.c_str(), cargs.data(), env.data());
        _exit(127);
    }
    close(in[0]);
    close(o[1]);
    if (extra >= 0) close(extra);
    // The script is small (a few MB at most) but can pass the pipe's size.
    return collect(pid, in[1], as.input, o[0], 65536, out);
}

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

std::string scontrol_field(const std::string &line, const std::string &key) {
    const std::string k = key + "=";
    std::size_t pos = 0;
    while ((pos = line.find(k, pos)) != std::string::npos) {
        if (pos == 0 || line[pos - 1] == ' ') {
            auto end = line.find_first_of(" \t\r\n", pos);
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

bool node_dead_in_slurm(const std::string &s) {
    // "DOWN+NOT_RESPONDING", "IDLE+FAIL", "ALLOCATED+FAILING", sinfo's
    // "down*": the base state DOWN or a FAIL flag. Never a power state
    // (POWERED_DOWN, POWERING_DOWN: a node put to sleep is not dead).
    std::size_t at = 0;
    for (bool base = true; at <= s.size(); base = false) {
        const auto plus = s.find('+', at);
        std::string word = s.substr(at, plus == std::string::npos ? std::string::npos : plus - at);
        while (!word.empty() && std::string_view("*~#%!$@^-").find(word.back()) != std::string_view::npos) word.pop_back();
        for (auto &c : word) c = char(std::toupper(static_cast<unsigned char>(c)));
        if ((base && word == "DOWN") || word == "FAIL" || word == "FAILING") return true;
        if (plus == std::string::npos) break;
        at = plus + 1;
    }
    return false;
}

bool job_state_running(const std::string &s) {
    return s == "RUNNING" || s == "COMPLETING" || s == "SUSPENDED" || s == "CONFIGURING" || s == "STOPPED";
}

bool job_requeued_by_slurm(const std::string &s) {
    return s == "PENDING" || s == "REQUEUED" || s == "REQUEUE_HOLD" || s == "REQUEUE_FED" || s == "SPECIAL_EXIT";
}

std::optional<std::vector<std::string>> slurm_hostnames(Slurm &calls, const std::string &slurm_conf, const std::string &nodelist) {
    std::string out;
    if (nodelist.empty() || calls.query(slurm_conf, {"scontrol", "show", "hostnames", nodelist}, out) != 0) return std::nullopt;
    std::vector<std::string> hosts;
    std::istringstream is(out);
    for (std::string h; is >> h;) hosts.push_back(h);
    return hosts;
}

JobRead find_job_noted(Slurm &calls, const std::string &slurm_conf, const std::string &squeue_json, long long job, SlurmJob &out,
                       boost::json::object *record) {
    JobRead read = find_slurm_job(squeue_json, job, out, record);
    if (read.lookup == JobLookup::unreadable) calls.read_errors.unreadable(slurm_conf, read.why);
    else calls.read_errors.readable(slurm_conf);
    return read;
}

SlurmView ask_slurm(Slurm &calls, const std::string &slurm_conf, long long job, const std::string &node,
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
    const JobRead read = rc == 0 ? find_job_noted(calls, slurm_conf, out, job, j) : JobRead{JobLookup::absent, "squeue failed"};
    if (read.lookup == JobLookup::unreadable) {
        // An answer this broker cannot read says nothing about the job:
        // reported (find_job_noted), and the job's state stays unknown.
        v.unreadable = true;
        v.error = "Slurm's answer cannot be read: " + read.why;
        return v;
    }
    if (read.found()) {
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
        if (!v.node_addr.empty()) v.slurmd_answers = calls.slurmd_answers(v.node_addr, v.node_port, connect_timeout_ms);
    }
    return v;
}

}  // namespace shardnet::broker
