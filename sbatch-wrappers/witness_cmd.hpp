// shard verify --witness: a broker's log as the other brokers witnessed it
// (GET /v1/witness there, broker/federation/witness.hpp) against the head
// it shows this user. A head a peer saw that is larger than the one shown
// here, or that the broker's own consistency proof does not join to it, is
// a second history; so is a conflict the peer kept. The witnessed heads
// are the broker's own signed statements: checked with its keys.
#pragma once
#include <boost/json.hpp>
#include <string>
#include <vector>

#include "common/receipt_verify.hpp"
#include "common/signing_key.hpp"
#include "sbatch-wrappers/client.hpp"
#include "sbatch-wrappers/verify_cmd.hpp"

namespace shardnet::cli {

// Asks every broker of cfg but the one at log.url what it witnessed of
// log.broker (a peer of that name in its config), into log.witnessed.
void fetch_witnesses(const CliConfig &cfg, FetchedLog &log);

// The lines that fail (none: every witness saw this history). head_report:
// the head verified here ({tree_size, root_hash}); report gets "witnessed":
// [{by, tree_size}] for those that agree.
std::vector<std::string> check_witnesses(const FetchedLog &log, const boost::json::object &head_report, const std::vector<SigningKey> &keys,
                                         const receipt::KeyRetirements &retired, boost::json::object &report);

}  // namespace shardnet::cli
