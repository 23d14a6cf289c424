// The shard CLI's view of its brokers: where they are and with which token,
// from flags, then the environment (SHARD_BROKER, SHARD_TOKEN, SHARD_CA_FILE),
// then ~/.config/shardnet/shard.json. JSON requests over libcurl.
#pragma once
#include <boost/json.hpp>
#include <map>
#include <optional>
#include <string>

namespace shardnet::cli {

struct BrokerRef {
    std::string name, url, token, ca_file;
};

struct CliConfig {
    BrokerRef broker;                               // the one to ask first
    std::map<std::string, BrokerRef> brokers;       // peers by name (shard watch follows a run to them)
    std::map<std::string, std::string> slurm_conf;  // cluster -> SLURM_CONF for sbatch
};

// Fills cfg from the config file, then the environment, then the flags
// given (non-empty); "" or what is wrong (naming the file or variable).
std::string load_cli_config(CliConfig &cfg, const BrokerRef &flags);

struct Answer {
    long status = 0;                 // 0: no answer
    boost::json::value body;         // parsed when JSON
    std::string error;               // transport error or the broker's message
    std::size_t bytes = 0;           // the body's length as read
    bool ok() const { return status >= 200 && status < 300; }
};

// max_body: the largest answer read (a run's receipts may pass the 1 MiB default).
Answer call(const BrokerRef &b, const std::string &method, const std::string &path, const std::string &body = "",
            long timeout_ms = 10000, std::size_t max_body = std::size_t(1) << 20);

}  // namespace shardnet::cli
