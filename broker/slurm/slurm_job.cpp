#include "broker/slurm/slurm_job.hpp"

#include <boost/json.hpp>

#include "broker/slurm/slurm_json.hpp"
#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;

namespace {

// A JSON number that is exactly an integer; false otherwise (never throws).
bool whole(const json::value *v, long long &out) {
    if (!v || !v->is_number()) return false;
    json::error_code ec;
    out = v->to_number<long long>(ec);
    return !ec;
}

// A field that Slurm always prints; a wrong type is an error naming it.
struct JobFields {
    const json::object &o;
    std::string err;
    bool str(const char *k, std::string &out) {
        auto *v = o.if_contains(k);
        if (!v || v->is_null()) { out.clear(); return true; }
        if (!v->is_string()) return fail(k, "expected a string");
        out = std::string(v->as_string());
        return true;
    }
    bool num(const char *k, long long &out, bool required = false) {
        auto *v = o.if_contains(k);
        if (!v || v->is_null()) return !required || fail(k, "missing");
        if (v->is_int64()) out = v->as_int64();
        else if (v->is_uint64() && v->as_uint64() <= 0x7fffffffffffffffULL) out = (long long)v->as_uint64();
        else return fail(k, "expected an integer");
        return true;
    }
    bool fail(const char *k, const char *why) {
        if (err.empty()) err = std::string("squeue --json: job field ") + k + ": " + why;
        return false;
    }
};

}  // namespace

JobRead find_slurm_job(const std::string &text, long long id, SlurmJob &out, json::object *record) {
    SlurmJobs answer;
    if (std::string err = read_squeue_json(text, answer); !err.empty()) return {JobLookup::unreadable, err};
    for (auto &jv : answer.jobs) {
        if (!jv.is_object()) continue;
        auto &o = jv.as_object();
        long long jid = 0;
        if (!whole(o.if_contains("job_id"), jid) || jid != id) continue;
        std::vector<std::string> not_utf8 = valid_utf8_record(o);
        if (std::string err = answer.record(o); !err.empty()) return {JobLookup::unreadable, err};
        JobFields r{o, {}};
        SlurmJob j;
        j.id = id;
        long long submit = 0;
        if (!r.num("user_id", j.uid, true) || !r.num("group_id", j.gid, true) || !r.str("user_name", j.user) ||
            !r.str("name", j.name) || !r.str("job_state", j.state) || !r.str("cluster", j.cluster) ||
            !r.str("current_working_directory", j.workdir) || !r.str("standard_output", j.stdout_pattern) ||
            !r.str("standard_error", j.stderr_pattern) ||
            !r.str("nodes", j.nodes) || !r.str("batch_host", j.batch_host) || !r.str("comment", j.comment) ||
            !r.num("node_count", j.node_count) || !r.num("tasks", j.tasks) || !r.num("submit_time", submit))
            return {JobLookup::unreadable, r.err};
        if (j.uid < 0 || j.uid > 4294967294LL || j.gid < 0 || j.gid > 4294967294LL)
            return {JobLookup::unreadable, "squeue --json: job " + std::to_string(id) + " has no valid user_id/group_id"};
        j.submit_time = double(submit);
        out = std::move(j);
        if (record) *record = o;
        return {JobLookup::found, "", std::move(not_utf8)};
    }
    return {JobLookup::absent, "job " + std::to_string(id) + " is not known to slurmctld"};
}

long long submitted_for(const std::string &text, const std::string &comment, long long uid, std::string *why) {
    SlurmJobs answer;
    if (std::string err = read_squeue_json(text, answer); !err.empty()) {
        if (why) *why = err;
        return -1;
    }
    for (const auto &jv : answer.jobs) {
        const auto *o = jv.if_object();
        if (!o) continue;
        auto *c = o->if_contains("comment");
        long long u = -1, id = 0;
        // The marker ends the comment (after the user's own words, if any).
        const bool marked = c && c->is_string() && (c->as_string() == comment || c->as_string().ends_with(" " + comment));
        if (marked && whole(o->if_contains("user_id"), u) && u == uid &&
            whole(o->if_contains("job_id"), id))
            return id;
    }
    return 0;
}

namespace {

std::string fill_pattern(const SlurmJob &j, const std::string &pattern) {
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '%' || i + 1 == pattern.size()) { out += pattern[i]; continue; }
        switch (char c = pattern[++i]) {
        case 'j': case 'A': out += std::to_string(j.id); break;
        case 'u': out += j.user; break;
        case 'x': out += j.name; break;
        case '%': out += '%'; break;
        default: out += '%'; out += c;   // Slurm fills in the rest (%N, %n, ...) itself
        }
    }
    if (!out.empty() && out[0] != '/' && !j.workdir.empty()) out = j.workdir + "/" + out;
    return out;
}

}  // namespace

std::string output_for_next_attempt(const SlurmJob &j) {
    return fill_pattern(j, j.stdout_pattern.empty() ? "slurm-%j.out" : j.stdout_pattern);
}

std::string error_for_next_attempt(const SlurmJob &j) {
    // Slurm prints stdout's path for an error file the job did not name.
    if (j.stderr_pattern.empty() || j.stderr_pattern == j.stdout_pattern) return "";
    return fill_pattern(j, j.stderr_pattern);
}

std::string submit_identity_error(long long uid, long long gid, long long min_uid, long long slurm_user_uid) {
    if (uid < 0 || gid < 0) return "the job's owner is not known";
    if (uid == 0 || gid == 0) return "refusing to submit as root (uid " + std::to_string(uid) + ", gid " + std::to_string(gid) + ")";
    if (slurm_user_uid >= 0 && uid == slurm_user_uid)
        return "refusing to submit as the SlurmUser (uid " + std::to_string(uid) + ")";
    if (uid < min_uid)
        return "refusing to submit as uid " + std::to_string(uid) + ": below the site's requeue.min_uid " + std::to_string(min_uid);
    return "";
}

std::string sbatch_path_error(const std::string &what, const std::string &v) {
    if (v.size() > 4096) return what + ": longer than 4096 bytes";
    if (has_control_chars(v)) return what + ": has control characters";
    if (v.empty() || v[0] != '/') return what + ": not an absolute path";
    return "";
}

long long slurm_user_uid(const std::string &conf) {
    const auto k = conf.find("\nSlurmUser ");
    if (k == std::string::npos) return -1;
    const auto eol = conf.find('\n', k + 1);
    const std::string line = conf.substr(k + 1, eol == std::string::npos ? std::string::npos : eol - k - 1);
    const auto a = line.rfind('('), b = line.rfind(')');
    if (a == std::string::npos || b == std::string::npos || b < a) return -1;
    auto n = parse_int(line.substr(a + 1, b - a - 1), 0, 4294967294LL);
    return n ? *n : -1;
}

}  // namespace shardnet::broker
