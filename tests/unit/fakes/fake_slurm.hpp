// A Slurm cluster in memory, behind the broker's Slurm interface
// (broker/slurm/slurm.hpp): jobs, nodes and their states, answered in the
// formats of Slurm 22.05's own commands (squeue --json, scontrol -o show
// node, sinfo -o). Unit tests of recovery and federation logic use it; what
// Slurm itself does is tested on real clusters (tests/integration).
#pragma once
#include <boost/json.hpp>
#include <fstream>
#include <map>
#include <atomic>
#include <chrono>
#include <thread>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "broker/slurm/slurm.hpp"

namespace shardnet::broker::testing {

class FakeSlurm final : public Slurm {
public:
    struct Job {
        long long id = 0, uid = 5000, gid = 5000, node_count = 1, tasks = 1;
        std::string user = "alice", state = "RUNNING", nodes, batch_host, workdir = "/home/alice", comment, partition;
        std::string tres_per_node;   // "gres:gpu:tesla:1" (none: not set)
        std::string script = "#!/bin/sh\nsrun train.py\n";
    };
    struct Seen {
        std::string conf;
        std::vector<std::string> argv;
        RunAs as;   // uid -1: not run as a user
    };

    // Cluster state, set by tests (under mu).
    std::mutex mu;
    std::map<std::string, std::map<long long, Job>> jobs;                 // conf -> id -> job
    std::map<std::string, std::map<std::string, std::string>> nodes;      // conf -> node -> state (IDLE, ALLOCATED, DOWN*)
    std::map<std::string, std::map<std::string, std::string>> partitions; // conf -> node -> its partition (none listed: main)
    std::map<std::string, std::map<std::string, std::string>> gres;       // conf -> node -> its GRES as sinfo %G shows it (none: "(null)")
    std::set<std::string> down_controllers;                               // conf
    std::set<std::string> dead_slurmd;                                    // node names
    long long next_job = 100;
    std::string sbatch_error;   // non-empty: sbatch fails with it
    std::string squeue_parser = "openapi/v0.0.38";   // the version squeue --json names (22.05's)
    std::atomic<int> squeue_ms{0};   // how long each squeue takes (a loaded controller)

    // What the broker asked.
    std::vector<Seen> changes() {
        std::lock_guard<std::mutex> lock(mu);
        return changes_;
    }
    int count(const std::string &first, const std::string &second = "") {
        std::lock_guard<std::mutex> lock(mu);
        int n = 0;
        for (const auto &c : all_)
            if (!c.argv.empty() && c.argv[0] == first && (second.empty() || (c.argv.size() > 1 && c.argv[1] == second))) ++n;
        return n;
    }

    int query(const std::string &conf, const std::vector<std::string> &argv, std::string &out) override {
        return answer(conf, argv, RunAs{}, out, false);
    }
    int fresh(const std::string &conf, const std::vector<std::string> &argv, std::string &out) override {
        return answer(conf, argv, RunAs{}, out, false);
    }
    int change(const std::string &conf, const std::vector<std::string> &argv, std::string &out) override {
        return answer(conf, argv, RunAs{}, out, true);
    }
    int change_as(const std::string &conf, const std::vector<std::string> &argv, const RunAs &as, std::string &out) override {
        return answer(conf, argv, as, out, true);
    }
    bool slurmd_answers(const std::string &addr, int, int) override {
        std::lock_guard<std::mutex> lock(mu);
        return !dead_slurmd.count(addr);
    }

private:
    std::vector<Seen> changes_, all_;

    std::string squeue_json(const std::map<long long, Job> &js) const {
        boost::json::array a;
        for (const auto &[id, j] : js) {
            a.push_back(boost::json::object{{"job_id", id}, {"user_id", j.uid}, {"group_id", j.gid}, {"user_name", j.user},
                                            {"name", "train"}, {"job_state", j.state}, {"cluster", "fake"},
                                            {"current_working_directory", j.workdir}, {"standard_output", j.workdir + "/slurm-%j.out"},
                                            {"nodes", j.nodes}, {"batch_host", j.batch_host}, {"comment", j.comment},
                                            {"node_count", j.node_count}, {"tasks", j.tasks}, {"submit_time", 1700000000}});
            if (!j.partition.empty()) a.back().as_object()["partition"] = j.partition;
            if (!j.tres_per_node.empty()) a.back().as_object()["tres_per_node"] = j.tres_per_node;
        }
        // Slurm 22.05's shape and its version (slurm_json.hpp reads by it).
        boost::json::object meta{{"plugin", boost::json::object{{"type", squeue_parser}}}};
        return boost::json::serialize(boost::json::object{{"meta", std::move(meta)}, {"jobs", std::move(a)}});
    }
    static std::string value_of(const std::vector<std::string> &argv, const std::string &prefix) {
        for (const auto &a : argv)
            if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
        return "";
    }

