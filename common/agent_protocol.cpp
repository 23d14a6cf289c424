#include "common/agent_protocol.hpp"

#include <cctype>
#include <cstring>

#include "common/job_options.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"

namespace shardnet {

namespace {

bool all_of_set(const std::string &s, const char *extra) {
    for (unsigned char ch : s)
        if (!std::isalnum(ch) && !std::strchr(extra, ch)) return false;
    return true;
}

bool split2(const std::string &v, char sep, std::string &a, std::string &b) {
    auto p = v.find(sep);
    if (p == std::string::npos) return false;
    a = v.substr(0, p);
    b = v.substr(p + 1);
    return true;
}

}  // namespace

bool is_hostlist(const std::string &s) { return all_of_set(s, "._-[],"); }

std::string agent_config_value_error(const std::string &key, const std::string &v) {
    const std::string k = "'" + key + "'";
    if (v.size() > kMaxAgentValue) return "value of " + k + " is longer than " + std::to_string(kMaxAgentValue) + " bytes";
    if (has_control_chars(v)) return "value of " + k + " has control characters";
    if (key == "url" && ((v.rfind("http://", 0) != 0 && v.rfind("https://", 0) != 0) || v.find(' ') != std::string::npos))
        return k + " is not an http(s) URL without spaces";
    if (key == "token" && (v.empty() || v.find(' ') != std::string::npos)) return k + " is empty or has spaces";
    if (key == "nodelist" && !is_hostlist(v)) return k + " is not a Slurm host list (only [A-Za-z0-9._-] and \"[],\")";
    if (key == "node" && (v.empty() || !all_of_set(v, "._-"))) return k + " is not a host name ([A-Za-z0-9._-])";
    if (key == "cluster" && !all_of_set(v, "_-")) return k + " is not a cluster name ([A-Za-z0-9_-])";
    if (key == "run" && !is_safe_name(v)) return k + " is not a run id ([A-Za-z0-9._-], 1-64)";
    if (key == "step" && v != "batch" && !parse_int(v, 0, 0xffffffffLL)) return k + " is not a step id or 'batch'";
    if (key == "requeue" && v != "federated" && v != "local" && v != "off") return k + " is not federated, local or off";
    if (key == "ckpt_every" && v != "auto" && !parse_int(v, 1, 0x7fffffffLL)) return k + " is not 'auto' or a number of steps";
    if (key == "fatal_exit" && !parse_fatal_exit(v)) return k + " is not a list of exit codes 1-255";
    if (key == "on_timeout" && v != "fail" && v != "requeue") return k + " is not fail or requeue";
    if (key == "straggler" && v != "report" && v != "replace") return k + " is not report or replace";
    if ((key == "progress_dir" || key == "ckpt_dir" || key == "ca_file") && !v.empty())
        if (auto err = check_path_syntax(v); !err.empty()) return k + ": " + err;
    return "";
}

std::string encode_agent_config(const AgentConfig &c, std::string &out) {
    out.clear();
    std::string body, err;
    auto kv = [&](const char *k, const std::string &v) {
        if (err.empty()) err = agent_config_value_error(k, v);
        body += k; body += '='; body += v; body += '\n';
    };
    kv("url", c.url);
    if (!c.ca_file.empty()) kv("ca_file", c.ca_file);
    kv("run", c.run);
    kv("attempt", std::to_string(c.attempt));
    kv("cluster", c.cluster);
    if (!c.node.empty()) kv("node", c.node);
    kv("nodelist", c.nodelist);
    kv("nodeid", std::to_string(c.nodeid));
    kv("job", std::to_string(c.job));
    kv("step", c.step);
    kv("interval", std::to_string(c.interval));
    kv("timeout_ms", std::to_string(c.timeout_ms));
    kv("prelimit", std::to_string(c.prelimit_signal) + "@" + std::to_string(c.prelimit_secs));
    kv("progress_dir", c.progress_dir);
    kv("requeue", c.requeue);
    if (!c.ckpt_dir.empty()) kv("ckpt_dir", c.ckpt_dir);
    kv("world", std::to_string(c.world));
    if (!c.ckpt_every.empty()) kv("ckpt_every", c.ckpt_every);
    if (c.max_attempts > 0) kv("max_attempts", std::to_string(c.max_attempts));
    if (!c.fatal_exit.empty()) kv("fatal_exit", fatal_exit_text(c.fatal_exit));
    if (c.requeue_timeout) kv("on_timeout", "requeue");
    if (c.spares > 0) kv("spares", std::to_string(c.spares));
    if (c.replace_stragglers) kv("straggler", "replace");
    for (const auto &r : c.ranks) kv("rank", std::to_string(r.rank) + ":" + std::to_string(r.local_rank));
    if (err.empty() && !c.token.empty()) err = agent_config_value_error("token", c.token);
    if (!err.empty()) return "agent config refused: " + err;
    // The token is copied once, into a buffer of its final size: no
    // reallocation leaves a copy of it in freed memory.
    out.reserve(body.size() + c.token.size() + 16);
    if (!c.token.empty()) { out += "token="; out += c.token; out += '\n'; }
    out += body;
    out += "end\n";
    return "";
}

std::string AgentConfigParser::feed(const std::string &line) {
    AgentConfig &c = cfg_;
    if (done_) return "config line after 'end'";
    if (line == "end") { done_ = true; return c.url.empty() || c.run.empty() ? "config lacks url or run" : ""; }
    std::string k, v;
    if (!split2(line, '=', k, v) || k.empty() || !all_of_set(k, "_")) return "bad config line (expected key=value)";
    if (auto err = agent_config_value_error(k, v); !err.empty()) return err;
    // A second url= (or token=, node=...) must never win over the first.
    if (k != "rank" && !seen_.insert(k).second) return "config key '" + k + "' given twice";
    auto num = [&](long long lo, long long hi) { return parse_int(v, lo, hi); };
    if (k == "url") c.url = v;
    else if (k == "token") c.token = v;
    else if (k == "ca_file") c.ca_file = v;
    else if (k == "run") c.run = v;
    else if (k == "cluster") c.cluster = v;
    else if (k == "node") c.node = v;
    else if (k == "step") c.step = v;
    else if (k == "nodelist") c.nodelist = v;
    else if (k == "nodeid") { auto n = num(0, 0xffffffLL); if (!n) return "bad nodeid"; c.nodeid = unsigned(*n); }
    else if (k == "progress_dir") c.progress_dir = v;
    else if (k == "requeue") c.requeue = v;
    else if (k == "ckpt_dir") c.ckpt_dir = v;
    else if (k == "world") {
        auto n = parse_int(v, 1, 1 << 24);
        if (!n) return "bad world: " + v;
        c.world = unsigned(*n);
    }
    else if (k == "ckpt_every") c.ckpt_every = v;
    else if (k == "max_attempts") { auto n = num(1, 1000); if (!n) return "bad max_attempts"; c.max_attempts = int(*n); }
    else if (k == "fatal_exit") c.fatal_exit = *parse_fatal_exit(v);   // checked above
    else if (k == "on_timeout") c.requeue_timeout = v == "requeue";   // checked above
    else if (k == "spares") { auto n = num(0, kMaxSpares); if (!n) return "bad spares"; c.spares = int(*n); }
    else if (k == "straggler") c.replace_stragglers = v == "replace";   // checked above
    else if (k == "attempt") { auto n = num(1, 1000000); if (!n) return "bad attempt"; c.attempt = unsigned(*n); }
    else if (k == "job") { auto n = num(0, 0xffffffffLL); if (!n) return "bad job"; c.job = (unsigned long)*n; }
    else if (k == "interval") { auto n = num(1, 86400); if (!n) return "bad interval"; c.interval = int(*n); }
    else if (k == "timeout_ms") { auto n = num(1, 600000); if (!n) return "bad timeout_ms"; c.timeout_ms = int(*n); }
    else if (k == "prelimit") {
        std::string a, b;
        if (!split2(v, '@', a, b)) return "bad prelimit";
        auto sig = parse_int(a, 0, 64), secs = parse_int(b, 0, 86400);
        if (!sig || !secs) return "bad prelimit";
        c.prelimit_signal = int(*sig);
        c.prelimit_secs = int(*secs);
    } else if (k == "rank") {
        std::string a, b;
        std::optional<long long> r, l;
        if (!split2(v, ':', a, b) || !(r = parse_int(a, 0, 0xffffffLL)) || !(l = parse_int(b, 0, 0xffffffLL)))
            return "bad rank";
        c.ranks.push_back({unsigned(*r), unsigned(*l)});
    } else return "unknown config key '" + k + "'";
    return "";
}

std::optional<AgentEvent> parse_agent_event(const std::string &line) {
    std::string k, v, a, b;
    auto eq = line.find('=');
    if (eq == std::string::npos) return std::nullopt;
    k = line.substr(0, eq);
    v = line.substr(eq + 1);
    auto colon = v.find(':');
    if (colon == std::string::npos) return std::nullopt;
    auto rank = parse_int(v.substr(0, colon), 0, 0xffffffLL);
    auto val = parse_int(v.substr(colon + 1), -2147483647LL, 2147483647LL);
    if (!rank || !val) return std::nullopt;
    if (k == "pid") return AgentEvent{AgentEvent::pid, unsigned(*rank), int(*val)};
    if (k == "exit") return AgentEvent{AgentEvent::exit, unsigned(*rank), int(*val)};
    return std::nullopt;
}

}  // namespace shardnet
