// The image a run's manifest pins (shard run's "image" and "image_digest",
// doc/containers.md), as GET /v1/runs/ID shows it.
#pragma once
#include <boost/json.hpp>
#include <string>

namespace shardnet::broker {

// RUN["image"] = {"ref": ..., "digest": ...} when MANIFEST (the run's, as
// created) has a digest; RUN unchanged otherwise.
void add_run_image(boost::json::object &run, const std::string &manifest);

}  // namespace shardnet::broker
