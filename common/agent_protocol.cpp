#include "agent_protocol.hpp"

#include "parse_util.hpp"

namespace shardnet {

std::string encode_agent_config(const AgentConfig &c) {
    std::string s;
    auto kv = [&](const char *k, const std::string &v) { s += k; s += '='; s += v; s += '\n'; };
    kv("url", c.url);
    if (!c.token.empty()) kv("token", c.token);
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
    for (const auto &r : c.ranks) kv("rank", std::to_string(r.rank) + ":" + std::to_string(r.local_rank));
    s += "end\n";
    return s;
}

namespace {
bool split2(const std::string &v, char sep, std::string &a, std::string &b) {
    auto p = v.find(sep);
    if (p == std::string::npos) return false;
    a = v.substr(0, p);
    b = v.substr(p + 1);
    return true;
}
}  // namespace

std::string parse_agent_config_line(const std::string &line, AgentConfig &c, bool &done) {
    if (line == "end") { done = true; return c.url.empty() || c.run.empty() ? "config lacks url or run" : ""; }
    std::string k, v;
    if (!split2(line, '=', k, v) || has_control_chars(v)) return "bad config line '" + k + "'";
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
