// Recovery's Slurm side: what an attempt's job was (captured from Slurm
// when the attempt starts, so that a requeue needs nothing from a cluster
// that may be gone), and the submission of the next attempt as the job's
// owner, recorded as the one job that may report for it.
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include "common/http_client.hpp"
#include "common/job_options.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"
#include "broker/recovery/attempts.hpp"
#include "broker/core/api_util.hpp"
#include "broker/recovery/job_environment.hpp"
#include "broker/slurm/job_options.hpp"
#include "broker/slurm/slurm_job.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;


void Attempts::capture_spec(const std::string &run, long long attempt, const std::string &cluster, long long job,
                           const std::string &ckpt_dir, int interval, const JobSays &says) {
    post_guarded(slurm_thread_, "capture job spec", [this, run, attempt, cluster, job, ckpt_dir, interval, says] {
        std::string nodelist, batch_host;
        if (!capture_spec_now(run, attempt, cluster, job, ckpt_dir, &nodelist, &batch_host, says)) {
            release_spec(run, attempt);  // try again at the next batch heartbeat
            return;
        }
        resumed_(run, attempt, cluster, job, nodelist);
        const auto hosts = slurm_hostnames(*slurm_, cfg_.clusters.at(cluster), nodelist);
        if (!hosts) return;
        for (const auto &host : *hosts)
            if (host != batch_host) workers_.watch(run, host + "/alloc", attempt, interval, wall_now(), cluster, job);
    });
}

std::optional<Store::JobSpecRow> Attempts::capture_spec_now(const std::string &run, long long attempt, const std::string &cluster,
                                                            long long job, const std::string &ckpt_dir, std::string *nodelist,
                                                            std::string *batch_host, const JobSays &says) {
    const std::string &conf = cfg_.clusters.at(cluster);
    std::string out;
    if (slurm_->fresh(conf, {std::begin(kSqueueJson), std::end(kSqueueJson)}, out) != 0) return std::nullopt;
    SlurmJob j;
    json::object record;
    const JobRead read = find_job_noted(*slurm_, conf, out, job, j, &record);
    if (!read.found()) {
        log_warn("job spec not captured", run, cluster + "/" + std::to_string(job) + ": " + read.why);
        return std::nullopt;
    }
    // A path Slurm gave as raw bytes (not UTF-8) is not carried: its
    // readable form is not the job's real path. The next attempt runs and
    // writes where sbatch's defaults put it, and says so.
    std::vector<std::string> not_utf8_paths;
    for (const auto &f : read.not_utf8) {
        std::string *path = f == "current_working_directory" ? &j.workdir : f == "standard_output" ? &j.stdout_pattern
                          : f == "standard_error" ? &j.stderr_pattern : nullptr;
        if (path) path->clear();
        if (path || f == "standard_input") record.erase(f), not_utf8_paths.push_back(f + " (not UTF-8)");
    }
    // Without its own, the next attempt runs in its owner's home (never the
    // broker's working directory), and writes slurm-JOBID.out there.
    if (j.workdir.empty()) j.workdir = detail::home_of(j.uid);
    // The job's owner, as Slurm numbers it, must be the run's.
    long long owner = -1;
    {
        auto runs = runs_.read();
        if (auto it = runs.find(run); it != runs.end()) owner = it->second.owner_uid;
    }
    if (owner >= 0 && j.uid != owner) {
        log_warn("job spec refused", run, "Slurm says job " + std::to_string(job) + " on " + cluster + " runs as uid " +
                 std::to_string(j.uid) + ", the run belongs to uid " + std::to_string(owner));
        return std::nullopt;
    }
    if (nodelist) *nodelist = j.nodes;
    if (batch_host) *batch_host = j.batch_host;
    json::object spec{{"user", j.user}, {"uid", j.uid}, {"gid", j.gid}, {"nodes", j.node_count}, {"tasks", j.tasks},
                      {"workdir", j.workdir}, {"stdout", output_for_next_attempt(j)}, {"ckpt_dir", ckpt_dir}, {"job", job},
                      {"cluster", cluster}};
    // The job's --shardnet-ckpt-every (its agents said it; checked there):
    // kept with the spec, so that a requeue after a broker restart keeps it.
    if (!says.ckpt_every.empty()) spec["ckpt_every"] = says.ckpt_every;
    if (says.max_attempts > 0) spec["max_attempts"] = says.max_attempts;
    if (!says.fatal_exit.empty()) spec["fatal_exit"] = says.fatal_exit;   // "3,7", as --shardnet-fatal-exit takes it
    if (says.requeue_timeout) spec["on_timeout"] = "requeue";
    if (says.spares > 0) spec["spares"] = says.spares;
    if (says.replace_stragglers) spec["straggler"] = "replace";
    // Every option that shaped the job (partition, account, limits, GPUs,
    // name, ...), as Slurm recorded it: attempt N is submitted with them.
    // What a new job cannot be (a dependency, an array task) is named.
    // Slurm 22.05's squeue --json prints no cpus_per_task (always null);
    // its format field does.
    if (auto *c = record.if_contains("cpus_per_task"); !c || c->is_null()) {
        std::string cpt;
        if (slurm_->fresh(conf, {"squeue", "-h", "-j", std::to_string(job), "-O", "cpus-per-task:12"}, cpt) == 0) {
            while (!cpt.empty() && (cpt.back() == '\n' || cpt.back() == ' ')) cpt.pop_back();
            if (auto n = parse_int(cpt, 1, 65533)) record["cpus_per_task"] = *n;
        }
    }
    json::object options;
    std::vector<std::string> uncarried;
    read_job_options(record, options, uncarried);
    uncarried.insert(uncarried.end(), not_utf8_paths.begin(), not_utf8_paths.end());
    if (std::string e = error_for_next_attempt(j); !e.empty()) options["error"] = e;
    spec["options"] = std::move(options);
    if (!uncarried.empty()) spec["uncarried"] = json::value_from(uncarried);
    std::string err;
    const std::string dir = private_dir(cfg_.database, err);
    if (dir.empty()) { log_warn("job spec not captured", run, err); return std::nullopt; }
    const std::string path = dir + "/" + run + ".attempt-" + std::to_string(attempt) + ".job.sh";
    unlink(path.c_str());
    std::string ignored;
    // A read of Slurm's state (into a file): it must not drop the cluster's cached answers.
    if (slurm_->fresh(conf, {"scontrol", "write", "batch_script", std::to_string(job), path}, ignored) != 0) return std::nullopt;
    std::string script;
    err = read_small_file(path, 4 << 20, script);
    unlink(path.c_str());
    if (!err.empty()) { log_warn("job spec not captured", run, err); return std::nullopt; }
    Store::JobSpecRow row{cluster, job, json::serialize(spec), script};
    store_wait([&] { store_->attempts().upsert_job_spec(run, attempt, row); return 0; });
    return row;
}

