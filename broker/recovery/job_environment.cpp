#include "broker/recovery/job_environment.hpp"

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/slurm/job_options.hpp"
#include "broker/core/core.hpp"
#include "broker/store/store.hpp"
#include "broker/util/log.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"

namespace shardnet::broker {


namespace {

bool name_ok(std::string_view n) {
    // A function bash exports (Lmod's and Environment Modules' module()): BASH_FUNC_NAME%%.
    if (n.size() > 12 && n.starts_with("BASH_FUNC_") && n.ends_with("%%")) {
        for (char c : n.substr(10, n.size() - 12))
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':')) return false;
        return true;
    }
    if (n.empty() || n.size() > 255 || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
    for (char c : n)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return true;
}

}  // namespace

std::string read_environment(const boost::json::value &list, std::vector<std::string> &out) {
    const auto *a = list.if_array();
    if (!a) return "environment: expected an array of \"NAME=VALUE\" strings";
    if (a->size() > kEnvMaxEntries) return "environment: more than " + std::to_string(kEnvMaxEntries) + " entries";
    std::vector<std::string> env;
    std::set<std::string> names;
    std::size_t total = 0;
    for (std::size_t i = 0; i < a->size(); ++i) {
        const std::string at = "environment[" + std::to_string(i) + "]";
        const auto *s = (*a)[i].if_string();
        if (!s) return at + ": expected a \"NAME=VALUE\" string";
        const std::string e(*s);
        if (e.find('\0') != std::string::npos) return at + ": has a NUL byte";
        const auto eq = e.find('=');
        if (eq == std::string::npos || !name_ok(std::string_view(e).substr(0, eq)))
            return at + ": not NAME=VALUE with a name of [A-Za-z_][A-Za-z0-9_]* (or BASH_FUNC_NAME%%)";
        if (e.size() > kEnvMaxEntry) return at + " (" + e.substr(0, eq) + "): longer than " + std::to_string(kEnvMaxEntry) + " bytes";
        if (!names.insert(e.substr(0, eq)).second) return at + ": " + e.substr(0, eq) + " twice";
        total += e.size() + 1;
        if (total > kEnvMaxBytes) return "environment: more than " + std::to_string(kEnvMaxBytes) + " bytes";
        env.push_back(e);
    }
    out = std::move(env);
    return "";
}

bool environment_dropped(const std::string &name, const std::vector<std::string> &patterns) {
    if (step_option_variable(name)) return false;
    for (const auto &p : patterns) {
        if (!p.empty() && p.back() == '*') {
            if (name.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0) return true;
        } else if (name == p) {
            return true;
        }
    }
    return false;
}

std::string private_dir(const std::string &database, std::string &err) {
    const std::string dir = std::filesystem::path(database).parent_path().string() + "/decisions";
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) { err = "cannot make " + dir + ": " + std::strerror(errno); return ""; }
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0) { err = "cannot stat " + dir + ": " + std::strerror(errno); return ""; }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        err = dir + " is not a directory of the broker's own with mode 0700 (a symlink, another owner or a wider mode)";
        return "";
    }
    return dir;
}

namespace {

constexpr std::string_view kOriginTag = "#origin ";

std::string origin_record(const EnvironmentOrigin &o) {
    return std::string(kOriginTag) + "uid=" + std::to_string(o.uid) + " cluster=" + o.cluster + " job=" + std::to_string(o.job);
}

// "#origin uid=U cluster=C job=J" (no entry can start with '#': a name
// starts with a letter or '_'); false when it is not one.
bool read_origin(std::string_view rec, EnvironmentOrigin &o) {
    if (!rec.starts_with(kOriginTag)) return false;
    rec.remove_prefix(kOriginTag.size());
    std::string uid, cluster, job;
    for (std::string *field : {&uid, &cluster, &job}) {
        const auto eq = rec.find('='), sp = rec.find(' ');
        if (eq == std::string_view::npos || (sp != std::string_view::npos && sp < eq)) return false;
        *field = std::string(rec.substr(eq + 1, sp == std::string_view::npos ? std::string_view::npos : sp - eq - 1));
        rec = sp == std::string_view::npos ? std::string_view{} : rec.substr(sp + 1);
    }
    const auto u = parse_int(uid, 0, 4294967294LL), j = parse_int(job, 1, 0x7fffffffffffLL);
    if (!u || !j || !is_safe_name(cluster, 128)) return false;
    o = EnvironmentOrigin{*u, cluster, *j};
    return true;
}

std::string origin_words(const EnvironmentOrigin &o) {
    if (o.uid < 0) return "no recorded owner (an earlier version's file)";
    return "uid " + std::to_string(o.uid) + ", job " + o.cluster + "/" + std::to_string(o.job);
}

}  // namespace

std::string write_environment_file(const std::string &dir, const std::string &run, const EnvironmentOrigin &origin,
                                   const std::vector<std::string> &env, bool &existed) {
    existed = false;
    if (!is_safe_name(run)) return "not a run id";
    if (origin.uid < 0 || origin.job <= 0 || !is_safe_name(origin.cluster, 128)) return "no owner and job to keep it for";
    const std::string path = dir + "/" + run + ".environment";
    std::string ignored;
    if (auto kept = read_environment_file(dir, run, ignored); kept && kept->origin == origin) { existed = true; return ""; }
    std::string text = origin_record(origin) + '\0';
    for (const auto &e : env) text += e, text += '\0';
    // A temporary file of this write's own (two writers never share one),
    // mode 0600, renamed into place whole.
    std::string tmp = path + ".XXXXXX";
    const int fd = mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) return "cannot write a temporary file beside " + path + ": " + std::strerror(errno);
    const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size()) && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        unlink(tmp.c_str());
        return "cannot write " + path + ": " + std::strerror(errno);
    }
    return "";
}

