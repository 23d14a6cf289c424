// The options of a job as Slurm 22.05's squeue --json records them, read
// for the next attempt, and the sbatch arguments made of them (a peer's
// spec goes through the same checks).
#include <algorithm>
#include <boost/json.hpp>
#include <doctest/doctest.h>

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

