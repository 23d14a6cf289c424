// A run's lifecycle: the states and the one table of what may follow what.
// Every change of a run's state is checked against it
// (RunRegistry::Writer::set_state, registry.hpp);
// a change the table does not have is refused and logged, never applied.
//
//   (new) -> PENDING        created through the API, before its first job
//   (new) -> RUNNING        first seen through a heartbeat
//   (new) -> RECOVERING     received from a peer broker's decision
//   PENDING -> RUNNING      its first job's first heartbeat
//   RUNNING -> RUNNING      a newer attempt heartbeats (event ATTEMPT)
//   RUNNING|RECOVERING -> DEGRADED    a confirmed FAULT
//   DEGRADED -> DEGRADED    another FAULT of the same attempt
//   DEGRADED -> RECOVERING  a requeue decision placed (here or at a peer)
//   DEGRADED -> RUNNING     a newer attempt heartbeats without a decision of ours
//   RECOVERING -> RUNNING   every node of the new attempt heartbeats (RECOVERED)
//   RECOVERING -> MOVED     a peer broker took the run over
//   MOVED -> RECOVERING     a peer's decision hands it back here
//   RUNNING|DEGRADED -> SUCCEEDED|FAILED   the batch script ended
//   PENDING|RUNNING|DEGRADED|RECOVERING|MOVED -> CANCELLED   its owner cancelled it
// SUCCEEDED, FAILED and CANCELLED are final.
#pragma once
#include <optional>
#include <string_view>

namespace shardnet::broker {

enum class RunState { pending, running, degraded, recovering, moved, succeeded, failed, cancelled };
constexpr int kRunStates = 8;

const char *state_name(RunState s);
std::optional<RunState> state_from_name(std::string_view name);
bool is_final(RunState s);
// from: nullopt for a run not known yet.
bool transition_allowed(std::optional<RunState> from, RunState to);

}  // namespace shardnet::broker
