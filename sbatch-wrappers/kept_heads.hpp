// The last log head `shard verify RUN` verified from each broker, kept in
// the user's state directory ($XDG_STATE_HOME/shardnet/heads/, else
// ~/.local/state/shardnet/heads/): one file per broker URL, mode 0600,
// written atomically. Every later head from that broker must extend it,
// shown by an RFC 9162 consistency proof: a smaller head is a rollback, one
// the proof does not join to it a fork. A broker pins its own heads
// (broker/receipts/head_pin.hpp); this is the user's own witness, which the
// broker's host cannot reset.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "common/merkle.hpp"

namespace shardnet::cli {

struct KeptHead {
    std::string url;           // where it was fetched: the file's key
    std::string broker;        // the broker's id, as it named itself
    unsigned long long size = 0;
    merkle::Hash root{};
    std::string head;          // the signed head envelope (JSON): evidence to show
    std::string verified_at;   // when this CLI verified it (RFC 3339 UTC)
};

// The directory heads are kept in; "" with err when there is none to use
// (no HOME). Not created here.
std::string heads_dir(std::string &err);
// The file of a broker's URL below dir: the URL made a file name, with a
// short hash of the whole URL so that two URLs never share one.
std::string kept_head_path(const std::string &dir, const std::string &url);
// nullopt when there is none; err when one is there that cannot be read.
std::optional<KeptHead> read_kept_head(const std::string &path, std::string &err);
// Creates dir's missing parts (0700), writes a temporary file (0600),
// fsyncs and renames it over path. "" or why not, naming the file.
std::string write_kept_head(const std::string &path, const KeptHead &h);

// Whether a verified head (size, root) extends the kept one, given the
// consistency proof from kept.size to size (unused when size <= kept.size):
// "" when it does, else what is wrong, naming both sizes and roots: a
// smaller head (rolled back), the same size with another root or a proof
// that fails (forked). where: the broker as the message names it; file:
// the kept head's file.
std::string check_extends(const KeptHead &kept, unsigned long long size, const merkle::Hash &root,
                          const std::vector<merkle::Hash> &proof, const std::string &where, const std::string &file);

}  // namespace shardnet::cli
