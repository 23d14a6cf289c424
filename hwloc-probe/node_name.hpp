// Host names reach Slurm lines (NodeName=...) and the descriptor: they come
// from a saved topology's HostName, --host or gethostname(), so they are
// checked, not trusted.
#pragma once
#include <string>

namespace shardnet::probe {

// "" when NAME is a node name Slurm can take in slurm.conf and gres.conf,
// else a one-line reason naming FIELD (e.g. "the topology's HostName").
// Accepted: 1 to 64 bytes (Linux's HOST_NAME_MAX) of ASCII letters, digits,
// '-', '_' and '.', starting with a letter or digit. Anything else would
// end or split the line Slurm parses (newline, space, '=', ',', '#', '[').
std::string check_node_name(const std::string &name, const std::string &field);

}  // namespace shardnet::probe
