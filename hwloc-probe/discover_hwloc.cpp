#include <algorithm>
#include <cerrno>
#include <tuple>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <hwloc.h>
#include <memory>
#include <sys/stat.h>

#include "hwloc-probe/accel_class.hpp"
#include "hwloc-probe/discover.hpp"
#include "hwloc-probe/xml_version.hpp"

namespace shardnet::probe {

namespace {

struct TopoDeleter { void operator()(hwloc_topology *t) const { hwloc_topology_destroy(t); } };
using Topo = std::unique_ptr<hwloc_topology, TopoDeleter>;

std::string bitmap_list(hwloc_const_bitmap_t b) {
    if (!b) return "";
    char *s = nullptr;
    hwloc_bitmap_list_asprintf(&s, b);
    std::string out = s ? s : "";
    std::free(s);
    return out;
}

std::string hex4(unsigned v) { char b[8]; std::snprintf(b, sizeof b, "%04x", v & 0xffff); return b; }

std::string pci_bus(const hwloc_obj_t pci) {
    char b[16];
    std::snprintf(b, sizeof b, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                  pci->attr->pcidev.dev, pci->attr->pcidev.func);
    return b;
}

const char *info(hwloc_obj_t o, const char *name) {
    const char *v = hwloc_obj_get_info_by_name(o, name);
    return v ? v : "";
}

// Nearest NUMA node, CPUs and cores of an I/O object, from its non-I/O ancestor.
void locality(hwloc_topology_t topo, hwloc_obj_t io, std::optional<int> &numa, std::string &cpus,
              std::string *cores = nullptr) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, io);
    if (!anc) return;
    cpus = bitmap_list(anc->cpuset);
    if (cores) {
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        for (hwloc_obj_t c = nullptr; (c = hwloc_get_next_obj_inside_cpuset_by_type(topo, anc->cpuset, HWLOC_OBJ_CORE, c));)
            hwloc_bitmap_set(set, c->logical_index);
        *cores = bitmap_list(set);
        hwloc_bitmap_free(set);
    }
    if (anc->nodeset && !hwloc_bitmap_iszero(anc->nodeset) && hwloc_bitmap_weight(anc->nodeset) == 1)
        numa = hwloc_bitmap_first(anc->nodeset);
}

std::string check_xml_file(const std::string &xml) {
    struct stat st;
    if (::stat(xml.c_str(), &st) != 0) return "cannot read topology '" + xml + "': " + std::strerror(errno);
    if (!S_ISREG(st.st_mode)) return "topology '" + xml + "' is not a regular file";
    if (st.st_size == 0) return "topology '" + xml + "' is empty";
    return "";
}

// An OS device of a compute stack: CUDA, OpenCL, Level Zero (hwloc's
// co-processor type) or NVML, RSMI, Level Zero GPU devices. A DRM card0 or
// renderD128 (what a management VGA also has) is not one.
bool has_compute_osdev(hwloc_obj_t pci) {
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC) return true;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU && c->name &&
            (std::strncmp(c->name, "nvml", 4) == 0 || std::strncmp(c->name, "rsmi", 4) == 0))
            return true;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU && c->subtype)
            for (const char *s : {"NVML", "RSMI", "LevelZero", "CUDA", "OpenCL"})
                if (std::strcmp(c->subtype, s) == 0) return true;
    }
    return false;
}

// Live (OS devices are not discovered): the driver bound to the function.
bool has_compute_driver(const std::string &bus) {
    const std::string d = pci_driver(bus);
    return d == "nvidia" || d == "amdgpu" || d == "i915" || d == "xe";
}

void add_pci_devices(hwloc_topology_t topo, NodeInfo &out, bool live) {
    for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(topo, pci));) {
        const auto &a = pci->attr->pcidev;
        if ((pci->subtype && std::strcmp(pci->subtype, "NVSwitch") == 0) || is_nvswitch_id(a.vendor_id, a.device_id)) {
            ++out.nvswitches;
            continue;
        }
        const bool display = a.class_id == 0x0300 || a.class_id == 0x0380;
        if (!is_accelerator(a.class_id, display && (live ? has_compute_driver(pci_bus(pci)) : has_compute_osdev(pci))))
            continue;
        Accelerator acc;
        acc.vendor = vendor_name(a.vendor_id);
        acc.pci_id = hex4(a.vendor_id) + ":" + hex4(a.device_id);
        acc.pci_bus = pci_bus(pci);
        // A GPU's name comes from its OS device (NVML, RSMI, OpenCL...) when
        // hwloc had that backend, else from the PCI database.
        for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
            if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
            if (!*info(c, "GPUModel") && acc.model.empty()) continue;
            if (*info(c, "GPUModel")) acc.model = info(c, "GPUModel");
            if (*info(c, "NVIDIAUUID")) acc.uuid = info(c, "NVIDIAUUID");
            if (*info(c, "AMDUUID")) acc.uuid = info(c, "AMDUUID");
            if (*info(c, "XGMIHiveID") && std::strcmp(info(c, "XGMIHiveID"), "0") != 0) acc.xgmi_hive = info(c, "XGMIHiveID");
        }
        if (acc.model.empty()) acc.model = info(pci, "PCIDevice");
        locality(topo, pci, acc.numa, acc.cpus, &acc.cores);
        acc.cls = classify_accelerator(a.vendor_id, a.device_id, acc.model, acc.memory_bytes);
        out.accelerators.push_back(std::move(acc));
    }
}

