#include "common/rank_environment.hpp"

#include <algorithm>

namespace shardnet::environment {

namespace {

bool printable(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

}  // namespace

std::string read(const boost::json::value &v, const std::string &where, boost::json::object &out) {
    out.clear();
    const auto *o = v.if_object();
    if (!o) return where + ": expected an object of version strings";
    for (const auto &kv : *o) {
        const std::string name = where + "." + std::string(kv.key());
        if (std::find(std::begin(kFields), std::end(kFields), kv.key()) == std::end(kFields)) return name + ": unknown field";
        if (kv.value().is_null()) continue;
        const auto *s = kv.value().if_string();
        if (!s) return name + ": expected a string or null";
        if (s->empty() || s->size() > kMaxValue || !printable(*s))
            return name + ": expected 1-" + std::to_string(kMaxValue) + " printable ASCII characters";
        out[kv.key()] = *s;
    }
    return "";
}

}  // namespace shardnet::environment
