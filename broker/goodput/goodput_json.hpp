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

// A run's marks read from its events so far, kept between reads so that
// each read takes only the events after last_id. A run of seals of one
// attempt keeps its first and its last (what compute() makes of the ones
// between is the same: training goes on from the first to the last), so a
// long run's marks grow with its faults and attempts, not with its seals.
struct MarkLog {
    long long last_id = 0;
    std::vector<Mark> marks;
    std::size_t seals_run = 0;   // seals at the end of marks, in a row, of one attempt
    void add(long long event_id, Mark m);
};

}  // namespace shardnet::broker::goodput
