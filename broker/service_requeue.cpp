// Requeue-on-failure across the broker's local clusters: when a worker of a
// run is confirmed failed, the run is resubmitted as the next attempt on the
// same cluster without the failed node if it has room, else on another local
// cluster (peer brokers are not tried yet). The decision is written
// before anything is done, once per attempt (its id), so it is applied at
// most once; the old attempt is cancelled in Slurm and fenced by number.
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <future>
#include <sstream>

#include "service.hpp"
#include "slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;

namespace {

// "name(1001)" -> "1001"
std::string id_in_parens(const std::string &v) {
    auto a = v.find('('), b = v.find(')');
    return a == std::string::npos || b == std::string::npos ? "" : v.substr(a + 1, b - a - 1);
}

}  // namespace

void Service::requeue(const Fault &fault) {
    std::string policy;
    {
        std::shared_lock lock(runs_mu_);
        auto it = runs_.find(fault.run);
        if (it == runs_.end() || it->second.attempt != fault.attempt) return;
        policy = it->second.requeue;
    }
    auto conf = cfg_.clusters.find(fault.state.cluster);
    if (policy == "off" || conf == cfg_.clusters.end() || fault.state.job <= 0) return;
    boost::asio::post(slurm_thread_, [this, fault, slurm_conf = conf->second] {
        const std::string bad = fault.node.substr(0, fault.node.find('/'));
        const long long to = fault.attempt + 1;
        const std::string id = fault.run + "/attempt-" + std::to_string(to);
        const double now = wall_now();
        // 1. The decision, durable, before any action.
        std::promise<bool> written;
        on_store([&] {
            bool fresh = false;
            try {
                store_->transaction([&] {
                    fresh = store_->insert_decision(id, fault.run, fault.attempt, to, fault.state.cluster, bad, fault.state.job, now);
                });
            } catch (...) {}
            written.set_value(fresh);
        });
        if (!written.get_future().get()) return;  // another worker of this attempt decided already

        // 2. What the failed job was, and where it can go.
        std::string out;
        if (slurm_calls_.query(slurm_conf, {"scontrol", "-o", "show", "job", std::to_string(fault.state.job)}, out) != 0) return;
        const std::string uid = id_in_parens(scontrol_field(out, "UserId")), gid = id_in_parens(scontrol_field(out, "GroupId"));
        const std::string nodes = scontrol_field(out, "NumNodes"), tasks = scontrol_field(out, "NumTasks");
        const std::string workdir = scontrol_field(out, "WorkDir"), stdout_path = scontrol_field(out, "StdOut");
        const long long need = std::atoll(nodes.c_str());
        // Candidates: the same cluster without the dead node, then the other
        // local clusters in name order (deterministic). Each rejected one
        // carries its reason.
        std::vector<std::pair<std::string, std::string>> candidates{{fault.state.cluster, slurm_conf}};
        for (const auto &[name, c] : cfg_.clusters)
            if (name != fault.state.cluster) candidates.emplace_back(name, c);
        std::string target, target_conf;
        std::vector<std::string> idle;
        json::array rejected;
        for (const auto &[name, c] : candidates) {
            std::string idle_out;
            std::vector<std::string> free;
            if (slurm_calls_.query(c, {"sinfo", "-h", "-N", "-t", "idle", "-o", "%N"}, idle_out) != 0) {
                rejected.push_back(json::object{{"cluster", name}, {"reason", "slurmctld did not answer"}});
                continue;
            }
            std::istringstream is(idle_out);
            for (std::string n; is >> n;)
                if (!(name == fault.state.cluster && n == bad) && std::find(free.begin(), free.end(), n) == free.end()) free.push_back(n);
            if (static_cast<long long>(free.size()) >= need) { target = name; target_conf = c; idle = free; break; }
            rejected.push_back(json::object{{"cluster", name}, {"reason", std::to_string(free.size()) + " idle node(s)" +
                                             (name == fault.state.cluster ? " besides " + bad : "") + ", " + std::to_string(need) + " needed"}});
        }
        json::object ev{{"decision", id}, {"from_cluster", fault.state.cluster}, {"excluded", bad}, {"nodes_needed", need},
                        {"target", target.empty() ? json::value(nullptr) : json::value(target)},
                        {"idle", json::value_from(idle)}, {"rejected", rejected}, {"old_job", fault.state.job}};
        auto record = [&](const std::string &state, long long new_job, const std::string &kind, const std::string &cause) {
            std::promise<void> done;
            on_store([&] {
                try {
                    transact([&] {
                        store_->apply_decision(id, state, new_job);
                        event(fault.run, kind, cause, json::serialize(ev), wall_now());
                        if (kind == "RECOVERING") store_->update_run(fault.run, "RECOVERING", fault.attempt, wall_now());
                    });
                } catch (...) {}
                done.set_value();
            });
            done.get_future().wait();
        };
        // 3. The old attempt's script, then cancel it, then the new attempt.
        const std::string dir = std::filesystem::path(cfg_.database).parent_path().string() + "/decisions";
        std::filesystem::create_directories(dir);
        std::string script = dir + "/" + fault.run + ".attempt-" + std::to_string(to) + ".sh";
        std::string ignored;
        if (slurm_calls_.change(slurm_conf, {"scontrol", "write", "batch_script", std::to_string(fault.state.job), script}, ignored) != 0) {
            record("failed", 0, "PLACEMENT", "cannot read the batch script of job " + std::to_string(fault.state.job));
            return;
        }
        slurm_calls_.change(slurm_conf, {"scancel", std::to_string(fault.state.job)}, ignored);
        std::string job_out;
        std::vector<std::string> argv{"sbatch", "--parsable", "--uid=" + uid, "--gid=" + gid, "-N", nodes, "-n", tasks,
                                      "--export=SHARDNET_ATTEMPT=" + std::to_string(to),
                                      "--shardnet=" + fault.run, "--shardnet-resume=latest"};
        if (target == fault.state.cluster) argv.push_back("--exclude=" + bad);
        if (!workdir.empty()) argv.push_back("--chdir=" + workdir);
        if (!stdout_path.empty()) argv.push_back("--output=" + stdout_path);
        argv.push_back(script);
        if (slurm_calls_.change(target_conf, argv, job_out) != 0) {
            record("failed", 0, "PLACEMENT", "sbatch of attempt " + std::to_string(to) + " on " + target + " failed");
            return;
        }
        const long long new_job = std::atoll(job_out.c_str());
        ev["new_job"] = new_job;
        {
            std::unique_lock lock(runs_mu_);
            auto it = runs_.find(fault.run);
            if (it != runs_.end()) {
                it->second.state = "RECOVERING";
                it->second.expected_nodes = need;
                it->second.recover_to = to;
                runs_generation_.fetch_add(1, std::memory_order_release);
            }
        }
        std::string others;
        for (const auto &r : rejected)
            others += "; " + std::string(r.as_object().at("cluster").as_string()) + " rejected: " + std::string(r.as_object().at("reason").as_string());
        record("applied", new_job, "PLACEMENT", target + (target == fault.state.cluster ? " without " + bad : "") + ": job " +
               std::to_string(new_job) + " (" + nodes + " node(s) of " + std::to_string(idle.size()) + " idle), attempt " +
               std::to_string(to) + others);
        record("applied", new_job, "RECOVERING", "attempt " + std::to_string(to) + " submitted with --shardnet-resume=latest");
    });
}

