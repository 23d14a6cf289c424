// A crash says where it happened: on a fatal signal (SIGSEGV, SIGBUS,
// SIGILL, SIGFPE, SIGABRT) the broker writes one JSON line and its stack
// (glibc's backtrace, frames as binary+offset for addr2line) to stderr,
// then dies of the same signal (a core dump, systemd's restart, as before).
#pragma once

namespace shardnet::broker {

// Installs the handlers, on a stack of their own (a stack overflow too).
void report_crashes();

}  // namespace shardnet::broker
