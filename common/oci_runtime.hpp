// Whether Slurm on this node runs OCI containers (`srun --container`): the
// oci.conf beside slurm.conf, read as Slurm reads it, and the program its
// RunTimeRun (or RunTimeCreate) starts. Placement keeps a run in an image
// off a node whose probe found none (doc/containers.md).
#pragma once
#include <map>
#include <string>

namespace shardnet {

struct OciSupport {
    bool known = true;      // false: the probe could not tell (oci.conf unreadable to it)
    bool ready = false;
    std::string oci_conf;   // the file read ("" when none was found)
    std::string runtime;    // the program it starts, as found ("" when not judged: a shell construct)
    std::string why;        // not ready (or not known): what was found
};

inline constexpr const char *kRuntimePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// SLURM_CONF: the slurm.conf in use; its directory holds oci.conf. PATH:
// where a runtime named without a '/' is looked for.
OciSupport discover_oci(const std::string &slurm_conf, const std::string &path = kRuntimePath);

// oci.conf's text as Slurm's parser reads it: KEY=VALUE pairs, several to
// a line, keys in any case (stored lower-case), a value double-quoted or up
// to the next blank, '#' to the end of the line a comment unless written
// \#, a line ending in '\' joined to the next. "" or what Slurm would
// refuse.
std::string parse_oci_conf(const std::string &text, std::map<std::string, std::string> &out);

// The program a RunTime* command starts under /bin/sh -c: its first word
// after NAME=VALUE assignments, `exec` and `env` (and env's options and
// assignments), unquoted. "" when a shell construct decides it ($, `, (,
// ;, |, &, <, >).
std::string command_program(const std::string &command);

}  // namespace shardnet