// NVLink as hwloc's NVML backend records it: a matrix of bandwidths
// between GPU OS devices (and, on POWER, CPU packages). Each accelerator
// counts the GPUs and NVSwitches it has bandwidth to, itself excepted.
void add_nvlink_distances(hwloc_topology_t topo, NodeInfo &out) {
    unsigned nr = 1;
    hwloc_distances_s *d = nullptr;
    if (hwloc_distances_get_by_name(topo, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0 || !d) return;
    for (unsigned i = 0; i < d->nbobjs; ++i) {
        hwloc_obj_t o = d->objs[i];
        if (!o || o->type != HWLOC_OBJ_OS_DEVICE || !o->parent || o->parent->type != HWLOC_OBJ_PCI_DEVICE) continue;
        const std::string bus = pci_bus(o->parent);
        // GPUs and NVSwitches (I/O objects) only: an NVLink to a CPU
        // package (POWER) is not a GPU interconnect.
        int peers = 0;
        for (unsigned j = 0; j < d->nbobjs; ++j) {
            const hwloc_obj_t p = d->objs[j];
            peers += j != i && d->values[i * d->nbobjs + j] > 0 && p &&
                     (p->type == HWLOC_OBJ_OS_DEVICE || p->type == HWLOC_OBJ_PCI_DEVICE);
        }
        for (auto &a : out.accelerators)
            if (a.pci_bus == bus) a.nvlink_peers = std::max(a.nvlink_peers.value_or(0), peers);
    }
    hwloc_distances_release(topo, d);
}

// A NIC's OS devices as a saved topology records them.
PciOsdevs osdevs_in_topology(hwloc_obj_t pci, std::vector<NicPort> &ports, NicEvidence &ev) {
    PciOsdevs o;
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
            o.ofed = c->name;
            for (unsigned port = 1; port <= 8; ++port) {
                std::string key = "Port" + std::to_string(port) + "State";
                const char *st = hwloc_obj_get_info_by_name(c, key.c_str());
                if (!st) continue;
                NicEvidence::Port ep;
                const std::string lid_key = "Port" + std::to_string(port) + "LID";
                if (const char *lid = hwloc_obj_get_info_by_name(c, lid_key.c_str()))
                    ep.lid = unsigned(std::strtoul(lid, nullptr, 0));  // "0x12a"
                ev.ports.push_back(ep);
                // hwloc keeps the sysfs state number: 4 is ACTIVE.
                ports.push_back({port, std::string(st) == "4" ? "ACTIVE" : "state " + std::string(st), {}});
            }
        } else if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) {
            o.netdevs.push_back(c->name);
            ev.netdevs.push_back(link_type_of_address(info(c, "Address")));
        }
    }
    return o;
}

void add_nics(hwloc_topology_t topo, NodeInfo &out, const OsdevMap *live) {
    for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(topo, pci));) {
        const auto &a = pci->attr->pcidev;
        const uint16_t base = a.class_id >> 8;
        if (base != 0x02 && a.class_id != 0x0c06) continue;  // network controllers, InfiniBand
        Nic nic;
        nic.pci_id = hex4(a.vendor_id) + ":" + hex4(a.device_id);
        nic.pci_bus = pci_bus(pci);
        PciOsdevs devs;
        NicEvidence ev;
        if (!live) {
            devs = osdevs_in_topology(pci, nic.ports, ev);
        } else if (auto it = live->find(nic.pci_bus); it != live->end()) {
            devs = it->second;  // port states and rates: discover_ib_sysfs
            for (size_t i = 0; i < devs.ports.size(); ++i) {
                nic.ports.push_back({devs.ports[i], "", {}});
                NicEvidence::Port ep;
                if (i < devs.port_link_layers.size()) ep.link_layer = devs.port_link_layers[i];
                ev.ports.push_back(ep);
            }
            ev.netdevs = devs.netdev_types;
        }
        nic.netdevs = devs.netdevs;
        ev.ofed = devs.ofed;
        if (devs.ofed.empty() && nic.netdevs.empty()) continue;  // a NIC no driver claimed: nothing to place traffic on
        // One HCA can be InfiniBand or Ethernet (RoCE) per port, whatever
        // its PCI class says: the kind comes from the ports and netdevs.
        nic.name = devs.ofed.empty() ? nic.netdevs.front() : devs.ofed;
        nic.kind = nic_kind(ev);
        locality(topo, pci, nic.numa, nic.cpus);
        out.nics.push_back(std::move(nic));
    }
}

}  // namespace

