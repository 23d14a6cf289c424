// A run's goodput from its stored events, and as GET /v1/runs/{id},
// `shard show` and the dashboard read it (doc/goodput.md).
#pragma once
#include <boost/json/object.hpp>
#include <optional>
#include <string>

#include "broker/goodput/goodput.hpp"

namespace shardnet::broker::goodput {

// The mark an event is, or none when goodput does not read its kind.
// SEALED becomes SEAL (the checkpoint's name in cause).
std::optional<Mark> mark_of_event(const std::string &kind, double time, const std::string &cause, const std::string &evidence);

boost::json::object to_json(const Goodput &g);

}  // namespace shardnet::broker::goodput
