// shard ckpt policy RUN: the broker's checkpoint policy of a run
// (GET /v1/runs/RUN/policy) as people read it: the interval, the model's
// figures, and each input with where it came from.
#pragma once
#include <boost/json/value.hpp>
#include <string>

namespace shardnet::cli {

// The report for the broker's answer; "" when the answer is not a policy.
std::string render_policy(const boost::json::value &answer);

}  // namespace shardnet::cli
