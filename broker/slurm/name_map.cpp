#include "broker/slurm/name_map.hpp"

#include <algorithm>
#include <boost/json.hpp>

#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;

const std::vector<std::string> &mapped_kinds() {
    static const std::vector<std::string> kinds{"partition", "account", "qos", "gpu_type"};
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

std::vector<std::string> split_on(const std::string &s, char sep) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    for (;;) {
        const auto at = s.find(sep, pos);
        out.push_back(s.substr(pos, at == std::string::npos ? std::string::npos : at - pos));
        if (at == std::string::npos) return out;
        pos = at + 1;
    }
}

bool is_count(const std::string &s) { return !s.empty() && parse_int(s, 0, 1LL << 40).has_value(); }

// The options that name GPU types: each entry's type field, rewritten by
// fn (which returns the new type, or nullopt to leave it as it is). gres
// entries are "gpu:TYPE:N", "gpu:TYPE" or "gpu:N"; gpus* entries
// "TYPE:N" or "N".
template <class F> void each_gpu_type(json::object &opts, F fn) {
    for (const char *key : {"gres", "gpus", "gpus_per_task", "gpus_per_socket"}) {
        const std::string value = opt_string(opts, key);
        if (value.empty()) continue;
        const bool gres = std::string_view(key) == "gres";
        std::vector<std::string> entries = split_on(value, ',');
        for (auto &e : entries) {
            std::vector<std::string> f = split_on(e, ':');
            std::size_t at = std::string::npos;   // the type field's index
            if (gres && f.size() >= 2 && f[0] == "gpu" && (f.size() == 3 || !is_count(f[1]))) at = 1;
            if (!gres && f.size() == 2) at = 0;
            if (!gres && f.size() == 1 && !is_count(f[0])) at = 0;
            if (at == std::string::npos || f[at].empty()) continue;
            if (auto t = fn(f[at])) {
                f[at] = *t;
                std::string joined_e;
                for (std::size_t i = 0; i < f.size(); ++i) joined_e += (i ? ":" : "") + f[i];
                e = joined_e;
            }
        }
        std::string out;
        for (const auto &e : entries) out += (out.empty() ? "" : ",") + e;
        opts[key] = out;
    }
}

}  // namespace

std::string parse_name_table(const json::value &v, const std::string &path, NameTable &out) {
    if (!v.is_object()) return path + ": expected an object of partition/account/qos/gpu_type tables";
    for (const auto &kv : v.as_object()) {
        const std::string kind(kv.key()), at = path + "." + kind;
        if (kind == "_doc") continue;
        bool known = false;
        for (const auto &k : mapped_kinds()) known = known || k == kind;
        if (!known) return at + ": unknown key (expected partition, account, qos or gpu_type)";
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
        if (kind == "gpu_type") {
            each_gpu_type(opts, [&](const std::string &t) -> std::optional<std::string> {
                for (const auto &[site, here] : table)
                    if (here && *here == t) return site;
                return std::nullopt;
            });
            continue;
        }
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
        if (kind == "gpu_type") {
            std::string none;
            each_gpu_type(opts, [&](const std::string &t) -> std::optional<std::string> {
                auto it = table.find(t);
                if (it == table.end()) return std::nullopt;
                if (!it->second) { if (none.empty()) none = t; return std::nullopt; }
                if (mapped && *it->second != t) mapped->push_back("gpu_type " + t + " -> " + *it->second);
                return *it->second;
            });
            if (!none.empty()) return "no gpu_type for " + none;
            continue;
        }
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

std::vector<std::string> job_gpu_types(const json::object &opts) {
    std::vector<std::string> types;
    json::object copy = opts;
    each_gpu_type(copy, [&](const std::string &t) -> std::optional<std::string> {
        if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
        return std::nullopt;
    });
    return types;
}

bool node_has_gpu_type(const std::string &node_gres, const std::string &type) {
    for (const auto &e : split_on(node_gres, ',')) {
        const auto f = split_on(e.substr(0, e.find('(')), ':');
        if (f.size() >= 2 && f[0] == "gpu" && f[1] == type) return true;
    }
    return false;
}

}  // namespace shardnet::broker
