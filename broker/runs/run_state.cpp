#include "broker/runs/run_state.hpp"

namespace shardnet::broker {

namespace {

constexpr const char *kNames[kRunStates] = {"PENDING", "RUNNING", "DEGRADED", "RECOVERING", "MOVED", "SUCCEEDED", "FAILED", "CANCELLED"};

constexpr unsigned bit(RunState s) { return 1u << static_cast<unsigned>(s); }
constexpr unsigned operator|(RunState a, RunState b) { return bit(a) | bit(b); }
constexpr unsigned operator|(unsigned a, RunState b) { return a | bit(b); }

using S = RunState;
// kNext[from]: the states that may follow from (the table in run_state.hpp).
constexpr unsigned kNext[kRunStates] = {
    /* PENDING */ S::running | S::cancelled,
    /* RUNNING */ S::running | S::degraded | S::succeeded | S::failed | S::cancelled,
    /* DEGRADED */ S::degraded | S::recovering | S::running | S::succeeded | S::failed | S::cancelled,
    /* RECOVERING */ S::running | S::degraded | S::moved | S::cancelled,
    /* MOVED */ S::recovering | S::cancelled,
    /* SUCCEEDED */ 0,
    /* FAILED */ 0,
    /* CANCELLED */ 0,
};
constexpr unsigned kFirst = S::pending | S::running | S::recovering;

}  // namespace

const char *state_name(RunState s) { return kNames[static_cast<int>(s)]; }

std::optional<RunState> state_from_name(std::string_view name) {
    for (int i = 0; i < kRunStates; ++i)
        if (name == kNames[i]) return static_cast<RunState>(i);
    return std::nullopt;
}

bool is_final(RunState s) { return kNext[static_cast<int>(s)] == 0; }

bool transition_allowed(std::optional<RunState> from, RunState to) {
    return ((from ? kNext[static_cast<int>(*from)] : kFirst) & bit(to)) != 0;
}

}  // namespace shardnet::broker
