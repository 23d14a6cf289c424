// What Slurm itself says about a job and a node, asked with Slurm's own
// commands under a cluster's SLURM_CONF (no shell), plus whether the node's
// slurmd still takes a TCP connection. Used to confirm a suspected failure
// before FAULT is declared: a broker or network hiccup is not a failure.
#pragma once
#include <boost/json/fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shardnet::broker {

struct SlurmView {
    bool controller_ok = false;   // scontrol reached slurmctld
    bool unreadable = false;      // it answered, in a shape the broker cannot read (read_errors.hpp)
    std::string error;            // why not, when not
    std::string job_state;        // RUNNING, COMPLETED, ... or "GONE" (purged)
    std::string node_state;       // IDLE, ALLOCATED, DOWN*, MIXED+NOT_RESPONDING...
    std::string node_addr;
    int node_port = 0;
    bool slurmd_answers = false;  // a TCP connect to NodeAddr:Port succeeded
};

// Runs a Slurm command (argv, no shell) under slurm_conf; its exit status,
// stdout in out (and stderr too when with_stderr: for error messages).
int run_slurm(const std::string &slurm_conf, std::vector<std::string> argv, std::string &out, bool with_stderr = false);

// The same as the user uid/gid (with that user's groups), with input on
// stdin: a command that must have no more than the user's own rights. sbatch
// run as root with --uid would still judge the script's #SBATCH lines with
// root's (a RootOnly partition, a negative nice).
struct RunAs {
    long long uid = -1, gid = -1;
    std::string input;
    // Given to the command on descriptor 3 (sbatch --export-file=3: the
    // job's environment, never the command's own); none when nullopt.
    std::optional<std::string> fd3;
};
int run_slurm_as(const std::string &slurm_conf, const std::vector<std::string> &argv, const RunAs &as, std::string &out);

class Slurm;
// A Slurm hostlist ("beta[1-2],gpu7") as its node names, in Slurm's order
// (scontrol show hostnames); nullopt when Slurm does not answer.
std::optional<std::vector<std::string>> slurm_hostnames(Slurm &calls, const std::string &slurm_conf, const std::string &nodelist);

struct JobRead;
struct SlurmJob;
// find_slurm_job (slurm_job.hpp) on an answer of the cluster's, with
// whether it could be read told to calls.read_errors.
JobRead find_job_noted(Slurm &calls, const std::string &slurm_conf, const std::string &squeue_json, long long job, SlurmJob &out,
                       boost::json::object *record = nullptr);

SlurmView ask_slurm(Slurm &calls, const std::string &slurm_conf, long long job, const std::string &node,
                    int connect_timeout_ms = 1000);

// Whether a TCP connection to host:port is accepted within timeout_ms.
bool tcp_answers(const std::string &host, int port, int timeout_ms);

// Key=Value of a `scontrol -o show` line; "" when absent.
std::string scontrol_field(const std::string &line, const std::string &key);

// True when Slurm's node state says the node is not usable.
bool node_state_bad(const std::string &state);
// True when it is Slurm's own verdict that the node died: DOWN or FAIL (a
// NODE_FAIL job's nodes are DOWN). NOT_RESPONDING alone is a suspicion.
bool node_dead_in_slurm(const std::string &state);
bool job_state_running(const std::string &state);
// Slurm requeued the job itself (an admin's scontrol requeue, a preemption
// in REQUEUE mode, a node failure under JobRequeue=1): PENDING, REQUEUED,
// REQUEUE_HOLD, REQUEUE_FED, SPECIAL_EXIT.
bool job_requeued_by_slurm(const std::string &state);

}  // namespace shardnet::broker
