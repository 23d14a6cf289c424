#include "broker/slurm/name_map.hpp"

#include <boost/json.hpp>

#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;

const std::vector<std::string> &mapped_kinds() {
    static const std::vector<std::string> kinds{"partition", "account", "qos"};
    return kinds;
}

namespace {

std::vector<std::string> split(const std::string &s) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos <= s.size()) {
        const auto comma = s.find(',', pos);
        const std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (!part.empty()) out.push_back(part);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

std::string joined(const std::vector<std::string> &v) {
    std::string out;
    for (const auto &s : v) out += (out.empty() ? "" : ",") + s;
    return out;
}

std::string opt_string(const json::object &opts, const std::string &kind) {
    auto *v = opts.if_contains(kind);
    return v && v->is_string() ? std::string(v->as_string()) : "";
}

}  // namespace

std::string parse_name_table(const json::value &v, const std::string &path, NameTable &out) {
    if (!v.is_object()) return path + ": expected an object of partition/account/qos tables";
    for (const auto &kv : v.as_object()) {
        const std::string kind(kv.key()), at = path + "." + kind;
        if (kind == "_doc") continue;
        bool known = false;
        for (const auto &k : mapped_kinds()) known = known || k == kind;
        if (!known) return at + ": unknown key (expected partition, account or qos)";
        if (!kv.value().is_object()) return at + ": expected an object of SITE_NAME: NAME_HERE (or null: none here)";
        auto &table = out[kind];
        for (const auto &e : kv.value().as_object()) {
            const std::string site(e.key());
            if (!is_safe_name(site)) return at + "." + site.substr(0, 64) + ": a name is 1-64 of [A-Za-z0-9._-]";
            if (e.value().is_null()) { table[site] = std::nullopt; continue; }
            if (!e.value().is_string() || !is_safe_name(std::string(e.value().as_string())))
                return at + "." + site + ": expected this cluster's name (1-64 of [A-Za-z0-9._-]) or null";
            table[site] = std::string(e.value().as_string());
        }
    }
    return "";
}

void site_names(const NameTable &from, json::object &opts) {
    for (const auto &[kind, table] : from) {
        const std::string value = opt_string(opts, kind);
        if (value.empty()) continue;
        std::vector<std::string> names = split(value);
        for (auto &n : names)
            for (const auto &[site, here] : table)
                if (here && *here == n) { n = site; break; }
        opts[kind] = joined(names);
    }
}

std::string local_names(const NameTable &to, json::object &opts, std::vector<std::string> *mapped) {
    for (const auto &[kind, table] : to) {
        const std::string value = opt_string(opts, kind);
        if (value.empty()) continue;
        std::vector<std::string> kept, none;
        for (const auto &n : split(value)) {
            auto it = table.find(n);
            if (it == table.end()) { kept.push_back(n); continue; }
            if (!it->second) { none.push_back(n); continue; }
            if (mapped && *it->second != n) mapped->push_back(kind + " " + n + " -> " + *it->second);
            kept.push_back(*it->second);
        }
        if (kept.empty()) return "no " + kind + " for " + joined(none);
        if (!none.empty() && mapped) mapped->push_back(kind + " " + joined(none) + " left out (none here)");
        opts[kind] = joined(kept);
    }
    return "";
}

std::vector<std::string> job_partitions(const json::object &opts) { return split(opt_string(opts, "partition")); }

}  // namespace shardnet::broker
