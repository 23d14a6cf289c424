// The state directories of crun (its --root) for oci.conf's RunTime*
// commands (doc/containers.md, shardnet-oci-user). Slurm 22.05 runs
// RunTimeQuery, RunTimeKill and RunTimeDelete as root: a state dir the job's
// user can write would let that user name any process (slurmd, another
// user's task) as "the container" that root's crun then kills. So the
// runtime runs with the user's credentials, and each user's state dir is
// PARENT/USER: PARENT root's and writable by nobody else (not 1777, where
// one user could make another's dir first), USER's dir made by root and
// given to the user, mode 0700.
#pragma once
#include <string>
#include <sys/types.h>
#include <vector>

namespace shardnet::oci {

// The runtime's --root (crun's global option: "--root=DIR" or "--root DIR")
// in ARGS; "" when none.
std::string state_root_arg(const std::vector<std::string> &args);

// DIR (PARENT/USER) made safe to hand to USER's runtime: PARENT made (0755)
// when missing and CREATE; refused unless it is a directory (no symlink) of
// root's that group and others cannot write; DIR made (0700, then given to
// UID:GID) when missing and CREATE; refused unless it is a directory (no
// symlink) of UID's, not writable by group or others, named USER. "" or why
// not, in words for the job's stderr / the node's log.
std::string prepare_state_dir(const std::string &dir, const std::string &user, uid_t uid, gid_t gid, bool create);

}  // namespace shardnet::oci
