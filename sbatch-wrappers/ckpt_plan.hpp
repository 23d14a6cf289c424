// shard ckpt plan and shard ckpt simulate: the checkpoint interval for
// given inputs (common/ckpt_model), and the simulator's check of it
// (common/ckpt_sim). Neither needs a broker.
#pragma once
#include <map>
#include <string>

namespace shardnet::cli {

// opt: the command line's --key value pairs. Returns the exit status;
// errors name the option.
int ckpt_plan(const std::map<std::string, std::string> &opt);
int ckpt_simulate(const std::map<std::string, std::string> &opt);

}  // namespace shardnet::cli
