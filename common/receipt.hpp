// ShardNet receipts: signed records of who ran which shard, where, with
// what, against which checkpoint (doc/receipts.md). Each is an in-toto
// Statement v1 whose predicate (predicateType kPredicateType) names its run,
// its place in the run's chain (seq from 1) and the SHA-256 of the previous
// receipt's envelope, inside a DSSE envelope signed by the broker (Ed25519).
#pragma once
#include <boost/json/object.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dsse.hpp"

namespace shardnet::receipt {

inline constexpr const char *kStatementType = "https://in-toto.io/Statement/v1";
inline constexpr const char *kPredicateType = "https://shardnet.dev/receipt/v1";

// attempt_restarted: `shard launch` relaunched the attempt's step inside its
// job (a dead node, or a straggler, left out; a spare in its place).
enum class Kind { attempt_started, checkpoint_sealed, attempt_ended, run_ended, attempt_restarted };
const char *kind_name(Kind k);   // "attempt-started", ...
std::optional<Kind> kind_of(std::string_view name);

// An in-toto ResourceDescriptor as receipts use it: a name, its sha256 and
// annotations (a shard's size in bytes, its rank and node).
struct Subject {
    std::string name, sha256;
    boost::json::object annotations;
};

// One shard file of a sealed checkpoint, as the ranks' manifests list it
// (path relative to the checkpoint directory).
struct ShardFile {
    std::string path, sha256;
    unsigned long long bytes = 0;
    long long rank = -1;   // -1: not known
    std::string node;
};
std::vector<Subject> shard_subjects(const std::vector<ShardFile> &files);

struct Receipt {
    Kind kind = Kind::attempt_started;
    std::string run;
    long long attempt = 1;
    std::string broker;      // the id of the broker that signed it
    std::string time;        // RFC 3339, UTC (utc_time)
    long long seq = 1;       // from 1 in the run's chain
    std::string previous;    // hex SHA-256 of the previous envelope; "" (null) for seq 1
    boost::json::object body;        // kind-specific (doc/receipts.md)
    std::vector<Subject> subjects;   // checkpoint-sealed: its shards; else made by make_statement
};

// "2025-03-01T12:00:00.250Z" for Unix time t.
std::string utc_time(double t);
// Exactly YYYY-MM-DDTHH:MM:SS[.fraction]Z: the one spelling of UTC receipts use.
bool is_utc_time(std::string_view s);
// Two such times: -1, 0 or 1 as a is before, at or after b (fractions of
// any length: ".5" is ".500").
int compare_utc_times(std::string_view a, std::string_view b);

// "" when r can be a receipt, else what is wrong, naming the field.
std::string receipt_error(const Receipt &r);
// The Statement's JSON bytes (the envelope's payload). A kind without
// subjects of its own gets one naming the run and attempt, whose digest is
// the body's (in-toto wants at least one subject). Throws
// std::invalid_argument with receipt_error's words for a bad receipt.
std::string make_statement(const Receipt &r);
// Strict reading of a Statement: its type, the predicate type, every
// predicate field and each subject. "" or what is wrong, naming the field.
std::string parse_statement(std::string_view payload, Receipt &out);

// A signed envelope for r (payloadType application/vnd.in-toto+json).
std::string sign_receipt(const SigningKey &key, const Receipt &r, dsse::Envelope &out);
// The hex SHA-256 of the envelope's JSON bytes (dsse::to_json): what the
// next receipt's "previous" names and the log's leaf is made from.
std::string envelope_digest(const dsse::Envelope &env);

}  // namespace shardnet::receipt