std::string discover_hwloc(const std::string &xml, NodeInfo &out) {
    if (!xml.empty())
        if (auto err = check_xml_file(xml); !err.empty()) return err;
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) return "hwloc_topology_init failed";
    Topo topo(raw);
    hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    // Caches are not part of the descriptor, but a cache that splits a
    // package can hold NUMA nodes (Opteron 6200, EPYC with L3-as-NUMA):
    // filtering it out would move them up to the package and give each the
    // package's cpuset. Keep the caches that bring structure only.
    hwloc_topology_set_cache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_STRUCTURE);
    hwloc_topology_set_icache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
    // On this machine, NICs are named from sysfs (discover_sysfs_osdevs):
    // hwloc's OS-device pass also resolves every block device through udev.
    if (xml.empty()) hwloc_topology_set_type_filter(raw, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
    // A saved topology keeps every PCI device it has: an NVSwitch (class
    // 0680, "other bridge") is one hwloc drops as unimportant when no
    // backend gave it a subtype.
    if (!xml.empty()) hwloc_topology_set_type_filter(raw, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
    // hwloc's x86 (CPUID) pass only annotates what Linux's sysfs and
    // /proc/cpuinfo already gave (vendor, model), and to run CPUID on each
    // CPU it moves this thread onto every one of them in turn.
    if (xml.empty()) hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
    // Nor are memory attributes or CPU kinds: skip reading them. Distances
    // only from a saved topology, where they may record NVLink (the live
    // probe asks NVML).
    hwloc_topology_set_flags(raw, (xml.empty() ? HWLOC_TOPOLOGY_FLAG_NO_DISTANCES : 0) | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS |
                                      HWLOC_TOPOLOGY_FLAG_NO_CPUKINDS);
    if (!xml.empty()) {
        if (hwloc_topology_set_xml(raw, xml.c_str()) != 0)
            return "topology '" + xml + "' is not a readable hwloc XML file: " + std::strerror(errno);
    }
    if (hwloc_topology_load(raw) != 0) {
        if (xml.empty()) return std::string("hwloc could not load this machine's topology: ") + std::strerror(errno);
        // hwloc 2.x refuses a newer format (topology-xml.c: "cannot import
        // XML version X.Y > 2"): that needs a newer hwloc, it is not corrupt.
        if (auto v = xml_format_version(xml); v && v->major > kMaxXmlMajor) {
            return "topology '" + xml + "' is in hwloc XML format " + std::to_string(v->major) + "." +
                   std::to_string(v->minor) + ", which needs hwloc " + std::to_string(v->major) +
                   ".x or later to read; this probe was built with hwloc " HWLOC_VERSION
                   " (hwloc 3's `lstopo --of v2xml` writes format 2.0)";
        }
        return "topology '" + xml + "' is corrupt or truncated (hwloc could not load it)";
    }
    hwloc_obj_t root = hwloc_get_root_obj(raw);
    out.host = info(root, "HostName");
    out.arch = info(root, "Architecture");
    out.packages = unsigned(std::max(0, hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE)));
    out.cores = unsigned(std::max(0, hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE)));
    out.pus = unsigned(std::max(0, hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU)));
    if (out.pus == 0) return "topology has no processing units: " + (xml.empty() ? std::string("this machine") : xml);
    if (hwloc_obj_t pkg = hwloc_get_obj_by_type(raw, HWLOC_OBJ_PACKAGE, 0)) out.cpu_model = info(pkg, "CPUModel");
    for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(raw, HWLOC_OBJ_NUMANODE, n));) {
        NumaNode nn;
        nn.index = n->os_index;
        if (n->attr->numanode.local_memory) nn.memory_bytes = n->attr->numanode.local_memory;
        nn.cpus = bitmap_list(n->cpuset);
        out.numa.push_back(nn);
    }
    if (root->total_memory) {
        out.hwloc_memory_bytes = root->total_memory;
        out.memory_bytes = root->total_memory;
        out.memory_source = "hwloc";
    }
    add_pci_devices(raw, out, xml.empty());
    if (!xml.empty()) add_nvlink_distances(raw, out);
    if (xml.empty()) {
        const OsdevMap live = discover_sysfs_osdevs();
        add_nics(raw, out, &live);
    } else {
        add_nics(raw, out, nullptr);
    }
    // PCI bus order: the order NVIDIA numbers /dev/nvidiaN and Slurm's gres.conf expects.
    std::sort(out.accelerators.begin(), out.accelerators.end(),
              [](const Accelerator &a, const Accelerator &b) { return a.pci_bus < b.pci_bus; });
    std::sort(out.nics.begin(), out.nics.end(), [](const Nic &a, const Nic &b) {
        return std::tie(a.pci_bus, a.name) < std::tie(b.pci_bus, b.name);
    });
    char ver[32];
    unsigned v = hwloc_get_api_version();
    std::snprintf(ver, sizeof ver, "%u.%u.%u", v >> 16, (v >> 8) & 0xff, v & 0xff);
    if (xml.empty()) out.hwloc_version = ver;
    return "";
}

}  // namespace shardnet::probe
