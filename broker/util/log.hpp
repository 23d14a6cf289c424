// The broker's log: one JSON object per line on stderr (journald and any
// log shipper read it as is), each with its time, level and message. The
// one writer of log lines; never throws.
#pragma once
#include <boost/json/object.hpp>

namespace shardnet::broker {

// level: "info", "warn" or "error". fields: what the line is about.
void log_json(const char *level, const char *msg, boost::json::object fields = {}) noexcept;

}  // namespace shardnet::broker