Attempts::Submitted Attempts::find_submitted(const std::string &decision, long long uid) {
    Submitted out;
    if (uid < 0) return out;
    auto unread = [&](const std::string &name, const std::string &why) {
        out.unread += (out.unread.empty() ? "" : "; ") + ("cluster " + name + ": " + why);
    };
    for (const auto &[name, conf] : cfg_.clusters) {
        std::string text;
        if (slurm_->fresh(conf, {std::begin(kSqueueJson), std::end(kSqueueJson)}, text) != 0) {
            unread(name, "squeue failed");
            continue;
        }
        std::string why;
        const long long job = submitted_for(text, kDecisionMarker + decision, uid, &why);
        if (job < 0) {
            slurm_->read_errors.unreadable(conf, why);
            unread(name, why);
        }
        if (job > 0) return Submitted{name, job, {}};
    }
    return out;
}

std::optional<std::string> Attempts::kept_environment_for(const std::string &run, const SubmitAs &as, std::string &why,
                                                          std::vector<std::string> *not_carried) {
    why.clear();
    if (as.environment) {
        std::string text;
        for (const auto &e : *as.environment) text += e, text += '\0';
        return text;
    }
    const std::string dir = private_dir(cfg_.database, why);
    auto kept = dir.empty() ? std::nullopt : read_environment_file(dir, run, why);
    if (!kept) return std::nullopt;
    // Another owner's, or no job's of this run (a refused decision's, a
    // squatted run id's): never replayed, and gone.
    if (std::string whose = environment_is_runs(core_, run, as.uid, kept->origin); !whose.empty()) {
        log_warn("a kept environment is not this run's", run, whose);
        if (not_carried) not_carried->push_back("the kept environment (" + whose + ")");
        forget_environment_file(dir, run);
        return std::nullopt;
    }
    return std::move(kept->text);
}

