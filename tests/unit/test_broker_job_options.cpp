// The options of a job as Slurm 22.05's squeue --json records them, read
// for the next attempt, and the sbatch arguments made of them (a peer's
// spec goes through the same checks).
#include <algorithm>
#include <boost/json.hpp>
#include <doctest/doctest.h>

#include "broker/recovery/job_environment.hpp"
#include "broker/slurm/job_options.hpp"
#include "broker/slurm/name_map.hpp"

using namespace shardnet::broker;
namespace json = boost::json;

namespace {

bool has(const std::vector<std::string> &v, const std::string &x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// A job object as squeue --json printed it on Debian 12 for
// sbatch -p main --time=00:20:00 --time-min=10 --mem=300 --ntasks-per-node=1
//   -J fid-job --nice=7 --comment="user words" -e /tmp/err-%j.txt --no-requeue
json::object recorded() {
    return json::parse(R"({"account":"","array_job_id":0,"array_task_id":null,"batch_features":"","burst_buffer":"",
        "comment":"user words shardnet-decision:alpha:r1/attempt-2:ab12","container":"","contiguous":false,"cpus_per_task":null,
        "cpus_per_tres":"","dependency":"","features":"","het_job_id":0,"licenses":"","memory_per_cpu":null,"memory_per_node":300,
        "memory_per_tres":"","name":"fid-job","nice":7,"partition":"main","qos":"","requeue":false,"required_nodes":"",
        "resv_name":"","shared":null,"standard_error":"/tmp/err-%j.txt","standard_input":"/dev/null","tasks_per_node":1,
        "threads_per_core":null,"time_limit":20,"time_minimum":10,"tres_per_job":"","tres_per_node":"","tres_per_socket":"",
        "tres_per_task":"","wckey":""})").as_object();
}

}  // namespace

TEST_CASE("job options: what Slurm recorded becomes the next attempt's sbatch arguments") {
    json::object opts;
    std::vector<std::string> uncarried;
    read_job_options(recorded(), opts, uncarried);
    CHECK(uncarried.empty());
    CHECK(opts.at("comment").as_string() == "user words");   // the requeue's marker is not the user's
    std::string err;
    const auto args = sbatch_options(opts, err);
    INFO(err);
    CHECK(err.empty());
    for (const char *a : {"--partition=main", "--time=20", "--time-min=10", "--mem=300", "--ntasks-per-node=1", "--job-name=fid-job",
                          "--nice=7", "--comment=user words", "--no-requeue"})
        CHECK_MESSAGE(has(args, a), a);
    CHECK(!has(args, "--input=/dev/null"));
    CHECK(std::none_of(args.begin(), args.end(), [](const std::string &a) { return a.rfind("--account", 0) == 0 || a.rfind("--qos", 0) == 0; }));
}

TEST_CASE("job options: GPUs, exclusive, accounting; what cannot be carried is named") {
    json::object j = recorded();
    j["account"] = "ml-team";
    j["qos"] = "high";
    j["tres_per_node"] = "gres:gpu:2";
    j["tres_per_task"] = "gres:gpu:1";
    j["cpus_per_tres"] = "gres:gpu:4";
    j["memory_per_tres"] = "gres:gpu:1024";
    j["shared"] = "none";
    j["features"] = "h200&ib";
    j["dependency"] = "afterok:12";
    j["array_job_id"] = 40;
    j["array_task_id"] = 3;
    json::object opts;
    std::vector<std::string> uncarried;
    read_job_options(j, opts, uncarried);
    std::string err;
    const auto args = sbatch_options(opts, err);
    CHECK(err.empty());
    for (const char *a : {"--account=ml-team", "--qos=high", "--gres=gpu:2", "--gpus-per-task=1", "--cpus-per-gpu=4", "--mem-per-gpu=1024",
                          "--exclusive", "--constraint=h200&ib"})
        CHECK_MESSAGE(has(args, a), a);
    CHECK(has(uncarried, "dependency afterok:12"));
    CHECK(has(uncarried, "array task 3 of job 40"));
    // --gpus of two types: each entry in --gpus's spelling.
    json::object two = recorded();
    two["tres_per_job"] = "gres:gpu:a100:2,gres:gpu:v100:1";
    json::object o2;
    read_job_options(two, o2, uncarried);
    CHECK(o2.at("gpus").as_string() == "a100:2,v100:1");
}

