// `shard show`'s views. Of a FAILED run: why it failed (its FAILED event's cause)
// and, under it, the last lines of the batch script's standard error as
// the broker kept them (the FAILED event's evidence, or the STDERR event
// that followed when a --shardnet-fatal-exit code ended the run first).
#pragma once
#include <boost/json.hpp>
#include <string>

namespace shardnet::cli {

// answer: GET /v1/runs/RUN/events. The lines to print ("" when the run has
// no FAILED event). The tail is the job's own text: it is printed as text
// that a terminal cannot read as commands (control characters and escapes
// are shown as '?'), each line indented under the cause.
std::string render_failure(const boost::json::value &answer);

// run: GET /v1/runs/RUN of a run this broker moved to a peer (its
// "onward"). Where it went and what became of it there, as the peer last
// told this broker ("" when the run did not move). Text safe for a
// terminal, as above.
std::string render_onward(const boost::json::value &run);

// run: GET /v1/runs/RUN. Its goodput (doc/goodput.md): the ratio, where
// the wall time went, and one line per fault with its cause, node and
// what it cost ("" when the answer has none).
std::string render_goodput(const boost::json::value &run);

}  // namespace shardnet::cli
