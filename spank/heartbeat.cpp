#include "spank/heartbeat.hpp"

#include <boost/json.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/parse_util.hpp"
#include "common/rank_environment.hpp"
#include "common/safe_path.hpp"

namespace shardnet {

std::optional<long long> read_progress(const std::string &path, double *mtime, bool *checkpointing, std::string *committed,
                                       double *took) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st;
    char buf[201];
    ssize_t n = -1;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return std::nullopt;
    std::string_view s(buf, size_t(n));
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
    auto end = s.find_first_of(" \t\r\n");
    std::string_view rest = end == std::string_view::npos ? std::string_view() : s.substr(end);
    if (end != std::string_view::npos) s = s.substr(0, end);
    auto v = parse_int(s, 0, 1LL << 62);
    if (checkpointing) *checkpointing = v && rest.find("checkpointing") != std::string_view::npos;
    if (committed && v) {
        auto at = rest.find("committed");
        if (at != std::string_view::npos) {
            std::string_view name = rest.substr(at + 9);
            while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
            name = name.substr(0, name.find_first_of(" \t\r\n"));
            if (is_safe_name(name, 128)) *committed = std::string(name);
        }
    }
    // "... committed NAME took SECONDS": the trainer timed its write.
    if (took && v) {
        *took = -1;
        if (auto at = rest.find(" took "); at != std::string_view::npos) {
            std::string secs(rest.substr(at + 6, 24));
            secs = secs.substr(0, secs.find_first_of(" \t\r\n"));
            char *end = nullptr;
            const double x = std::strtod(secs.c_str(), &end);
            if (!secs.empty() && end && *end == 0 && x >= 0 && x <= 7 * 86400.0) *took = x;
        }
    }
    if (v && mtime) *mtime = double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) / 1e9;
    return v;
}

std::string commit_json(const std::string &text, unsigned attempt, unsigned rank, unsigned world, std::string &err,
                        double write_seconds) {
    boost::json::array files;
    std::size_t pos = 0, lineno = 0;
    while (pos < text.size()) {
        auto nl = text.find('\n', pos);
        std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        pos = nl == std::string::npos ? text.size() : nl + 1;
        ++lineno;
        if (line.empty()) continue;
        char hash[65] = {}, path[257] = {};
        unsigned long long bytes = 0;
        if (std::sscanf(line.c_str(), "%64s %llu %256s", hash, &bytes, path) != 3 || std::strlen(hash) != 64 ||
            std::strspn(hash, "0123456789abcdef") != 64 || has_control_chars(path) || std::strstr(path, "..")) {
            err = "manifest line " + std::to_string(lineno) + ": expected 'SHA256 BYTES PATH'";
            return "";
        }
        files.push_back(boost::json::object{{"path", path}, {"sha256", hash}, {"bytes", bytes}});
    }
    if (files.empty()) { err = "manifest lists no files"; return ""; }
    boost::json::object body{{"attempt", attempt}, {"rank", rank}, {"world_size", world}, {"files", files}};
    if (write_seconds >= 0) body["write_seconds"] = write_seconds;
    return boost::json::serialize(body);
}

std::string heartbeat_json(const AgentConfig &c, const std::vector<RankState> &ranks, const char *state,
                           unsigned long long seq, double now, bool prelimit_signalled, long long policy,
                           const std::string &stderr_tail) {
    boost::json::array rs;
    for (const auto &r : ranks) {
        boost::json::object o;
        o["rank"] = r.rank;
        o["local_rank"] = r.local_rank;
        if (r.pid > 0) o["pid"] = r.pid; else o["pid"] = nullptr;
        o["checkpointing"] = r.checkpointing;
        if (r.step) {
            o["step"] = *r.step;
            o["progress_age"] = now - r.progress_time;
        } else {
            o["step"] = nullptr;
        }
        if (r.wait_status) {
            int ws = *r.wait_status;
            boost::json::object e;
            if (WIFEXITED(ws)) { e["code"] = WEXITSTATUS(ws); e["signal"] = nullptr; }
            else if (WIFSIGNALED(ws)) { e["code"] = nullptr; e["signal"] = WTERMSIG(ws); }
            else { e["code"] = nullptr; e["signal"] = nullptr; }
            if (r.exit_time > 0) e["time"] = r.exit_time;
            o["exit"] = std::move(e);
        } else {
            o["exit"] = nullptr;
        }
        rs.push_back(std::move(o));
    }
    boost::json::object hb;
    hb["run"] = c.run;
    hb["attempt"] = c.attempt;
    hb["cluster"] = c.cluster;
    hb["node"] = c.node;
    hb["job"] = c.job;
    hb["step"] = c.step;
    hb["seq"] = seq;
    hb["time"] = now;
    hb["interval"] = c.interval;
    hb["state"] = state;
    hb["requeue"] = c.requeue;
    // Where a requeued attempt resumes from: only the batch step says it.
    if (c.step == "batch" && !c.ckpt_dir.empty()) hb["ckpt_dir"] = c.ckpt_dir;
    hb["prelimit_signalled"] = prelimit_signalled;
    if (!c.ckpt_every.empty()) hb["ckpt_every"] = c.ckpt_every;
    // The run's attempt budget: only the batch step says it (kept with the job's spec).
    if (c.step == "batch" && c.max_attempts > 0) hb["max_attempts"] = c.max_attempts;
    // Every step says it: a rank's failed report is judged by its own job's word.
    if (!c.fatal_exit.empty()) hb["fatal_exit"] = boost::json::value_from(c.fatal_exit);
    // --shardnet-on-timeout=requeue: only the batch step says it (kept with the job's spec).
    if (c.step == "batch" && c.requeue_timeout) hb["on_timeout"] = "requeue";
    // --shardnet-spares, --shardnet-straggler=replace: only the batch step says them (kept with the job's spec).
    if (c.step == "batch" && c.spares > 0) hb["spares"] = c.spares;
    if (c.step == "batch" && c.replace_stragglers) hb["straggler"] = "replace";
    if (!stderr_tail.empty()) hb["stderr_tail"] = stderr_tail;
    if (c.ckpt_auto()) hb["policy"] = policy;
    hb["ranks"] = std::move(rs);
    return boost::json::serialize(hb);
}

