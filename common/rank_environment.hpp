// What a rank runs with, as its trainer library reports it
// (python/shardnet/environment.py writes it beside the rank's progress
// file, the agent forwards it, the broker signs it into the attempt's
// receipt). It is the trainer's word, untrusted at every hop: each reader
// takes only these fields, each a short printable string.
#pragma once
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <string>
#include <string_view>

namespace shardnet::environment {

// The fields a report may have (doc/receipts.md, "attempt-started").
inline constexpr std::string_view kFields[] = {"python", "torch", "cuda", "cudnn", "nccl", "driver", "image_digest"};
inline constexpr std::size_t kMaxValue = 128;      // bytes of one value
inline constexpr std::size_t kMaxFileBytes = 4096;  // the trainer's file, read up to this

// Strict reading of a report: an object with any of kFields, each a string
// of 1-kMaxValue printable ASCII characters, or null (not known; dropped
// from out). "" or what is wrong, naming the field under where
// ("ranks[0].environment.torch: unknown field").
std::string read(const boost::json::value &v, const std::string &where, boost::json::object &out);

}  // namespace shardnet::environment
