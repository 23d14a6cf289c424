#include "hwloc-probe/slurm_geometry.hpp"

#include <hwloc.h>

namespace shardnet::probe {

namespace {

// xcpuinfo.c's _core_child_count: Cores among the normal children, recursively.
unsigned core_child_count(hwloc_obj_t obj) {
    if (obj->type == HWLOC_OBJ_CORE) return 1;
    unsigned n = 0;
    for (unsigned i = 0; i < obj->arity; ++i) n += core_child_count(obj->children[i]);
    return n;
}

}  // namespace

std::string slurm_geometry(const std::string &xml, SlurmGeometry &out) {
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0) return "hwloc_topology_init failed";
    hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);  // slurmd's WHOLE_SYSTEM
    for (auto t : {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE, HWLOC_OBJ_MISC})
        hwloc_topology_set_type_filter(topo, t, HWLOC_TYPE_FILTER_KEEP_NONE);
    if ((!xml.empty() && hwloc_topology_set_xml(topo, xml.c_str()) != 0) || hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return "hwloc could not load the topology as slurmd does";
    }
    unsigned boards = 1;
    hwloc_obj_t first = hwloc_get_next_child(topo, hwloc_get_root_obj(topo), nullptr);
    if (first && first->type == HWLOC_OBJ_GROUP) {
        const int n = hwloc_get_nbobjs_by_depth(topo, unsigned(first->depth));
        boards = n > 1 ? unsigned(n) : 1;
    }
    unsigned sockets = 0;
    const int depth = hwloc_get_type_depth(topo, HWLOC_OBJ_PACKAGE);
    const int per_depth = hwloc_get_nbobjs_by_depth(topo, unsigned(depth));
    for (int i = 0; i < per_depth; ++i) {
        hwloc_obj_t obj = hwloc_get_obj_by_depth(topo, unsigned(depth), unsigned(i));
        if (obj && obj->type == HWLOC_OBJ_PACKAGE && core_child_count(obj) > 0) ++sockets;
    }
    if (sockets == 0) {
        const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
        sockets = n > 0 ? unsigned(n) : 1;
    }
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (cores <= 0) cores = 1;
    const int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_topology_destroy(topo);
    out.cpus = pus > 0 ? unsigned(pus) : 0;
    out.boards = boards;
    out.threads_per_core = out.cpus / unsigned(cores);
    out.cores_per_socket = unsigned(cores) / sockets;
    out.sockets_per_board = sockets / boards;
    return "";
}

}  // namespace shardnet::probe
