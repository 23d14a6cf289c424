// Partition, account, QOS and GPU type names differ between clusters: "gpu" here is
// "gpu-a100" there, and a cluster may have no such partition at all. Each
// cluster's table (clusters.NAME.names in the broker config) says what the
// site's names are called on that cluster, or that it has none (null). A
// job's options are put in the site's names as they leave their cluster and
// in the target's as they arrive; a cluster that has no name for one of them
// is no place for the job, and the reason says which ("no partition for
// gpu"), never a silent default.
#pragma once
#include <boost/json/fwd.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardnet::broker {

// kind ("partition", "account", "qos", "gpu_type") -> site name -> this
// cluster's name (nullopt: this cluster has none). A GPU type is the TYPE
// of --gres=gpu:TYPE:N and --gpus*=TYPE:N ("a100" here, "A100-SXM4" there).
using NameTable = std::map<std::string, std::map<std::string, std::optional<std::string>>>;

// The kinds a table may name.
const std::vector<std::string> &mapped_kinds();

// Parses clusters.NAME.names; "" when good, else what is wrong (path-first).
std::string parse_name_table(const boost::json::value &v, const std::string &path, NameTable &out);

// The options' names in the site's words: a name this cluster's table gives
// for a site name becomes that site name; others are their own.
void site_names(const NameTable &from, boost::json::object &opts);

// The options' names in the target cluster's words. A name the target's
// table says it has none of is left out of a list ("gpu,cpu" -> "cpu");
// when none of a list is left, the target cannot take the job: the answer
// says why ("no partition for gpu"). Each change made is named in mapped
// ("partition gpu -> gpu-a100").
std::string local_names(const NameTable &to, boost::json::object &opts, std::vector<std::string> *mapped = nullptr);

// The job's partitions (a comma list) as names; empty when it names none.
std::vector<std::string> job_partitions(const boost::json::object &opts);

// The GPU types the job's GRES options name (gres gpu:TYPE:N, gpus*
// TYPE:N); empty when it names none (any GPU will do).
std::vector<std::string> job_gpu_types(const boost::json::object &opts);

// Whether a node's GRES as sinfo %G shows it ("gpu:a100:4(S:0-1),nvme:1")
// has GPUs of type.
bool node_has_gpu_type(const std::string &node_gres, const std::string &type);

}  // namespace shardnet::broker
