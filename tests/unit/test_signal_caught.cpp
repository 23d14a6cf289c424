// Whether a process catches a signal (spank/signal_caught.cpp): the agent
// signals a batch script before the limit only when it does.
#include <csignal>
#include <doctest/doctest.h>
#include <unistd.h>

#include "spank/signal_caught.hpp"

using namespace shardnet;

TEST_CASE("SigCgt: a caught signal's bit, read from /proc and from text") {
    CHECK(status_catches("Name:\tbash\nSigCgt:\t0000000000010002\n", SIGINT));      // bit 1: signal 2
    CHECK(status_catches("SigCgt:\t0000000000010002\n", 17));                      // bit 16: SIGCHLD
    CHECK_FALSE(status_catches("SigCgt:\t0000000000010002\n", SIGUSR1));
    CHECK_FALSE(status_catches("SigCgt:\tzz\n", SIGUSR1));
    CHECK_FALSE(status_catches("Name:\tx\n", SIGUSR1));
    CHECK_FALSE(status_catches("SigCgt:\tffffffffffffffff\n", 0));
    // This process: SIGUSR2 caught once a handler is set, not before.
    std::signal(SIGUSR2, SIG_DFL);
    CHECK_FALSE(catches_signal(getpid(), SIGUSR2));
    std::signal(SIGUSR2, [](int) {});
    CHECK(catches_signal(getpid(), SIGUSR2));
    std::signal(SIGUSR2, SIG_DFL);
    CHECK_FALSE(catches_signal(999999999, SIGUSR2));   // no such process
}
