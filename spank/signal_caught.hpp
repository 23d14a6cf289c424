// Whether a process catches a signal: its SigCgt mask in /proc/PID/status
// (proc(5)). The agent signals a batch script before the time limit only
// when it does: a shell that does not would end, job and all.
#pragma once
#include <string>
#include <sys/types.h>

namespace shardnet {

// false when it does not, or when its status cannot be read (it is gone).
bool catches_signal(pid_t pid, int sig);
// The same, from a status file's text (tests).
bool status_catches(const std::string &status, int sig);

}  // namespace shardnet