TEST_CASE("job options from a peer: an unknown option or a malformed value submits nothing") {
    std::string err;
    CHECK(sbatch_options(json::object{{"uid", "0"}}, err).empty());
    CHECK(err == "job option uid: not one a requeue carries");
    err.clear();
    CHECK(sbatch_options(json::object{{"partition", "main --uid=0"}}, err).empty());
    CHECK(err == "job option partition: malformed value");
    err.clear();
    // A name with a newline is the user's as Slurm took it: one argv element.
    CHECK(sbatch_options(json::object{{"job_name", "a\nb"}}, err) == std::vector<std::string>{"--job-name=a\nb"});
    CHECK(sbatch_options(json::object{{"job_name", std::string("a\0b", 3)}}, err).empty());
    CHECK(err == "job option job_name: malformed value");
    err.clear();
    CHECK(sbatch_options(json::object{{"error", "relative/err.txt"}}, err).empty());
    err.clear();
    CHECK(sbatch_options(json::object{{"time", "-5"}}, err).empty());
    err.clear();
    CHECK(sbatch_options(json::object{{"exclusive", true}}, err).empty());
    CHECK(err == "job option exclusive: expected a string");
    err.clear();
    CHECK(sbatch_options(json::object{{"partition", "gpu"}, {"exclusive", ""}, {"no_requeue", true}}, err).size() == 3);
    CHECK(err.empty());
}

TEST_CASE("job options of a requeue: a malformed one is left out and named, the rest used") {
    std::string err;
    std::vector<std::string> dropped;
    const auto args = sbatch_options(json::object{{"partition", "main --uid=0"}, {"uid", "0"}, {"job_name", "ok"}}, err, &dropped);
    CHECK(err.empty());
    CHECK(args == std::vector<std::string>{"--job-name=ok"});
    CHECK(has(dropped, "partition (malformed value)"));
    CHECK(has(dropped, "uid (not one a requeue carries)"));
}

TEST_CASE("the requeue's marker follows the user's comment and is taken out again") {
    CHECK(comment_with_marker("", "alpha:r1/attempt-2:n") == "shardnet-decision:alpha:r1/attempt-2:n");
    CHECK(comment_with_marker("exp 7", "d") == "exp 7 shardnet-decision:d");
    CHECK(user_comment("exp 7 shardnet-decision:d") == "exp 7");
    CHECK(user_comment("shardnet-decision:d") == "");
    CHECK(user_comment("plain") == "plain");
}

TEST_CASE("names across clusters: into the site's words as a job leaves, into the target's as it arrives") {
    NameTable alpha, beta;
    alpha["partition"]["gpu"] = std::string("a-gpu");
    beta["partition"]["gpu"] = std::string("b-gpu");
    beta["partition"]["debug"] = std::nullopt;
    beta["account"]["ml"] = std::string("ml-beta");
    json::object opts{{"partition", "a-gpu"}, {"account", "ml"}, {"qos", "high"}, {"job_name", "a-gpu"}};
    site_names(alpha, opts);
    CHECK(opts.at("partition") == "gpu");
    CHECK(opts.at("job_name") == "a-gpu");   // only the mapped kinds
    std::vector<std::string> mapped;
    CHECK(local_names(beta, opts, &mapped) == "");
    CHECK(opts.at("partition") == "b-gpu");
    CHECK(opts.at("account") == "ml-beta");
    CHECK(opts.at("qos") == "high");          // no table: its own name
    CHECK(mapped == std::vector<std::string>{"account ml -> ml-beta", "partition gpu -> b-gpu"});
    // A list keeps what the target has; with nothing left, the target is no place for it.
    json::object list{{"partition", "debug,gpu"}};
    mapped.clear();
    CHECK(local_names(beta, list, &mapped) == "");
    CHECK(list.at("partition") == "b-gpu");
    CHECK(mapped == std::vector<std::string>{"partition gpu -> b-gpu", "partition debug left out (none here)"});
    json::object only{{"partition", "debug"}};
    CHECK(local_names(beta, only) == "no partition for debug");
    CHECK(job_partitions(json::object{{"partition", "a,b"}}) == std::vector<std::string>{"a", "b"});
    CHECK(job_partitions(json::object{}).empty());
}

