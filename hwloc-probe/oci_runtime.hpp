// Whether Slurm on this node runs OCI containers (`srun --container`): the
// oci.conf beside slurm.conf, and the program its RunTimeRun (or
// RunTimeCreate) starts. Placement keeps a run in an image off a node
// whose probe found none (doc/containers.md).
#pragma once
#include <string>

namespace shardnet::probe {

struct OciSupport {
    bool ready = false;
    std::string oci_conf;   // the file read ("" when none was found)
    std::string runtime;    // the program it starts, as found on PATH
    std::string why;        // not ready: what is missing
};

// SLURM_CONF: the slurm.conf in use ($SLURM_CONF, else
// /etc/slurm/slurm.conf); its directory holds oci.conf. PATH: where a
// runtime named without a '/' is looked for.
OciSupport discover_oci(const std::string &slurm_conf, const std::string &path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");

// One oci.conf line's key and value ("RunTimeRun", the command without its
// quotes); false for a blank line or a comment.
bool oci_conf_line(const std::string &line, std::string &key, std::string &value);

}  // namespace shardnet::probe
