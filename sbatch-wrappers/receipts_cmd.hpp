// shard receipts RUN and the broker side of shard verify RUN: a run's
// receipts, head and inclusion proofs from every broker the CLI knows (a
// moved run's chain crosses brokers), checked offline by verify_cmd.
#pragma once
#include <string>

#include "sbatch-wrappers/client.hpp"
#include "sbatch-wrappers/verify_cmd.hpp"

namespace shardnet::cli {

// Asks cfg's broker and then each named broker (once per URL) for the run's
// receipts, the log head and each receipt's inclusion proof, and the keys.
// witness: each broker's log as the others witnessed it too (witness_cmd.hpp).
ReceiptFetcher broker_fetcher(const CliConfig &cfg, bool witness = false);

// shard receipts RUN [--json]: one line per receipt (seq, kind, time, what
// it attests), or with --json the envelopes as a JSON array. Exit status
// as shard(1): 0, 2 (no such run), 3 (broker error).
int show_receipts(const CliConfig &cfg, const std::string &run, bool as_json);

}  // namespace shardnet::cli
