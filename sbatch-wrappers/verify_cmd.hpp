// shard verify: receipts checked offline with the brokers' public keys
// (common/receipt_verify), and the tools that make signed test material:
// shard receipt-sign (a statement file into a signed envelope) and shard
// log-head (a signed tree head with its proofs). See shard(1), doc/receipts.md.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sbatch-wrappers/verify_files.hpp"

namespace shardnet::cli {

// What one broker holds of a run (shard verify RUN): its envelopes (JSON
// texts) with the seq it listed each under, a head bundle over them ({"head",
// "inclusion"}, as --head reads it; "" when it gave none) and its public
// keys as it lists them (GET /v1/keys: used only without --key), with
// each retired key's valid_until (keyid -> RFC 3339 time: the key signs
// nothing later; used with --key too, since it only narrows what verifies).
struct FetchedLog {
    std::string broker;
    std::vector<std::string> envelopes;
    std::vector<long long> seqs;
    std::string head_bundle;
    std::vector<std::string> key_pems;
    std::map<std::string, std::string> valid_until;
    // Where it was asked (the key of the head kept for it), and how to ask
    // it for the consistency proof between two sizes of its log (GET
    // /v1/log/proof/consistency): "" or why not.
    std::string url;
    std::function<std::string(unsigned long long first, unsigned long long second, std::vector<std::string> &path_hex)> consistency;
    // --witness: this broker's log heads as the other brokers witnessed them
    // (witness_cmd.hpp), and the brokers that could not say.
    struct Witnessed { std::string by, head, conflict; };   // head: the signed envelope (JSON); conflict: why, "" none
    std::vector<Witnessed> witnessed;
    std::vector<std::string> witness_errors;
    // A page of a sealed checkpoint's file list, as this broker serves it
    // (verify_files.hpp): what --checkpoint-dir checks against a receipt's root.
    FilesPageGet files_page;
};
// Every broker's part of run (a moved run's chain crosses brokers); "" or
// why not (sbatch-wrappers/receipts_cmd.cpp asks the brokers).
using ReceiptFetcher = std::function<std::string(const std::string &run, std::vector<FetchedLog> &logs)>;

struct VerifyArgs {
    std::vector<std::string> inputs;     // FILE... (or RUN, with a fetcher)
    std::vector<std::string> key_files;  // --key PUB.pem (or a saved GET /v1/keys answer), one or more
    std::string checkpoint_dir, head_file;
    bool json = false;
    // A fetched run: the last head verified from each broker is kept in
    // heads_dir (kept_heads.hpp; "": none kept), and each new one must
    // extend it. forget_head: the kept ones of the brokers asked are
    // dropped first (--forget-head), and the new ones kept.
    std::string heads_dir;
    bool forget_head = false;
    // --witness: each fetched broker's head must be the history the other
    // brokers witnessed of it (witness_cmd.hpp).
    bool witness = false;
    // --files FILE: the sealed checkpoint's file list, saved (GET
    // .../files), for a receipt that commits it as a Merkle root.
    std::string files_file;
};

// Exit status: 0 all verify, 1 something fails (a line each), 2 usage.
int verify_receipts(const VerifyArgs &a, const ReceiptFetcher &fetch = nullptr);

// --key PRIV.pem --statement FILE [--payload-type T]: the signed envelope on stdout.
int receipt_sign(const std::map<std::string, std::string> &opt);
// --key PRIV.pem [--from N] FILE...: a signed tree head over the given
// envelopes (in order) with each one's inclusion proof; with --from, also
// a signed head of the first N and the consistency proof to it.
int log_head(const std::map<std::string, std::string> &opt, const std::vector<std::string> &files);

}  // namespace shardnet::cli