TEST_CASE("GPU types across clusters: the TYPE of gres gpu:TYPE:N and gpus*=TYPE:N, mapped both ways") {
    NameTable alpha, beta;
    alpha["gpu_type"]["a100"] = std::string("tesla");          // alpha calls the site's a100 tesla
    beta["gpu_type"]["a100"] = std::string("A100-SXM4");
    beta["gpu_type"]["v100"] = std::nullopt;                  // beta has none
    json::object opts{{"gres", "gpu:tesla:2,nvme:1"}, {"gpus_per_task", "tesla:1"}, {"gpus", "4"}, {"partition", "tesla"}};
    site_names(alpha, opts);
    CHECK(opts.at("gres") == "gpu:a100:2,nvme:1");
    CHECK(opts.at("gpus_per_task") == "a100:1");
    CHECK(opts.at("gpus") == "4");           // no type: nothing to map
    CHECK(opts.at("partition") == "tesla");  // a partition is not a GPU type
    CHECK(job_gpu_types(opts) == std::vector<std::string>{"a100"});
    std::vector<std::string> mapped;
    CHECK(local_names(beta, opts, &mapped) == "");
    CHECK(opts.at("gres") == "gpu:A100-SXM4:2,nvme:1");
    CHECK(opts.at("gpus_per_task") == "A100-SXM4:1");
    CHECK(std::find(mapped.begin(), mapped.end(), "gpu_type a100 -> A100-SXM4") != mapped.end());
    json::object v100{{"gres", "gpu:v100"}};
    CHECK(local_names(beta, v100) == "no gpu_type for v100");
    json::object untyped{{"gres", "gpu:2"}, {"gpus_per_socket", "1"}};
    CHECK(local_names(beta, untyped) == "");
    CHECK(untyped.at("gres") == "gpu:2");
    CHECK(job_gpu_types(untyped).empty());
    CHECK(node_has_gpu_type("gpu:tesla:2(S:0),nvme:1", "tesla"));
    CHECK_FALSE(node_has_gpu_type("gpu:tesla:2(S:0)", "a100"));
    CHECK_FALSE(node_has_gpu_type("(null)", "tesla"));
}


namespace {
// Job objects as Slurm 22.05's squeue --json printed them on the harness
// (only the fields read here). gpu_job: sbatch -N1 --account=ml --qos=high
//   --gpus-per-node=1 --gpu-bind=closest --gpu-freq=medium,memory=high
//   --mem-bind=local --cpu-freq=low-high:performance --distribution=block:cyclic
//   --ntasks-per-socket=1 --ntasks-per-core=1 --spread-job --mincpus=2 --tmp=10
json::object gpu_job() {
    return json::parse(R"({"account":"ml","comment":"","cores_per_socket":null,"cpu_frequency_governor":2181038080,
        "cpu_frequency_maximum":2147483651,"cpu_frequency_minumum":2147483649,"cpus_per_task":1,
        "flags":["SPREAD_JOB","JOB_ACCRUE_OVER","JOB_WAS_RUNNING"],"memory_per_node":null,"minimum_cpus_per_node":2,
        "minimum_tmp_disk_per_node":10,"name":"wrap","nice":null,"partition":"main","qos":"high","requeue":true,"shared":null,
        "sockets_per_node":null,"standard_input":"/dev/null","tasks_per_core":1,"tasks_per_node":0,"tasks_per_socket":1,
        "threads_per_core":null,"time_limit":null,"time_minimum":0,"tres_bind":"gpu:closest","tres_freq":"gpu:medium,memory=high",
        "tres_per_job":"","tres_per_node":"gres:gpu:1","tres_per_socket":"","tres_per_task":""})").as_object();
}
// sbatch -N1 (nothing asked: every layout field null or Slurm's default)
json::object plain_job() {
    return json::parse(R"({"account":"physics","comment":"","cores_per_socket":null,"cpu_frequency_governor":null,
        "cpu_frequency_maximum":null,"cpu_frequency_minimum":null,"cpus_per_task":null,"flags":["JOB_ACCRUE_OVER","JOB_WAS_RUNNING"],
        "memory_per_node":null,"minimum_cpus_per_node":1,"minimum_tmp_disk_per_node":0,"name":"wrap","nice":null,"partition":"main",
        "qos":"normal","requeue":true,"shared":null,"sockets_per_node":null,"standard_input":"/dev/null","tasks_per_core":null,
        "tasks_per_node":0,"tasks_per_socket":null,"threads_per_core":null,"time_limit":null,"time_minimum":0,"tres_bind":"",
        "tres_freq":"","tres_per_job":"","tres_per_node":"","tres_per_socket":"","tres_per_task":""})").as_object();
}
std::vector<std::string> args_of(const json::object &job, std::vector<std::string> &uncarried) {
    json::object opts;
    read_job_options(job, opts, uncarried);
    std::string err;
    auto args = sbatch_options(opts, err);
    INFO(err);
    CHECK(err.empty());
    return args;
}
}  // namespace

