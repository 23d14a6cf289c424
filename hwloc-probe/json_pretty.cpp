#include "hwloc-probe/json_pretty.hpp"

namespace shardnet::probe {

std::string pretty_json(const boost::json::value &v, int indent) {
    const std::string pad(size_t(indent + 2), ' '), end_pad(size_t(indent), ' ');
    if (v.is_object()) {
        const auto &o = v.as_object();
        if (o.empty()) return "{}";
        std::string s = "{\n";
        bool first = true;
        for (const auto &kv : o) {
            if (!first) s += ",\n";
            first = false;
            s += pad + boost::json::serialize(boost::json::value(kv.key())) + ": " + pretty_json(kv.value(), indent + 2);
        }
        return s + "\n" + end_pad + "}";
    }
    if (v.is_array()) {
        const auto &a = v.as_array();
        if (a.empty()) return "[]";
        bool scalars = true;
        for (const auto &e : a) scalars = scalars && !e.is_structured();
        if (scalars) return boost::json::serialize(v);  // short lists stay on one line
        std::string s = "[\n";
        for (size_t i = 0; i < a.size(); ++i) s += pad + pretty_json(a[i], indent + 2) + (i + 1 < a.size() ? ",\n" : "\n");
        return s + end_pad + "]";
    }
    return boost::json::serialize(v);
}

}  // namespace shardnet::probe