long long Attempts::submit_attempt(const std::string &cluster, const json::object &spec, const std::string &script,
                                   const std::string &run, long long to, const std::string &resume,
                                   const Placement &where, const std::string &decision, const SubmitAs &as,
                                   std::string &err, std::vector<std::string> *not_carried) {
    auto str = [&](const char *k) { auto *v = spec.if_contains(k); return v && v->is_string() ? std::string(v->as_string()) : ""; };
    auto num = [&](const char *k) { auto *v = spec.if_contains(k); return v && v->is_int64() ? v->as_int64() : 0LL; };
    const std::string &conf = cfg_.clusters.at(cluster);
    // Only ever as the job's real owner (resolved by the caller from Slurm
    // or, for a peer's decision, from this host's own accounts), and never
    // as root, the SlurmUser or a system account.
    std::string show_config;
    slurm_->query(conf, {"scontrol", "show", "config"}, show_config);
    if (std::string why = submit_identity_error(as.uid, as.gid, cfg_.min_uid, slurm_user_uid(show_config)); !why.empty()) {
        err = why;
        return 0;
    }
    // Each value is one argv element (no shell), and still checked: a
    // newline or a relative path has no business in a job's paths.
    const std::string workdir = str("workdir"), output = str("stdout"), ckpt_dir = str("ckpt_dir");
    for (const auto &[what, v] : {std::pair{"workdir", workdir}, {"stdout", output}, {"ckpt_dir", ckpt_dir}})
        if (!v.empty())
            if (std::string why = sbatch_path_error(std::string("the job's ") + what, v); !why.empty()) { err = why; return 0; }
    if (!is_safe_name(run) || (resume != "latest" && !is_safe_name(resume, 128))) { err = "run or resume is not a safe name"; return 0; }
    // The job's own options first (ShardNet's below take precedence where
    // both speak: the nodes, the tasks, the output file). A spec from a peer
    // is checked option by option; a malformed one submits nothing.
    json::object options;
    if (auto *o = spec.if_contains("options")) {
        if (!o->is_object()) { err = "the job's options are not an object"; return 0; }
        options = o->as_object();
    }
    std::string comment;
    if (auto *c = options.if_contains("comment"); c && c->is_string()) comment = std::string(c->as_string());
    options.erase("comment");
    std::vector<std::string> dropped;
    if (comment.size() > 1024 || comment.find('\0') != std::string::npos) dropped.push_back("comment (malformed value)"), comment.clear();
    std::vector<std::string> job_options = sbatch_options(options, err, &dropped);
    if (not_carried) not_carried->insert(not_carried->end(), dropped.begin(), dropped.end());
    // sbatch runs as the job's owner, the script on its stdin: Slurm then
    // judges every #SBATCH line of it with the user's rights, not root's.
    std::vector<std::string> argv{"sbatch", "--parsable"};
    argv.insert(argv.end(), job_options.begin(), job_options.end());
    // On the chosen idle nodes, or (no idle room) queued for any that fit.
    if (where.queued > 0) {
        argv.insert(argv.end(), {"-N", std::to_string(where.queued)});
        if (!where.exclude.empty()) argv.push_back("--exclude=" + join(where.exclude));
    } else {
        argv.insert(argv.end(), {"-N", std::to_string(where.nodes.size()), "--nodelist=" + join(where.nodes)});
    }
    argv.insert(argv.end(), {
                                  // ALL: with a bare --export=VAR the batch step would not see
                                  // its --shardnet options (Slurm passes them in the environment).
                                  "--export=ALL,SHARDNET_ATTEMPT=" + std::to_string(to), "--shardnet=" + run,
                                  "--shardnet-resume=" + resume, "--comment=" + comment_with_marker(comment, decision)});
    if (long long tasks = num("tasks"); tasks > 0 && tasks <= (1 << 24)) argv.push_back("--ntasks=" + std::to_string(tasks));
    if (!ckpt_dir.empty()) argv.push_back("--shardnet-ckpt-dir=" + ckpt_dir);
    // The failed attempt's interval and the run's policy (a peer's spec is
    // taken only within these bounds and words).
    if (long long hb = num("heartbeat"); hb > 0 && hb <= 86400) argv.push_back("--shardnet-heartbeat=" + std::to_string(hb));
    if (const std::string rq = str("requeue"); rq == "federated" || rq == "local" || rq == "off") argv.push_back("--shardnet-requeue=" + rq);
    if (const std::string every = str("ckpt_every"); every == "auto" || parse_int(every, 1, 0x7fffffffLL))
        argv.push_back("--shardnet-ckpt-every=" + every);
    if (long long budget = num("max_attempts"); budget > 0 && budget <= 1000) argv.push_back("--shardnet-max-attempts=" + std::to_string(budget));
    if (const auto fatal = parse_fatal_exit(str("fatal_exit")); fatal && !fatal->empty())
        argv.push_back("--shardnet-fatal-exit=" + fatal_exit_text(*fatal));
    if (str("on_timeout") == "requeue") argv.push_back("--shardnet-on-timeout=requeue");
    // Spares: the job held them on nodes that outlive a node's death; so
    // does the next attempt (the plugin takes spares only with --no-kill).
    if (long long spares = num("spares"); spares > 0 && spares <= kMaxSpares)
        argv.insert(argv.end(), {"--no-kill", "--shardnet-spares=" + std::to_string(spares)});
    if (str("straggler") == "replace") argv.push_back("--shardnet-straggler=replace");
    if (!workdir.empty()) argv.push_back("--chdir=" + workdir);
    // Every attempt writes where the first did: after what the earlier ones wrote, never over it.
    if (!output.empty()) argv.push_back("--output=" + output), argv.push_back("--open-mode=append");
    // The submitter's environment, as attempt 1's batch step had it: into
    // the job only (--export-file on a descriptor), never sbatch's own.
    RunAs run_as{as.uid, as.gid, script, std::nullopt};
    {
        std::string why;
        std::optional<std::string> env = kept_environment_for(run, as, why, not_carried);
        if (env) {
            // With --export-file, Slurm 22.05 hands the SPANK options to the
            // batch step under another name, which the plugin there does not
            // read: they go in again as their SHARDNET_* fallbacks (after
            // the user's, which the site policy dropped: ours stand).
            for (const auto &a : argv) {
                if (a.rfind("--shardnet", 0) != 0) continue;
                const auto eq = a.find('=');
                const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
                for (int o = 0; o < static_cast<int>(Opt::count); ++o)
                    if (name == opt_spec(static_cast<Opt>(o)).name && eq != std::string::npos)
                        *env += std::string(opt_spec(static_cast<Opt>(o)).env) + "=" + a.substr(eq + 1) + '\0';
            }
            *env += "SHARDNET_ATTEMPT=" + std::to_string(to) + '\0';
            // --distribution and --mem-bind live only there: sbatch's again.
            std::vector<std::string> bad;
            const auto step = step_options(*env, bad);
            argv.insert(argv.begin() + 2, step.begin(), step.end());
            if (not_carried) not_carried->insert(not_carried->end(), bad.begin(), bad.end());
            run_as.fd3 = std::move(*env);
            argv.insert(argv.begin() + 2, "--export-file=3");
        } else if (!why.empty()) {
            err = "the run's kept environment cannot be read: " + why;
            return 0;
        }
    }
    std::string out;
    const int rc = slurm_->change_as(conf, argv, run_as, out);
    if (rc != 0) {
        while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
        err = "sbatch on " + cluster + " (as uid " + std::to_string(as.uid) + ") failed: " + valid_utf8(out.substr(0, 300));
        return 0;
    }
    // --parsable: "JOBID[;CLUSTER]" on a line of its own (warnings may come first).
    std::optional<long long> job;
    std::istringstream lines(out);
    for (std::string line; !job && std::getline(lines, line);) job = parse_int(line.substr(0, line.find(';')), 1, 4294967295LL);
    if (!job) { err = "sbatch on " + cluster + " answered no job id: " + valid_utf8(out.substr(0, 100)); return 0; }
    return *job;
}

void Attempts::record_attempt(const std::string &run, long long attempt, const std::string &cluster, long long job,
                              const std::vector<std::string> &nodes, const json::object &cause, const receipts::ChainLink &from) {
    {
        auto runs = runs_.write();
        if (auto it = runs.find(run); it != runs.end()) it->second.jobs[attempt] = AttemptJob{cluster, job, 0};
        runs.bump();
    }
    // The job and what the attempt's receipt is to say of it, together.
    store_wait([&] {
        store_->transaction([&] {
            store_->attempts().upsert_attempt(Store::AttemptRow{run, attempt, cluster, job, 0});
            receipts_.note_attempt_start(run, attempt, cluster, job, nodes, cause, from, wall_now());
        });
        return 0;
    });
}

}  // namespace shardnet::broker