TEST_CASE("job options: GPU binding and clocks, CPU frequency, sockets, cores, tmp, spread-job are carried") {
    std::vector<std::string> uncarried;
    const auto args = args_of(gpu_job(), uncarried);
    CHECK(uncarried.empty());
    for (const char *a : {"--account=ml", "--qos=high", "--gres=gpu:1", "--gpu-bind=closest", "--gpu-freq=medium,memory=high",
                          "--cpu-freq=low-high:performance", "--ntasks-per-socket=1", "--ntasks-per-core=1", "--spread-job",
                          "--mincpus=2", "--tmp=10"})
        CHECK_MESSAGE(has(args, a), a);
    // sbatch -N1 -B 1 --gpus-per-socket=1: the sockets a per-socket count needs.
    json::object per_socket = plain_job();
    per_socket["sockets_per_node"] = 1;
    per_socket["tres_per_socket"] = "gres:gpu:1";
    per_socket["cores_per_socket"] = 4;
    const auto s = args_of(per_socket, uncarried);
    for (const char *a : {"--sockets-per-node=1", "--gpus-per-socket=1", "--cores-per-socket=4"}) CHECK_MESSAGE(has(s, a), a);
    CHECK(uncarried.empty());
}

TEST_CASE("job options: a job that asked for none of it gets none of it") {
    std::vector<std::string> uncarried;
    const auto args = args_of(plain_job(), uncarried);
    CHECK(uncarried.empty());
    auto sorted = args;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == std::vector<std::string>{"--account=physics", "--job-name=wrap", "--partition=main", "--qos=normal"});
}

TEST_CASE("job options: --cpu-freq read back in each of its forms; what cannot be written back is named") {
    auto freq = [](json::object j, std::vector<std::string> &uncarried) {
        json::object opts;
        read_job_options(j, opts, uncarried);
        return opts.contains("cpu_freq") ? std::string(opts.at("cpu_freq").as_string()) : std::string("-");
    };
    std::vector<std::string> u;
    json::object j = plain_job();
    j["cpu_frequency_maximum"] = 2147483651;   // --cpu-freq=high
    CHECK(freq(j, u) == "high");
    j = plain_job();
    j["cpu_frequency_governor"] = 2181038080;  // --cpu-freq=performance
    CHECK(freq(j, u) == "performance");
    j = plain_job();                           // --cpu-freq=1000000-2000000:ondemand
    j.erase("cpu_frequency_minimum");
    j["cpu_frequency_minumum"] = 1000000;
    j["cpu_frequency_maximum"] = 2000000;
    j["cpu_frequency_governor"] = 2214592512;
    CHECK(freq(j, u) == "1000000-2000000:ondemand");
    CHECK(u.empty());
    j["cpu_frequency_governor"] = 2147483655;  // no governor Slurm names
    CHECK(freq(j, u) == "-");
    CHECK(u == std::vector<std::string>{"cpu frequency min 1000000 max 2000000 governor 2147483655"});
}

