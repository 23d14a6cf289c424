#include "common/job_options.hpp"

#include <algorithm>

#include "common/parse_util.hpp"
#include "common/safe_path.hpp"

namespace shardnet {

namespace {
constexpr OptSpec kSpecs[] = {
    {"shardnet", "SHARDNET_RUN", "[RUN]", "Run under ShardNet (heartbeats, checkpoints, requeue); RUN names the run, default CLUSTER.JOBID"},
    {"shardnet-ckpt-dir", "SHARDNET_CKPT_DIR", "DIR", "Checkpoint directory (inside the site checkpoint root or your home)"},
    {"shardnet-ckpt-every", "SHARDNET_CKPT_EVERY", "STEPS|auto", "Checkpoint every STEPS steps, or let the trainer decide (auto)"},
    {"shardnet-heartbeat", "SHARDNET_HEARTBEAT", "SECONDS", "Heartbeat interval in seconds (site bounds apply)"},
    {"shardnet-resume", "SHARDNET_RESUME", "CHECKPOINT|latest", "Resume from a sealed checkpoint (name, absolute path or latest)"},
    {"shardnet-requeue", "SHARDNET_REQUEUE", "federated|local|off", "Where a failed run may be requeued"},
    {"shardnet-max-attempts", "SHARDNET_MAX_ATTEMPTS", "N", "Attempts a run may use at most; with all used, a failure ends it FAILED"},
    {"shardnet-fatal-exit", "SHARDNET_FATAL_EXIT", "CODES", "Exit codes (1-255, comma list) that end the run FAILED, never retried"},
    {"shardnet-on-timeout", "SHARDNET_ON_TIMEOUT", "fail|requeue",
     "At the time limit: fail (default), or requeue from a checkpoint sealed after the pre-limit signal"},
    {"shardnet-spares", "SHARDNET_SPARES", "N",
     "Hold N of the job's nodes as spares for `shard launch` (needs --no-kill; ranks run on the others)"},
    {"shardnet-straggler", "SHARDNET_STRAGGLER", "report|replace",
     "A node the broker names a straggler: report it (default), or swap it for a spare at the next sealed checkpoint (shard launch)"},
};
}  // namespace

const OptSpec &opt_spec(Opt o) { return kSpecs[static_cast<int>(o)]; }

const char *requeue_name(Requeue r) {
    switch (r) {
    case Requeue::federated: return "federated";
    case Requeue::local: return "local";
    case Requeue::off: return "off";
    }
    return "off";
}

std::string check_option(Opt o, const std::string &v, const PlugstackConfig &cfg) {
    if (has_control_chars(v)) return "value has control characters";
    switch (o) {
    case Opt::run:
        if (v.empty() || v == "auto") return "";
        if (!is_safe_name(v)) return "a run id is 1-64 of [A-Za-z0-9._-], starting with a letter or digit";
        return "";
    case Opt::ckpt_dir:
        return check_path_syntax(v);
    case Opt::ckpt_every:
        if (v == "auto" || parse_int(v, 1, 1000000000)) return "";
        return "expected a number of steps (1 or more) or 'auto'";
    case Opt::heartbeat:
        if (parse_int(v, cfg.heartbeat_min, cfg.heartbeat_max)) return "";
        return "expected whole seconds from " + std::to_string(cfg.heartbeat_min) + " to " +
               std::to_string(cfg.heartbeat_max) + " (site bounds)";
    case Opt::resume:
        if (v == "latest" || is_safe_name(v, 128)) return "";
        if (!v.empty() && v[0] == '/') return check_path_syntax(v);
        return "expected 'latest', a checkpoint name or an absolute path";
    case Opt::requeue:
        if (v == "federated" || v == "local" || v == "off") return "";
        return "expected federated, local or off";
    case Opt::max_attempts:
        if (parse_int(v, 1, 1000)) return "";
        return "expected a number of attempts from 1 to 1000";
    case Opt::fatal_exit:
        if (parse_fatal_exit(v)) return "";
        return "expected exit codes from 1 to 255, comma-separated, at most " + std::to_string(kMaxFatalExit) + " (e.g. 3,7)";
    case Opt::on_timeout:
        if (v == "fail" || v == "requeue") return "";
        return "expected fail or requeue";
    case Opt::spares:
        if (parse_int(v, 0, kMaxSpares)) return "";
        return "expected a number of spare nodes from 0 to " + std::to_string(kMaxSpares);
    case Opt::straggler:
        if (v == "report" || v == "replace") return "";
        return "expected report or replace";
    case Opt::count: break;
    }
    return "unknown option";
}

std::string resolve_job_options(const JobOptionsRaw &raw, const PlugstackConfig &cfg, JobOptions &out) {
    out = JobOptions{};
    out.heartbeat = cfg.heartbeat_default;
    for (int i = 0; i < static_cast<int>(Opt::count); ++i) {
        Opt o = static_cast<Opt>(i);
        if (!raw[o]) continue;
        const std::string &v = *raw[o];
        if (auto err = check_option(o, v, cfg); !err.empty())
            return std::string("--") + opt_spec(o).name + "=" + (has_control_chars(v) ? "(unprintable)" : v) + ": " + err;
        switch (o) {
        case Opt::run: out.run = (v == "auto") ? "" : v; break;
        case Opt::ckpt_dir: out.ckpt_dir = v; break;
        case Opt::ckpt_every: out.ckpt_every = v; break;
        case Opt::heartbeat: out.heartbeat = static_cast<int>(*parse_int(v, 1, 86400)); break;
        case Opt::resume: out.resume = v; break;
        case Opt::requeue:
            out.requeue = v == "local" ? Requeue::local : v == "off" ? Requeue::off : Requeue::federated;
            break;
        case Opt::max_attempts: out.max_attempts = static_cast<int>(*parse_int(v, 1, 1000)); break;
        case Opt::fatal_exit: out.fatal_exit = *parse_fatal_exit(v); break;
        case Opt::on_timeout: out.requeue_timeout = v == "requeue"; break;
        case Opt::spares: out.spares = static_cast<int>(*parse_int(v, 0, kMaxSpares)); break;
        case Opt::straggler: out.replace_stragglers = v == "replace"; break;
        case Opt::count: break;
        }
    }
    return "";
}

std::optional<std::vector<int>> parse_fatal_exit(std::string_view v) {
    std::vector<int> codes;
    std::size_t entries = 0;
    // Every entry is a code: no empty one ("3,,7", a trailing comma), no
    // spaces, no 0 (success is never a failure) and nothing past 255 (an
    // exit status is one byte).
    for (std::size_t pos = 0;; ++entries) {
        const auto comma = v.find(',', pos);
        auto code = parse_int(v.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos), 1, 255);
        if (!code || entries >= kMaxFatalExit) return std::nullopt;
        codes.push_back(int(*code));
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    std::sort(codes.begin(), codes.end());
    codes.erase(std::unique(codes.begin(), codes.end()), codes.end());
    return codes;
}

std::string fatal_exit_text(const std::vector<int> &codes) {
    std::string s;
    for (int c : codes) s += (s.empty() ? "" : ",") + std::to_string(c);
    return s;
}

}  // namespace shardnet
