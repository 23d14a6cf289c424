// A crash says where it happened: on a fatal signal (SIGSEGV, SIGBUS,
// SIGILL, SIGFPE, SIGABRT) the broker writes one JSON line and its stack
// (glibc's backtrace, frames as binary+offset for addr2line) to stderr,
// then dies of the same signal (a core dump, systemd's restart, as before).
#pragma once

namespace shardnet::broker {

// Installs the handlers. They run on a stack of their own on the main
// thread and on every thread that called report_crashes_on_this_thread(),
// which every job run under guarded() does (thread_guard.hpp: the I/O,
// store, Slurm, query, forwarder and onward threads, the peer queries), so a
// stack overflow there is reported too.
void report_crashes();
// A signal stack for this thread, kept while it lives (freed at its exit);
// a thread that has one keeps it. Never fails the caller: noexcept.
void report_crashes_on_this_thread() noexcept;

}  // namespace shardnet::broker
