// The last lines of a batch script's standard error, sent with the
// heartbeat that reports its non-zero end: what a user reads first in the
// FAILED event and in `shard show`. Read by the batch step's agent, as the
// job's user. Everything in it is the job's: the text is made plain (valid
// UTF-8, no control characters but newline and tab) before it leaves.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace shardnet {

constexpr std::size_t kStderrTailBytes = 4096;   // read at most this much, from the end
constexpr std::size_t kStderrTailLines = 10;

// bytes: the end of a file (whole, when at_start). The last kStderrTailLines
// lines as plain text, at most kStderrTailBytes: a line cut by the read's
// start is left out, a line rewritten with carriage returns (a progress
// bar) keeps its last version, terminal escapes (colours) are dropped with
// their parameters, other control characters (C0, DEL, C1) dropped, bytes
// that are not UTF-8 become U+FFFD; no trailing newline. "" when nothing is left.
std::string clean_stderr_tail(std::string_view bytes, bool at_start);

// The tail of the file at path, opened as the caller (O_NONBLOCK, never a
// controlling terminal) and read only when it is a regular file: a FIFO or
// a device is not waited on. "" with err set when it cannot be read.
std::string read_stderr_tail(const std::string &path, std::string &err);

}  // namespace shardnet
