// Runs the probe's work on an untrusted saved topology in a child process.
// libhwloc's XML import trusts its input: an object without a cpuset or
// nodeset, or objects nested thousands deep, crash it (SIGSEGV) in
// hwloc 2.9, and lstopo with it. Checking the XML first would mean
// re-implementing hwloc's importer and still missing the next crash; a
// child catches every one of them for the price of one fork (~0.2 ms).
#pragma once
#include <functional>
#include <string>

namespace shardnet::probe {

// Forks; the child runs BODY (its stdout and stderr are this process's),
// flushes and exits with BODY's result. Returns that result, or 2 after
// printing "shardnet-probe: topology 'WHAT' crashed ..." when the child
// died of a signal. Without fork, BODY runs here.
int run_isolated(const std::string &what, const std::function<int()> &body);

}  // namespace shardnet::probe
