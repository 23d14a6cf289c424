// Typed reads of the broker's config at a path ("limits.max_connections:
// expected 1..1000000"), the first failure kept; and each section's parser
// (config_sections.cpp). Internal to config/.
#pragma once
#include <boost/json.hpp>
#include <set>
#include <string>

#include "broker/config/config.hpp"

namespace shardnet::broker::config_read {

namespace json = boost::json;

struct Ctx {
    std::string err;
    bool fail(const std::string &path, const std::string &why) {
        if (err.empty()) err = path + ": " + why;
        return false;
    }
};

inline bool only_keys(Ctx &c, const std::string &path, const json::object &o, std::set<std::string> allowed) {
    for (const auto &kv : o)
        if (!allowed.count(std::string(kv.key())) && std::string(kv.key()) != "_doc")
            return c.fail(path.empty() ? std::string(kv.key()) : path + "." + std::string(kv.key()), "unknown key");
    return true;
}

inline bool get_int(Ctx &c, const std::string &path, const json::value &v, long long lo, long long hi, long long &out) {
    if (!v.is_int64() && !v.is_uint64()) return c.fail(path, "expected an integer");
    long long n = v.is_int64() ? v.as_int64() : static_cast<long long>(v.as_uint64());
    if (n < lo || n > hi) return c.fail(path, "expected " + std::to_string(lo) + ".." + std::to_string(hi));
    out = n;
    return true;
}

inline bool get_num(Ctx &c, const std::string &path, const json::value &v, double lo, double hi, double &out) {
    if (!v.is_number()) return c.fail(path, "expected a number");
    const double x = v.to_number<double>();
    if (!(x >= lo && x <= hi)) return c.fail(path, "expected " + std::to_string(lo) + ".." + std::to_string(hi));
    out = x;
    return true;
}

inline bool get_str(Ctx &c, const std::string &path, const json::value &v, std::string &out) {
    if (!v.is_string() || v.as_string().empty()) return c.fail(path, "expected a non-empty string");
    out = std::string(v.as_string());
    return true;
}

inline bool is_hex64(const std::string &s) {
    if (s.size() != 64) return false;
    for (char ch : s)
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    return true;
}

// One section each: "" when good, else what is wrong (path first).
std::string parse_limits(Ctx &c, const json::value *v, BrokerConfig &cfg);
std::string parse_detector(Ctx &c, const json::value *v, BrokerConfig &cfg);
std::string parse_slurm(Ctx &c, const json::value *v, BrokerConfig &cfg);
std::string parse_clusters(Ctx &c, const json::value *v, BrokerConfig &cfg);
std::string parse_peers(Ctx &c, const json::value *v, BrokerConfig &cfg);
std::string parse_worker_keys(Ctx &c, const json::value *v, BrokerConfig &cfg);
std::string parse_tokens(Ctx &c, const json::value *v, BrokerConfig &cfg);
std::string parse_requeue(Ctx &c, const json::value *v, BrokerConfig &cfg);
std::string parse_checkpoint_policy(Ctx &c, const json::value *v, BrokerConfig &cfg);
std::string parse_receipts(Ctx &c, const json::value &v, ReceiptKeys &out);

}  // namespace shardnet::broker::config_read
