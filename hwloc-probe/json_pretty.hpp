// Indented JSON for people and golden files (Boost.JSON prints one line).
#pragma once
#include <boost/json.hpp>
#include <string>

namespace shardnet::probe {
std::string pretty_json(const boost::json::value &v, int indent = 0);
}
