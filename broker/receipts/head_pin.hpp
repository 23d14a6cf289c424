// The last log head this broker signed, kept outside its database, next to
// its signing key (KEY_FILE.head, mode 0600): the log only moves forward.
// A store whose log is shorter than that head, or whose tree at that size
// has another root, was rolled back or replaced; the broker refuses to start
// on it and says which.
#pragma once
#include <optional>
#include <string>

#include "common/merkle.hpp"

namespace shardnet::broker {

class Store;

struct HeadPin {
    long long size = 0;
    std::string root_hex;
};

std::string head_pin_path(const std::string &key_file);
// "" or why it could not be written (atomically: a temporary file, fsync, rename).
std::string write_head_pin(const std::string &path, const HeadPin &pin);
// "" when a pin can be written at path (tried at start: a broker that could
// serve no head says so then, not at the first head asked for).
std::string head_pin_writable(const std::string &path);
// nullopt when there is none; err when there is one it cannot read.
std::optional<HeadPin> read_head_pin(const std::string &path, std::string &err);
// "" when the store's log holds the pinned head (its size at least, the same
// root at that size), else what is wrong, naming the file and both sizes or roots.
std::string check_head_pin(Store &store, const std::string &path);

}  // namespace shardnet::broker
