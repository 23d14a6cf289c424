#include "spank/agent_link.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" {
#include <slurm/spank.h>
}

#include "spank/state.hpp"

namespace shardnet {

namespace {

void close_fd(int &fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

void log_agent_output() {
    if (g.agent.err_fd < 0) return;
    char buf[8192];
    std::string text;
    ssize_t n;
    while (text.size() < 65536 && (n = ::read(g.agent.err_fd, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
    std::size_t start = 0;
    while (start < text.size()) {
        auto nl = text.find('\n', start);
        if (nl == std::string::npos) nl = text.size();
        std::string line = text.substr(start, nl - start);
        if (!line.empty()) slurm_info("shardnet: agent: %s", line.c_str());
        start = nl + 1;
    }
}

}  // namespace

std::string agent_start(const AgentSpawn &s) {
    // Everything the child needs is prepared before fork: after it, only
    // async-signal-safe calls until execve.
    std::vector<gid_t> groups(64);
    int ngroups = int(groups.size());
    if (getgrouplist(s.user.c_str(), s.gid, groups.data(), &ngroups) < 0) {
        groups.resize(size_t(ngroups));
        if (getgrouplist(s.user.c_str(), s.gid, groups.data(), &ngroups) < 0) ngroups = 0;
    }
    std::string env_conf = "SLURM_CONF=" + s.slurm_conf;
    char *argv[] = {const_cast<char *>(s.path.c_str()), nullptr};
    char *envp[] = {const_cast<char *>("PATH=/usr/bin:/bin"), const_cast<char *>(env_conf.c_str()), nullptr};
    if (::access(s.path.c_str(), X_OK) != 0) return "agent '" + s.path + "' is not executable: " + std::strerror(errno);

    int ctl[2], st[2], er[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) return std::string("socketpair: ") + std::strerror(errno);
    if (::pipe2(st, O_CLOEXEC) != 0) { ::close(ctl[0]); ::close(ctl[1]); return std::string("pipe: ") + std::strerror(errno); }
    if (::pipe2(er, O_CLOEXEC) != 0) {
        for (int fd : {ctl[0], ctl[1], st[0], st[1]}) ::close(fd);
        return std::string("pipe: ") + std::strerror(errno);
    }
    const bool root = ::getuid() == 0;
    pid_t pid = ::fork();
    if (pid < 0) {
        for (int fd : {ctl[0], ctl[1], st[0], st[1], er[0], er[1]}) ::close(fd);
        return std::string("fork: ") + std::strerror(errno);
    }
    if (pid == 0) {
        if (::dup2(ctl[1], 0) < 0 || ::dup2(st[1], 1) < 0 || ::dup2(er[1], 2) < 0) _exit(121);
        ::closefrom(3);
        if (root) {
            // user_init runs with euid = the user and real uid root; become
            // the user entirely, supplementary groups included.
            if (::seteuid(0) != 0 || ::setgroups(size_t(ngroups), groups.data()) != 0 ||
                ::setresgid(s.gid, s.gid, s.gid) != 0 || ::setresuid(s.uid, s.uid, s.uid) != 0)
                _exit(122);
            uid_t r, e, sv;
            if (::getresuid(&r, &e, &sv) != 0 || r != s.uid || e != s.uid || sv != s.uid) _exit(122);
        }
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        ::setsid();  // signals aimed at the task's process group miss the agent
        // Most of the agent's cost is loading libcurl and its libraries; a
        // step that ends within the grace period (the plugin closes the
        // socket) never needed heartbeats, so it never pays for them.
        if (s.grace_ms > 0) {
            pollfd p{0, POLLRDHUP, 0};
            if (::poll(&p, 1, s.grace_ms) > 0 && (p.revents & (POLLRDHUP | POLLHUP))) _exit(0);
        }
        ::execve(argv[0], argv, envp);
        _exit(127);
    }
    ::close(ctl[1]);
    ::close(st[1]);
    ::close(er[1]);
    ::fcntl(er[0], F_SETFL, O_NONBLOCK);
    ::fcntl(st[0], F_SETFL, O_NONBLOCK);
    g.agent = AgentLink{pid, ctl[0], st[0], er[0], false};
    agent_send(s.config);
    return "";
}

void agent_send(const std::string &line) {
    if (g.agent.pid <= 0 || g.agent.ctl_fd < 0) return;
    // MSG_NOSIGNAL: a dead agent must not SIGPIPE slurmstepd.
    if (::send(g.agent.ctl_fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        slurm_verbose("shardnet: agent did not take an update: %s", std::strerror(errno));
}

std::string agent_wait_verdict(int timeout_ms) {
    if (g.agent.pid <= 0 || g.agent.status_fd < 0) return "agent is not running";
    pollfd p{g.agent.status_fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return "no answer from the agent within " + std::to_string(timeout_ms) + " ms";
    char buf[512];
    ssize_t n = ::read(g.agent.status_fd, buf, sizeof buf - 1);
    if (n <= 0) return "the agent exited before its first heartbeat";
    buf[n] = 0;
    if (buf[0] == 'O') { g.agent.broker_ok = true; return ""; }
    std::string why(buf + 1);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return why.empty() ? "first heartbeat failed" : why;
}

void agent_finish(int wait_ms) {
    if (g.agent.pid <= 0) return;
    // The final report is worth waiting for only when the broker has been
    // answering; otherwise the step ends at once (a broker that is down or
    // silent must not make every step end later).
    if (!g.agent.broker_ok) {
        char c;
        if (::read(g.agent.status_fd, &c, 1) == 1 && c == 'O') g.agent.broker_ok = true;
    }
    if (!g.agent.broker_ok) wait_ms = 0;
    close_fd(g.agent.ctl_fd);  // EOF: the agent sends its final report and exits
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    bool gone = false;
    for (;;) {
        int status;
        pid_t r = ::waitpid(g.agent.pid, &status, WNOHANG);
        if (r == g.agent.pid || (r < 0 && errno == ECHILD)) { gone = true; break; }
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!gone) {
        ::kill(g.agent.pid, SIGKILL);
        // Waiting out the teardown of a killed process costs the step ~0.5 ms;
        // an unreaped agent is reaped by slurmstepd's own wait loop, or init.
        ::waitpid(g.agent.pid, nullptr, WNOHANG);
    }
    log_agent_output();
    close_fd(g.agent.status_fd);
    close_fd(g.agent.err_fd);
    g.agent.pid = 0;
}

}  // namespace shardnet