    int answer(const std::string &conf, const std::vector<std::string> &argv, const RunAs &as, std::string &out, bool change) {
        if (!argv.empty() && argv[0] == "squeue" && squeue_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(squeue_ms.load()));
        std::lock_guard<std::mutex> lock(mu);
        out.clear();
        all_.push_back(Seen{conf, argv, as});
        if (change) changes_.push_back(Seen{conf, argv, as});
        if (down_controllers.count(conf)) { out = "slurm_load_jobs error: Unable to contact slurm controller"; return 1; }
        auto &js = jobs[conf];
        auto &ns = nodes[conf];
        const std::string cmd = argv.empty() ? "" : argv[0], sub = argv.size() > 1 ? argv[1] : "";
        if (cmd == "squeue") { out = squeue_json(js); return 0; }
        if (cmd == "scontrol" && sub == "ping") { out = "Slurmctld(primary) at fake is UP\n"; return 0; }
        if (cmd == "scontrol" && sub == "show" && argv.size() > 2 && argv[2] == "config") {
            out = "SlurmUser               = slurm(64030)\nSlurmdTimeout           = 10 sec\n";
            return 0;
        }
        if (cmd == "scontrol" && sub == "show" && argv.size() > 3 && argv[2] == "hostnames") {
            std::stringstream in(argv[3]);
            for (std::string h; std::getline(in, h, ',');) out += h + "\n";
            return 0;
        }
        if (cmd == "scontrol" && sub == "-o" && argv.size() == 4 && argv[3] == "node") {   // every node, a line each
            for (const auto &[name, state] : ns) out += "NodeName=" + name + " NodeAddr=" + name + " Port=6818 State=" + state + "\n";
            return 0;
        }
        if (cmd == "scontrol" && sub == "-o" && argv.size() > 4 && argv[3] == "node") {
            auto it = ns.find(argv[4]);
            if (it == ns.end()) { out = "Node " + argv[4] + " not found"; return 1; }
            out = "NodeName=" + it->first + " NodeAddr=" + it->first + " Port=6818 State=" + it->second + "\n";
            return 0;
        }
        if (cmd == "scontrol" && sub == "write" && argv.size() > 4) {
            auto it = js.find(std::stoll(argv[3]));
            if (it == js.end()) return 1;
            std::ofstream(argv[4]) << it->second.script;
            return 0;
        }
        if (cmd == "sinfo") {
            const bool idle_only = std::find(argv.begin(), argv.end(), "idle") != argv.end();
            const std::string format = argv.back();
            const auto &ps = partitions[conf];
            auto partition = [&](const std::string &n) { auto it = ps.find(n); return it == ps.end() ? std::string("main") : it->second; };
            const auto &gs = gres[conf];
            auto gres_of = [&](const std::string &n) { auto it = gs.find(n); return it == gs.end() ? std::string("(null)") : it->second; };
            if (format == "%R") {   // the cluster's partitions
                std::set<std::string> all;
                for (const auto &[n, st] : ns) all.insert(partition(n));
                for (const auto &p : all) out += p + "\n";
                return 0;
            }
            if (format == "%G") {   // every node's GRES
                for (const auto &[n, st] : ns) out += gres_of(n) + "\n";
                return 0;
            }
            if (std::find(argv.begin(), argv.end(), "alloc,mix,comp") != argv.end()) {   // nodes in use, as %t
                for (const auto &[n, st] : ns)
                    if (st == "ALLOCATED" || st == "MIXED" || st == "DRAINING")
                        out += n + " " + partition(n) + " " + gres_of(n) + " " + (st == "MIXED" ? "mix" : st == "DRAINING" ? "drng" : "alloc") + "\n";
                return 0;
            }
            for (const auto &[n, st] : ns)
                if (!idle_only) out += n + " " + st + "\n";
                else if (st == "IDLE") out += n + (format == "%N %R %G" ? " " + partition(n) + " " + gres_of(n) : "") + "\n";
            return 0;
        }
        if (cmd == "scancel" && argv.size() > 1) {
            if (auto it = js.find(std::stoll(argv[1])); it != js.end()) it->second.state = "CANCELLED";
            return 0;
        }
        if (cmd == "sbatch") {
            if (!sbatch_error.empty()) { out = sbatch_error; return 1; }
            Job j;
            j.id = next_job++;
            j.uid = as.uid;
            j.gid = as.gid;
            j.nodes = value_of(argv, "--nodelist=");
            j.batch_host = j.nodes.substr(0, j.nodes.find(','));
            j.comment = value_of(argv, "--comment=");
            j.script = as.input;
            std::stringstream in(j.nodes);
            j.node_count = 0;
            for (std::string h; std::getline(in, h, ',');) {
                ++j.node_count;
                if (ns.count(h)) ns[h] = "ALLOCATED";
            }
            js[j.id] = j;
            out = std::to_string(j.id) + "\n";
            return 0;
        }
        out = "fake slurm: no answer for " + cmd + " " + sub;
        return 1;
    }
};

}  // namespace shardnet::broker::testing