std::optional<std::string> read_environment_file(const std::string &path, std::string &err) {
    err.clear();
    std::string text;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
    if (std::string why = read_small_file(path, environment::kMaxFileBytes, text); !why.empty()) {
        err = why;
        return "null";
    }
    boost::json::error_code ec;
    boost::json::value v = boost::json::parse(text, ec);
    boost::json::object env;
    if (ec) err = path + ": not JSON";
    else err = environment::read(v, path, env);
    if (!err.empty()) return "null";
    return boost::json::serialize(env);
}

std::string ranks_report_json(const AgentConfig &c, const std::vector<RankState> &ranks) {
    boost::json::array rs;
    for (const auto &r : ranks) {
        boost::json::value env = nullptr;
        if (!r.environment.empty() && r.environment != "null") env = boost::json::parse(r.environment);
        rs.push_back(boost::json::object{{"rank", r.rank}, {"environment", std::move(env)}});
    }
    return boost::json::serialize(boost::json::object{{"attempt", c.attempt}, {"world_size", c.world}, {"node", c.node}, {"ranks", std::move(rs)}});
}

std::vector<SealedCheckpoint> sealed_checkpoints(const std::string &body, std::string &err) {
    std::vector<SealedCheckpoint> out;
    boost::json::error_code ec;
    boost::json::value v = boost::json::parse(body, ec);
    const boost::json::array *list = nullptr;
    if (!ec && v.is_object())
        if (auto *c = v.as_object().if_contains("checkpoints")) list = c->if_array();
    if (!list) { err = "the broker's checkpoint list is not {\"checkpoints\": [...]}"; return {}; }
    for (const auto &c : *list) {
        const boost::json::object *o = c.if_object();
        const boost::json::value *n = o ? o->if_contains("name") : nullptr;
        if (!n || !n->is_string()) { err = "a checkpoint without a name in the broker's list"; return {}; }
        boost::json::object m{{"checkpoint", n->as_string()}, {"sealed_by", "broker"}};
        for (const char *k : {"attempt", "ranks", "sealed_at", "parent"})
            if (auto *f = o->if_contains(k)) m[k] = *f;
        out.push_back(SealedCheckpoint{std::string(n->as_string()), boost::json::serialize(m) + "\n"});
    }
    return out;
}

std::optional<PolicyAnswer> parse_policy_answer(const std::string &body, std::string &err) {
    boost::json::error_code ec;
    boost::json::value v = boost::json::parse(body, ec);
    const boost::json::object *p = nullptr;
    if (!ec && v.is_object())
        if (auto *x = v.as_object().if_contains("policy")) p = x->if_object();
    if (!p) { err = "the broker's heartbeat answer is not {\"policy\": {...}}"; return std::nullopt; }
    auto *version = p->if_contains("version"), *steps = p->if_contains("every_steps"), *secs = p->if_contains("seconds");
    if (!version || !version->is_int64() || version->as_int64() < 1 || !steps || !steps->is_int64() || steps->as_int64() < 1 ||
        steps->as_int64() > 0x7fffffffLL || version->as_int64() > (1LL << 22) || !secs || !secs->is_number()) {
        err = "the broker's checkpoint policy lacks version, every_steps or seconds";
        return std::nullopt;
    }
    return PolicyAnswer{version->as_int64(), steps->as_int64(), secs->to_number<double>()};
}

std::string policy_file_text(const PolicyAnswer &p) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "every_steps=%lld version=%lld seconds=%.3f\n", p.every_steps, p.version, p.seconds);
    return buf;
}

}  // namespace shardnet
