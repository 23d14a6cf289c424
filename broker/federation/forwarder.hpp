// Decisions handed to peer brokers (federation/forwarder.cpp): a thread of
// the forwarder's own sends each decision kept 'forwarding' to its peer,
// with backoff, until the peer answers; a decision written for a peer
// wakes it, the broker's stop ends it. Its look every 200 ms also starts
// the witness rounds (Witnesses).
#pragma once
#include <string>
#include <thread>

#include "broker/core/hooks.hpp"
#include "broker/core/module.hpp"
#include "broker/federation/forward_signal.hpp"
#include "broker/federation/stale_jobs.hpp"
#include "broker/federation/witnesses.hpp"
#include "broker/peers/peer_answer.hpp"

namespace shardnet::broker {

class Forwarder : Module {
public:
    Forwarder(Core &core, const ServiceHooks &hooks, Witnesses &witnesses, StaleJobs &stale_jobs)
        : Module(core), hooks_(hooks), witnesses_(witnesses), stale_jobs_(stale_jobs) {}
    ~Forwarder() { stop(); }
    // The thread, when the config names peers (once, at the broker's start).
    // One that threw starts over (after its 200 ms wait), rather than leave
    // the decisions unsent.
    void start();
    // A decision was written for a peer: it goes now, not at the next look.
    void wake() { forward_signal_.wake(); }
    // Ends the thread and waits for it (before the core's threads stop).
    void stop();

private:
    struct ForwardRetry {
        double next = 0, delay = 0;   // the next try, and the backoff that led to it
        int bad_answers = 0;          // answers from the peer that could not be read
        bool without_seals = false;   // the peer answered 413: the carried seals stay behind
    };
    // Sends decisions in state 'forwarding' to their peer until one answers.
    void forward_loop();
    std::string with_environment(const std::string &payload);
    void forward_one(const Store::Forwarding &f, ForwardRetry &retry);
    void forwarded(const Store::Forwarding &f, const PeerDecision &answer);
    // An answer that cannot be read: an event and a retry, until the decision ends.
    void bad_answer(const Store::Forwarding &f, const PeerDecision &answer, ForwardRetry &retry);

    const ServiceHooks &hooks_;
    Witnesses &witnesses_;
    StaleJobs &stale_jobs_;
    std::thread forwarder_;
    ForwardSignal forward_signal_;   // wakes or stops the forwarder (federation/forward_signal.hpp)
};

}  // namespace shardnet::broker
