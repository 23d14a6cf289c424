// A Slurm hostlist's handle, whichever way the installed slurm.h declares
// it: hostlist_t is a pointer in older Slurm (22.05) and the struct itself
// in newer (24.11), where slurm_hostlist_* take and return hostlist_t *.
// configure decides by compiling against the headers (doc/slurm-versions.md).
#pragma once

extern "C" {
#include <slurm/slurm.h>
}

namespace shardnet {
#ifdef SHARDNET_HOSTLIST_T_IS_STRUCT
using hostlist_handle = hostlist_t *;
#else
using hostlist_handle = hostlist_t;
#endif
}  // namespace shardnet
