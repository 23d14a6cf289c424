// Who may act for a run. A derived worker token names the job it was made
// for (common/worker_token.hpp); the broker keeps, per run, the uid that
// owns it and the job that runs each attempt. A token may report for an
// attempt only when both match: a user cannot report under another user's
// run, claim an attempt the broker did not issue to their job, or make the
// broker act (fence, cancel, seal) on a job that is not the token's own.
#include <pwd.h>
#include <vector>

#include "broker/trust/refusals.hpp"

namespace shardnet::broker {

namespace {
std::string job_name(const std::string &cluster, long long job) { return cluster + "/" + std::to_string(job); }
}  // namespace

std::string refuse_worker(const RunInfo *info, const std::string &run, const TokenEntry &who, long long attempt,
                          const BrokerConfig &cfg) {
    const bool others = info && info->owner_uid >= 0 && (unsigned long long)info->owner_uid != who.uid;
    if (!info || info->owner_uid < 0 || others) {
        // Claiming a run: another job's default id is not to be had.
        if (run != who.cluster + "." + std::to_string(who.job) && run != "job." + std::to_string(who.job))
            if (!reserved_run_id(run, cfg).empty())
                return "run " + run + " is the default run id of another job; this token is for job " +
                       job_name(who.cluster, (long long)who.job);
    }
    // Another user's run answers as a missing one does, word for word, past
    // its first attempt. At attempt 1 a missing id is claimed and a taken
    // one cannot be: the refusal says only that (not whose, nor its state).
    if (!info || others) {
        if (attempt != 1)
            return "run " + run + " is not known to this broker: attempt " + std::to_string(attempt) +
                   " was not issued by it (a new run starts at attempt 1)";
        if (others) return "run id " + run + " is taken; this job cannot claim it (name another with --shardnet=RUN)";
        return "";
    }
    auto it = info->jobs.find(attempt);
    if (it != info->jobs.end()) {
        if (it->second.cluster != who.cluster || (unsigned long long)it->second.job != who.job)
            return "attempt " + std::to_string(attempt) + " of run " + run + " is job " + job_name(it->second.cluster, it->second.job) +
                   "; this token is for job " + job_name(who.cluster, (long long)who.job);
        return "";
    }
    if (attempt == 1) return "";
    // Slurm's own requeue restarts the same job, which then counts its
    // restarts (S_SLURM_RESTART_COUNT): a later attempt of a job that ran an
    // earlier one of this run is that job's.
    for (const auto &[n, rec] : info->jobs)
        if (n < attempt && rec.cluster == who.cluster && (unsigned long long)rec.job == who.job) return "";
    return "attempt " + std::to_string(attempt) + " of run " + run + " was not issued by this broker to job " +
           job_name(who.cluster, (long long)who.job);
}

std::string reserved_run_id(const std::string &id, const BrokerConfig &cfg) {
    // CLUSTER.JOBID is what a job reports under when it names no run: such
    // an id is the job's, and nobody may create it ahead of the job.
    std::vector<std::string> prefixes{"job"};   // the plugin's default where a cluster has no usable name
    for (const auto &[name, conf] : cfg.clusters) prefixes.push_back(name);
    for (const auto &name : prefixes) {
        if (id.size() <= name.size() + 1 || id.compare(0, name.size(), name) != 0 || id[name.size()] != '.') continue;
        if (id.find_first_not_of("0123456789", name.size() + 1) == std::string::npos)
            return "id: " + id + " is the default run id of job " + id.substr(name.size() + 1) + " on cluster " + name +
                   "; only that job may use it";
    }
    return "";
}

namespace detail {

std::string user_name(long long uid) {
    struct passwd pw, *res = nullptr;
    std::vector<char> buf(16384);
    if (uid >= 0 && getpwuid_r(uid_t(uid), &pw, buf.data(), buf.size(), &res) == 0 && res) return pw.pw_name;
    return "uid:" + std::to_string(uid);
}

std::string home_of(long long uid) {
    struct passwd pw, *res = nullptr;
    std::vector<char> buf(16384);
    if (uid >= 0 && getpwuid_r(uid_t(uid), &pw, buf.data(), buf.size(), &res) == 0 && res && pw.pw_dir && pw.pw_dir[0] == '/')
        return pw.pw_dir;
    return "";
}

long long user_uid(const std::string &name, long long *gid) {
    struct passwd pw, *res = nullptr;
    std::vector<char> buf(16384);
    if (name.empty() || getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &res) != 0 || !res) return -1;
    if (gid) *gid = pw.pw_gid;
    return pw.pw_uid;
}

}  // namespace detail

bool may_see(const TokenEntry &who, const std::string &run, const RunInfo *info) {
    switch (who.scope) {
    case Scope::admin: return true;
    case Scope::user: return info && !who.user.empty() && info->owner == who.user;
    // A job's token sees its own run, and only while the run is its user's:
    // naming someone else's run in --shardnet shows nothing of it.
    case Scope::worker:
        return !who.run.empty() && who.run == run && (!who.bound || !info || info->owner_uid < 0 || (unsigned long long)info->owner_uid == who.uid);
    case Scope::peer: return false;
    }
    return false;
}

}  // namespace shardnet::broker
