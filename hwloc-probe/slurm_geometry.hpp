// The CPU geometry Slurm's slurmd reads from hwloc, so that --slurm-node's
// CPUs/Boards/SocketsPerBoard/CoresPerSocket/ThreadsPerCore are what
// `slurmd -C` prints and slurmd then finds on the node.
#pragma once
#include <string>

namespace shardnet::probe {

struct SlurmGeometry {
    unsigned cpus = 0, boards = 1, sockets_per_board = 0, cores_per_socket = 0, threads_per_core = 0;
};

// Loads the topology (XML, or this machine when "") the way slurmd 22.05
// does (src/slurmd/common/xcpuinfo.c, xcpuinfo_hwloc_topo_load: whole
// system, L1/L2/L4/L5 caches and Misc filtered out, L3 kept) and counts as
// xcpuinfo_hwloc_topo_get does without SlurmdParameters:
//  - Boards: when the root's first child is a Group, the number of objects
//    at that Group's depth, else 1;
//  - Sockets: the Packages with at least one Core below them (all Packages,
//    at least 1, when none has);
//  - ThreadsPerCore = PUs / Cores and CoresPerSocket = Cores / Sockets,
//    both with integer division (Cores counted as 1 when there are none);
//  - SocketsPerBoard = Sockets / Boards, as slurmd -C prints it.
// Returns "" or a reason.
std::string slurm_geometry(const std::string &xml, SlurmGeometry &out);

}  // namespace shardnet::probe
