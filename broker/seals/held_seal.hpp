// A commit of a checkpoint name this broker holds a seal of already (its
// own, or carried here with the run from a peer): an attempt that resumed
// from it, or a retry, commits the same files again. The seal stands as it
// is: the same files are answered with it (no new seal, no new receipt);
// other files under its name are refused, naming the checkpoint.
#pragma once
#include <boost/json/fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/file_list.hpp"

namespace shardnet::broker {

class Store;

namespace sealed_list {

struct HeldSeal {
    long long attempt = 0, ranks = 0;
    std::string sealed_by;
    bool carried = false;
    std::vector<file_list::Entry> rank_files;   // the files of the rank asked, as sealed
};

// The seal of (run, name) this broker holds, with rank's files in it; none
// when it holds no seal of that name.
std::optional<HeldSeal> held_seal(Store &store, const std::string &run, const std::string &name, long long rank,
                                  const std::string &broker_name);
// "" when files (a commit's array of {path, sha256, bytes}) are the seal's
// files of that rank, else the first difference, naming the path.
std::string difference(const std::vector<file_list::Entry> &sealed, const boost::json::array &files);

}  // namespace sealed_list
}  // namespace shardnet::broker