void Service::check_recovered(const std::string &run, long long attempt, double now) {
    long long need = 0;
    {
        std::shared_lock lock(runs_mu_);
        auto it = runs_.find(run);
        // Only the new attempt's heartbeats count; the old one's may still arrive.
        if (it == runs_.end() || it->second.state != "RECOVERING" || it->second.recover_to != attempt) return;
        need = it->second.expected_nodes;
    }
    long long up = 0;
    for (const auto &[worker, w] : workers_.of_run(run))
        if (w.attempt == attempt && worker.find("/batch") == std::string::npos && !w.ended && !w.faulted) ++up;
    if (up < need) return;
    {
        std::unique_lock lock(runs_mu_);
        auto it = runs_.find(run);
        if (it == runs_.end() || it->second.state != "RECOVERING") return;
        it->second.state = "RUNNING";
        runs_generation_.fetch_add(1, std::memory_order_release);
    }
    on_store([this, run, attempt, up, now] {
        transact([&] {
            store_->update_run(run, "RUNNING", attempt, now);
            event(run, "RECOVERED", "attempt " + std::to_string(attempt) + " heartbeats from all " + std::to_string(up) + " node(s)",
                  json::serialize(json::object{{"attempt", attempt}, {"nodes", up}}), now);
        });
    });
}

}  // namespace shardnet::broker
