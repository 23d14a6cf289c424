#include "hwloc-probe/isolate.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace shardnet::probe {

int run_isolated(const std::string &what, const std::function<int()> &body) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) return body();
    if (pid == 0) {
        const rlimit no_core{0, 0};  // a crash on bad input is reported, not dumped
        setrlimit(RLIMIT_CORE, &no_core);
        const int rc = body();
        std::fflush(nullptr);
        _exit(rc);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            std::fprintf(stderr, "shardnet-probe: waiting for the reader of topology '%s': %s\n", what.c_str(),
                         std::strerror(errno));
            return 2;
        }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    std::fprintf(stderr,
                 "shardnet-probe: topology '%s' is malformed: hwloc crashed reading it (signal %d, %s); "
                 "objects without cpuset/nodeset attributes or nested thousands deep do this\n",
                 what.c_str(), sig, sig ? strsignal(sig) : "unknown");
    return 2;
}

}  // namespace shardnet::probe
