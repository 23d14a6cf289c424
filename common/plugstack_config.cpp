#include "common/plugstack_config.hpp"

#include <functional>
#include <map>

#include "common/parse_util.hpp"
#include "common/safe_path.hpp"

namespace shardnet {

namespace {

using Setter = std::function<std::string(const std::string &, PlugstackConfig &)>;

std::string set_abs_path(const std::string &key, const std::string &v, std::string &out) {
    if (auto err = check_path_syntax(v); !err.empty()) return key + ": " + err;
    out = v;
    return "";
}

Setter int_setter(long long lo, long long hi, int PlugstackConfig::*field) {
    return [=](const std::string &v, PlugstackConfig &c) -> std::string {
        auto n = parse_int(v, lo, hi);
        if (!n) return "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
        c.*field = static_cast<int>(*n);
        return "";
    };
}

const std::map<std::string, Setter> &setters() {
    static const std::map<std::string, Setter> table = {
        {"broker", [](const std::string &v, PlugstackConfig &c) -> std::string {
             if (v.rfind("http://", 0) != 0 && v.rfind("https://", 0) != 0)
                 return "expected an http:// or https:// URL";
             if (has_control_chars(v) || v.find(' ') != std::string::npos)
                 return "URL has spaces or control characters";
             c.broker_url = v;
             while (!c.broker_url.empty() && c.broker_url.back() == '/') c.broker_url.pop_back();
             // "https://" or "http:///" would leave "https:": no broker at all.
             const std::size_t host = v.rfind("https://", 0) == 0 ? 8 : 7;
             if (c.broker_url.size() <= host || c.broker_url[host] == '/')
                 return "expected a host after http:// or https://";
             return "";
         }},
        {"token_file", [](const std::string &v, PlugstackConfig &c) { return set_abs_path("path", v, c.token_file); }},
        {"worker_key_file", [](const std::string &v, PlugstackConfig &c) { return set_abs_path("path", v, c.worker_key_file); }},
        {"ca_file", [](const std::string &v, PlugstackConfig &c) { return set_abs_path("path", v, c.ca_file); }},
        {"ckpt_root", [](const std::string &v, PlugstackConfig &c) { return set_abs_path("path", v, c.ckpt_root); }},
        {"progress_root", [](const std::string &v, PlugstackConfig &c) { return set_abs_path("path", v, c.progress_root); }},
        {"agent", [](const std::string &v, PlugstackConfig &c) { return set_abs_path("path", v, c.agent_path); }},
        {"oci_conf", [](const std::string &v, PlugstackConfig &c) { return set_abs_path("path", v, c.oci_conf); }},
        {"heartbeat_min", int_setter(1, 86400, &PlugstackConfig::heartbeat_min)},
        {"heartbeat_max", int_setter(1, 86400, &PlugstackConfig::heartbeat_max)},
        {"heartbeat_default", int_setter(1, 86400, &PlugstackConfig::heartbeat_default)},
        {"timeout_ms", int_setter(50, 60000, &PlugstackConfig::timeout_ms)},
        {"exit_wait_ms", int_setter(0, 10000, &PlugstackConfig::exit_wait_ms)},
        {"start_grace_ms", int_setter(0, 60000, &PlugstackConfig::start_grace_ms)},
        {"mode", [](const std::string &v, PlugstackConfig &c) -> std::string {
             if (v == "optional") c.mode = BrokerMode::optional;
             else if (v == "required") c.mode = BrokerMode::required;
             else return "expected 'optional' or 'required'";
             return "";
         }},
        {"prelimit", [](const std::string &v, PlugstackConfig &c) -> std::string {
             if (v == "off") { c.prelimit_signal = 0; c.prelimit_secs = 0; return ""; }
             auto at = v.find('@');
             if (at == std::string::npos) return "expected SIGNAL@SECONDS (e.g. USR1@120) or 'off'";
             int sig = parse_signal(std::string_view(v).substr(0, at));
             if (sig == 0) return "unknown or disallowed signal '" + v.substr(0, at) + "'";
             auto secs = parse_int(std::string_view(v).substr(at + 1), 1, 86400);
             if (!secs) return "seconds after '@' must be an integer from 1 to 86400";
             c.prelimit_signal = sig;
             c.prelimit_secs = static_cast<int>(*secs);
             return "";
         }},
    };
    return table;
}

}  // namespace

std::vector<std::string> plugstack_keys() {
    std::vector<std::string> keys;
    for (const auto &[k, _] : setters()) keys.push_back(k);
    return keys;
}

std::string parse_plugstack_args(int argc, const char *const argv[], PlugstackConfig &cfg) {
    cfg = PlugstackConfig{};
    std::map<std::string, bool> seen;
    for (int i = 0; i < argc; ++i) {
        std::string arg = argv[i] ? argv[i] : "";
        auto eq = arg.find('=');
        if (eq == std::string::npos || eq == 0)
            return "plugstack argument '" + arg + "' is not key=value";
        std::string key = arg.substr(0, eq), val = arg.substr(eq + 1);
        auto it = setters().find(key);
        if (it == setters().end())
            return "unknown plugstack argument '" + key + "'";
        if (seen[key]) return "plugstack argument '" + key + "' given twice";
        seen[key] = true;
        if (val.empty()) return "plugstack argument '" + key + "' has an empty value";
        if (auto err = it->second(val, cfg); !err.empty())
            return "plugstack argument '" + arg + "': " + err;
    }
    if (cfg.heartbeat_min > cfg.heartbeat_max)
        return "plugstack arguments: heartbeat_min (" + std::to_string(cfg.heartbeat_min) +
               ") is above heartbeat_max (" + std::to_string(cfg.heartbeat_max) + ")";
    if (cfg.heartbeat_default < cfg.heartbeat_min || cfg.heartbeat_default > cfg.heartbeat_max)
        return "plugstack arguments: heartbeat_default (" + std::to_string(cfg.heartbeat_default) +
               ") is outside heartbeat_min..heartbeat_max";
    if (cfg.mode == BrokerMode::required && cfg.broker_url.empty())
        return "plugstack arguments: mode=required needs broker=URL";
    return "";
}

}  // namespace shardnet