void forget_environment_file(const std::string &dir, const std::string &run) {
    if (is_safe_name(run)) unlink((dir + "/" + run + ".environment").c_str());
}

std::optional<KeptEnvironment> read_environment_file(const std::string &dir, const std::string &run, std::string &err) {
    err.clear();
    if (!is_safe_name(run)) return std::nullopt;
    const std::string path = dir + "/" + run + ".environment";
    if (access(path.c_str(), F_OK) != 0) return std::nullopt;
    KeptEnvironment kept;
    if (err = read_small_file(path, kEnvMaxBytes + kEnvMaxEntries + 256, kept.text); !err.empty()) return std::nullopt;
    const auto first = kept.text.find('\0');
    if (first != std::string::npos && read_origin(std::string_view(kept.text).substr(0, first), kept.origin))
        kept.text.erase(0, first + 1);
    return kept;
}

std::string environment_belongs(const EnvironmentOrigin &origin, long long uid,
                                const std::vector<std::pair<std::string, long long>> &run_jobs) {
    const bool job_of_run = std::find(run_jobs.begin(), run_jobs.end(), std::pair{origin.cluster, origin.job}) != run_jobs.end();
    if (origin.uid >= 0 && origin.uid == uid && job_of_run) return "";
    return "the kept environment was written for " + origin_words(origin) + ", not for this run's owner (uid " + std::to_string(uid) +
           ") and one of its jobs: not replayed";
}

std::vector<std::string> KeptEnvironment::entries() const {
    std::vector<std::string> out;
    for (std::size_t pos = 0; pos < text.size();) {
        const auto end = text.find('\0', pos);
        if (end == std::string::npos) break;
        out.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

std::optional<EnvironmentOrigin> spec_origin(Store &store, const std::string &run, long long attempt) {
    const auto row = store.attempts().get_job_spec(run, attempt);
    if (!row || row->job <= 0) return std::nullopt;
    boost::json::error_code ec;
    const boost::json::value v = boost::json::parse(row->spec, ec);
    const boost::json::value *uid = !ec && v.is_object() ? v.as_object().if_contains("uid") : nullptr;
    if (!uid || !uid->is_int64() || uid->as_int64() < 0) return std::nullopt;
    return EnvironmentOrigin{uid->as_int64(), row->cluster, row->job};
}

std::string environment_is_runs(Core &core, const std::string &run, long long uid, const EnvironmentOrigin &origin) {
    std::vector<std::pair<std::string, long long>> jobs;
    {
        auto runs = core.runs_.read();
        if (auto it = runs.find(run); it != runs.end())
            for (const auto &[attempt, j] : it->second.jobs) jobs.emplace_back(j.cluster, j.job);
    }
    // Attempt 1's job as Slurm gave it (a run whose jobs report with an
    // admin token records none in memory).
    if (auto first = core.store_wait([&] { return spec_origin(*core.store_, run, 1); }); first && first->uid == uid)
        jobs.emplace_back(first->cluster, first->job);
    return environment_belongs(origin, uid, jobs);
}

std::optional<EnvironmentOrigin> first_attempt_origin(Core &core, const std::string &run) {
    {
        auto runs = core.runs_.read();
        auto it = runs.find(run);
        if (it == runs.end()) return std::nullopt;
        if (auto j = it->second.jobs.find(1); j != it->second.jobs.end() && it->second.owner_uid >= 0 && j->second.job > 0)
            return EnvironmentOrigin{it->second.owner_uid, j->second.cluster, j->second.job};
    }
    // A run whose jobs report with an admin token: attempt 1's job as its
    // spec captured it from Slurm (owner as Slurm numbers it).
    return spec_origin(*core.store_, run, 1);
}

void adopt_legacy_environment(Core &core, const std::string &dir, const std::string &run) {
    std::string err;
    auto kept = read_environment_file(dir, run, err);
    if (!kept || kept->origin.uid >= 0) return;
    struct stat st;
    const auto created = core.store_->run_created(run);
    const auto origin = first_attempt_origin(core, run);
    if (!created || !origin || lstat((dir + "/" + run + ".environment").c_str(), &st) != 0 || double(st.st_mtime) + 1 < *created) {
        forget_environment_file(dir, run);
        return;
    }
    bool existed = false;
    forget_environment_file(dir, run);
    if (std::string why = write_environment_file(dir, run, *origin, kept->entries(), existed); !why.empty())
        log_json("warn", "an earlier version's kept environment could not be stamped with its owner", boost::json::object{{"run", run}, {"why", why}});
}

std::vector<std::string> kept_environment_runs(const std::string &dir) {
    std::vector<std::string> runs;
    std::error_code ec;
    for (const auto &e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        constexpr std::string_view ext = ".environment";
        if (name.size() > ext.size() && name.ends_with(ext)) runs.push_back(name.substr(0, name.size() - ext.size()));
    }
    return runs;
}

}  // namespace shardnet::broker
