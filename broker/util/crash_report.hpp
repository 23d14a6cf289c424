// A crash says where it happened: on a fatal signal (SIGSEGV, SIGBUS,
// SIGILL, SIGFPE, SIGABRT) the broker writes one JSON line and its stack
// (glibc's backtrace, frames as binary+offset for addr2line) to stderr,
// then dies of the same signal (a core dump, systemd's restart, as before).
#pragma once

namespace shardnet::broker {

// Installs the handlers. The main thread's run on a stack of their own (a
// stack overflow there is reported too); on the other threads they run on
// the faulting stack, so an overflow there dies of the signal unreported.
void report_crashes();

}  // namespace shardnet::broker