TEST_CASE("job options: a GPU binding or clock of another TRES is named, not carried") {
    json::object j = plain_job();
    j["tres_bind"] = "nic:closest";
    j["tres_freq"] = "nic:high";
    std::vector<std::string> uncarried;
    const auto args = args_of(j, uncarried);
    CHECK(has(uncarried, "tres_bind nic:closest"));
    CHECK(has(uncarried, "tres_freq nic:high"));
    CHECK(std::none_of(args.begin(), args.end(), [](const std::string &a) { return a.rfind("--gpu-", 0) == 0; }));
    std::string err;
    CHECK(sbatch_options(json::object{{"gpu_bind", "closest;rm -rf /"}}, err).empty());
    CHECK(err == "job option gpu_bind: malformed value");
    CHECK(sbatch_options(json::object{{"spread_job", "yes"}}, err).empty());
    CHECK(err == "job option spread_job: expected true or false");
}

TEST_CASE("--distribution and --mem-bind: from the batch step's environment (the record lacks them) back to sbatch's") {
    // As sbatch --distribution=block:cyclic --mem-bind=verbose,local put them in the batch step's environment.
    using namespace std::string_literals;
    std::string env = "PATH=/usr/bin\0SLURM_DISTRIBUTION=block:cyclic\0SLURM_MEM_BIND=local\0SLURM_MEM_BIND_VERBOSE=verbose\0MYVAR=1\0"s;
    std::vector<std::string> bad;
    CHECK(step_options(env, bad) == std::vector<std::string>{"--distribution=block:cyclic", "--mem-bind=verbose,local"});
    CHECK(env == "PATH=/usr/bin\0MYVAR=1\0"s);   // sbatch sets them anew from its options
    CHECK(bad.empty());
    env = "SLURM_MEM_BIND=local\0SLURM_MEM_BIND_VERBOSE=quiet\0"s;
    CHECK(step_options(env, bad) == std::vector<std::string>{"--mem-bind=local"});
    env = "SLURM_DISTRIBUTION=block --uid=0\0A=1\0"s;
    CHECK(step_options(env, bad).empty());
    CHECK(bad == std::vector<std::string>{"distribution (malformed value)"});
    CHECK(env == "A=1\0"s);
    env = "A=1\0"s;
    CHECK(step_options(env, bad).empty());
    CHECK(env == "A=1\0"s);
    // A site that drops SLURM_* still keeps these: they are the user's options.
    const std::vector<std::string> drop{"SLURM_*", "SECRET"};
    CHECK_FALSE(environment_dropped("SLURM_DISTRIBUTION", drop));
    CHECK_FALSE(environment_dropped("SLURM_MEM_BIND", drop));
    CHECK(environment_dropped("SLURM_JOB_ID", drop));
    CHECK(environment_dropped("SLURM_MEM_BIND_LIST", drop));
    CHECK(environment_dropped("SECRET", drop));
}

TEST_CASE("job options: what else 22.05's squeue --json shows of sbatch's options, carried or named") {
    // Each field as the harness's Slurm printed it for the option named.
    std::vector<std::string> uncarried;
    json::object j = plain_job();
    j["profile"] = json::array{"Task"};                            // --profile=task
    j["delay_boot"] = 300;                                         // --delay-boot=5 (minutes)
    j["flags"] = json::array{"GRES_ENFORCE_BIND", "USE_MIN_NODES"}; // --gres-flags=enforce-binding --use-min-nodes
    const auto args = args_of(j, uncarried);
    for (const char *a : {"--profile=task", "--delay-boot=5", "--gres-flags=enforce-binding", "--use-min-nodes"})
        CHECK_MESSAGE(has(args, a), a);
    CHECK(uncarried.empty());
    j = plain_job();
    j["deadline"] = 1796294001;                                    // --deadline=now+2hours
    j["cluster_features"] = "x";                                   // --cluster-constraint=x
    j["mcs_label"] = "x";                                          // --mcs-label=x
    j["max_nodes"] = 2;                                            // -N1-2
    j["node_count"] = 1;
    j["delay_boot"] = 90;
    args_of(j, uncarried);
    for (const char *u : {"deadline 1796294001 (a time of attempt 1's)", "cluster constraint x", "mcs label x",
                          "node count range up to 2 (placement gives 1)", "delay boot 90 s"})
        CHECK_MESSAGE(has(uncarried, u), u);
    uncarried.clear();
    j = plain_job();
    j["max_nodes"] = 1;                                            // -N1
    j["node_count"] = 1;
    j["profile"] = nullptr;
    args_of(j, uncarried);
    CHECK(uncarried.empty());
}
