// A crash says where it happened: on a fatal signal (SIGSEGV, SIGBUS,
// SIGILL, SIGFPE, SIGABRT) the broker writes one JSON line and its stack
// (glibc's backtrace, frames as binary+offset for addr2line) to stderr,
// then dies of the same signal (a core dump, systemd's restart, as before).
#pragma once

namespace shardnet::broker {

// Installs the handlers. They run on a stack of their own on the main
// thread and on every thread that called report_crashes_on_this_thread()
// (the broker's I/O, store, Slurm, query, forwarder and onward threads), so
// a stack overflow there is reported too; on any other thread an overflow
// dies of the signal unreported.
void report_crashes();
// A signal stack for this thread, kept while it lives (freed at its exit).
void report_crashes_on_this_thread();

}  // namespace shardnet::broker
