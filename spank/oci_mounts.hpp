// Mount points made in a shared rootfs before the runtime starts
// (shardnet-oci-run). The rootfs of a digest is shared by every job, node
// and task that runs it (one unpack per digest; a shared home is one cache
// for all nodes): two tasks starting at once both have the runtime make
// /proc, the working dir, ... in it, and one of them fails ("mkdir `proc`:
// File exists", crun 1.8). Made beforehand, where a rival's EEXIST is no
// error, the runtime finds them there.
#pragma once
#include <string>
#include <vector>

namespace shardnet::oci {

// The mount destinations of a task's bundle CONFIG (config.json) that the
// runtime would make in the rootfs itself: each, relative, that no earlier
// mount covers (below a tmpfs, a proc or a bind, the runtime makes it in
// that mount, not in the shared rootfs). ROOTFS: root.path. None (and
// ROOTFS "") when CONFIG names no absolute root.path. Left out: a
// destination with a ".." component (the runtime refuses it) and a bind
// whose source is no directory (a file's mount point is a file).
std::vector<std::string> mount_points(const std::string &config, std::string &rootfs);

// Makes each of DIRS (relative) below ROOTFS, its parents first, never
// following a symlink (a component that is one, or no directory, ends that
// dir: the runtime says what is wrong). Another's mkdir of the same dir at
// the same time is no error. The dirs it could not make, with the reason;
// none when all are there.
std::vector<std::string> make_mount_points(const std::string &rootfs, const std::vector<std::string> &dirs);

}  // namespace shardnet::oci
