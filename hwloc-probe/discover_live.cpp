// Sources that only make sense on the machine itself.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <dirent.h>
#include <unistd.h>
#include <fstream>
#include <sstream>
#include <uct/api/uct.h>
#include <ucp/api/ucp.h>

#include "hwloc-probe/accel_class.hpp"
#include "hwloc-probe/discover.hpp"
#include "common/dl_library.hpp"

namespace shardnet::probe {

namespace {
std::string first_line_of(const std::string &path) {
    std::ifstream f(path);
    std::string v;
    std::getline(f, v);
    return v;
}
}  // namespace

void discover_meminfo(NodeInfo &out) {
    // slurmd sizes RealMemory from the kernel, and in containers hwloc can
    // see less: Slurm's lines must match what slurmd will report.
    std::ifstream f("/proc/meminfo");
    std::string key;
    uint64_t kb = 0;
    std::string unit;
    while (f >> key >> kb >> unit)
        if (key == "MemTotal:") {
            out.memory_bytes = kb * 1024;
            out.memory_source = "meminfo";
            return;
        }
}

namespace {

// The last PCI bus id ("0000:3b:00.0") in a sysfs device path, or "" for a
// virtual device (lo, bridges, veth).
std::string pci_bus_in(const std::string &path) {
    std::string found;
    size_t start = 0;
    while (start < path.size()) {
        size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        std::string part = path.substr(start, end - start);
        unsigned dom, bus, dev, fn;
        char tail;
        if (part.size() >= 12 && std::sscanf(part.c_str(), "%x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) == 4)
            found = part;
        start = end + 1;
    }
    return found;
}

// Each entry of DIR with the PCI function its link leads to.
template <class F> void each_pci_link(const std::string &dir, F &&f) {
    DIR *d = opendir(dir.c_str());
    if (!d) return;
    while (dirent *e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        char target[512];
        ssize_t n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = '\0';
        if (auto bus = pci_bus_in(target); !bus.empty()) f(bus, std::string(e->d_name));
    }
    closedir(d);
}

}  // namespace

OsdevMap discover_sysfs_osdevs(const std::string &sysfs) {
    OsdevMap out;
    each_pci_link(sysfs + "/class/net", [&](const std::string &bus, const std::string &name) {
        out[bus].netdevs.push_back(name);
    });
    each_pci_link(sysfs + "/class/infiniband", [&](const std::string &bus, const std::string &name) {
        auto &o = out[bus];
        if (!o.ofed.empty() && o.ofed < name) return;  // one HCA per function; keep the first by name
        o.ofed = name;
        o.ports.clear();
        if (DIR *d = opendir((sysfs + "/class/infiniband/" + name + "/ports").c_str())) {
            while (dirent *e = readdir(d))
                if (unsigned p = unsigned(std::strtoul(e->d_name, nullptr, 10)); p > 0) o.ports.push_back(p);
            closedir(d);
        }
        std::sort(o.ports.begin(), o.ports.end());
    });
    auto first_line = first_line_of;
    for (auto &[bus, o] : out) {
        std::sort(o.netdevs.begin(), o.netdevs.end());
        for (const auto &nd : o.netdevs) {
            // ARPHRD_ETHER 1, ARPHRD_INFINIBAND 32 (linux/if_arp.h)
            const std::string t = first_line(sysfs + "/class/net/" + nd + "/type");
            o.netdev_types.push_back(t == "1" ? LinkType::ethernet : t == "32" ? LinkType::infiniband : LinkType::unknown);
        }
        for (unsigned p : o.ports) {
            const std::string l = first_line(sysfs + "/class/infiniband/" + o.ofed + "/ports/" + std::to_string(p) + "/link_layer");
            o.port_link_layers.push_back(l == "InfiniBand" ? LinkType::infiniband
                                         : l == "Ethernet" ? LinkType::ethernet : LinkType::unknown);
        }
    }
    return out;
}

std::string pci_driver(const std::string &bus, const std::string &sysfs) {
    char target[4096];
    const ssize_t n = readlink((sysfs + "/bus/pci/devices/" + bus + "/driver").c_str(), target, sizeof target - 1);
    if (n <= 0) return "";
    target[n] = '\0';
    const char *slash = std::strrchr(target, '/');
    return slash ? slash + 1 : target;
}

void discover_nvswitch_sysfs(NodeInfo &out, const std::string &sysfs) {
    if (out.nvswitches > 0 || std::none_of(out.accelerators.begin(), out.accelerators.end(),
                                           [](const Accelerator &a) { return a.vendor == "nvidia"; }))
        return;
    const std::string dir = sysfs + "/bus/pci/devices";
    DIR *d = opendir(dir.c_str());
    if (!d) return;
    while (dirent *e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string base = dir + "/" + e->d_name;
        const unsigned long vendor = std::strtoul(first_line_of(base + "/vendor").c_str(), nullptr, 16);
        if (vendor != 0x10de) continue;
        const unsigned long device = std::strtoul(first_line_of(base + "/device").c_str(), nullptr, 16);
        if (is_nvswitch_id(uint16_t(vendor), uint16_t(device))) ++out.nvswitches;
    }
    closedir(d);
}

void discover_amdgpu_sysfs(NodeInfo &out, const std::string &sysfs) {
    auto line = [](const std::string &path) {
        std::ifstream f(path);
        std::string v;
        std::getline(f, v);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\n')) v.pop_back();
        return v;
    };
    for (auto &acc : out.accelerators) {
        if (acc.vendor != "amd") continue;
        const std::string dev = sysfs + "/bus/pci/devices/" + acc.pci_bus + "/";
        if (auto name = line(dev + "product_name"); !name.empty()) acc.model = name;
        if (auto id = line(dev + "unique_id"); !id.empty()) acc.uuid = id;
        if (auto vram = line(dev + "mem_info_vram_total"); !vram.empty()) {
            char *end = nullptr;
            unsigned long long bytes = std::strtoull(vram.c_str(), &end, 10);
            if (end && *end == '\0' && bytes > 0) acc.memory_bytes = bytes;
        }
        if (auto hive = line(dev + "xgmi_hive_info/xgmi_hive_id"); !hive.empty() && hive != "0") acc.xgmi_hive = hive;
    }
}

void discover_ib_sysfs(NodeInfo &out) {
    for (auto &nic : out.nics) {
        if (nic.kind == "ethernet") continue;
        for (auto &p : nic.ports) {
            std::string base = "/sys/class/infiniband/" + nic.name + "/ports/" + std::to_string(p.port) + "/";
            std::ifstream rate(base + "rate"), state(base + "state");  // link layer: nic_kind
            double gbps;
            if (rate >> gbps) p.rate_gbps = gbps;  // "100 Gb/sec (4X EDR)"
            std::string n, s;
            if (state >> n >> s) p.state = s;      // "4: ACTIVE"
        }
    }
}

namespace {

// UCX is loaded when asked for (its libraries' constructors alone cost
// ~1.5 ms), so that the probe can do it beside hwloc's discovery.
struct Ucx {
    DlLibrary lib{"libucp.so.0"};
    void (*get_version)(unsigned *, unsigned *, unsigned *);
    ucs_status_t (*query_components)(uct_component_h **, unsigned *);
    void (*release_component_list)(uct_component_h *);
    ucs_status_t (*component_query)(uct_component_h, uct_component_attr_t *);
    ucs_status_t (*md_config_read)(uct_component_h, const char *, const char *, uct_md_config_t **);
    void (*config_release)(void *);
    ucs_status_t (*md_open)(uct_component_h, const char *, const uct_md_config_t *, uct_md_h *);
    void (*md_close)(uct_md_h);
    ucs_status_t (*query_tl_resources)(uct_md_h, uct_tl_resource_desc_t **, unsigned *);
    void (*release_tl_resource_list)(uct_tl_resource_desc_t *);
    bool load() {
        lib.sym(get_version, "ucp_get_version").sym(query_components, "uct_query_components")
            .sym(release_component_list, "uct_release_component_list").sym(component_query, "uct_component_query")
            .sym(md_config_read, "uct_md_config_read").sym(config_release, "uct_config_release")
            .sym(md_open, "uct_md_open").sym(md_close, "uct_md_close")
            .sym(query_tl_resources, "uct_md_query_tl_resources")
            .sym(release_tl_resource_list, "uct_release_tl_resource_list");
        return lib.complete();
    }
};

}  // namespace

void ucx_skip_absent_modules() {
    // UCX loads its InfiniBand and RDMA-CM modules (with libibverbs, the
    // provider drivers and libnl) on every node; without a verbs device they
    // find nothing, and loading them costs ~0.7 ms per probe. A site's own
    // UCX_MODULES is kept as it is.
    if (std::getenv("UCX_MODULES")) return;
    if (DIR *d = opendir("/sys/class/infiniband")) {
        bool any = false;
        while (dirent *e = readdir(d))
            if (e->d_name[0] != '.') { any = true; break; }
        closedir(d);
        if (any) return;
    }
    setenv("UCX_MODULES", "^ib,rdmacm", 0);
}

void discover_ucx(NodeInfo &out) {
    Ucx u;
    if (!u.load()) return;  // no UCX on this node: the field stays absent
    unsigned major, minor, release;
    u.get_version(&major, &minor, &release);
    out.ucx_version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
    uct_component_h *comps = nullptr;
    unsigned ncomps = 0;
    if (u.query_components(&comps, &ncomps) != UCS_OK) return;
    std::vector<UcxResource> res;
    for (unsigned i = 0; i < ncomps; ++i) {
        uct_component_attr_t attr{};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        if (u.component_query(comps[i], &attr) != UCS_OK) continue;
        std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = mds.data();
        if (u.component_query(comps[i], &attr) != UCS_OK) continue;
        for (const auto &md_desc : mds) {
            uct_md_config_t *cfg = nullptr;
            if (u.md_config_read(comps[i], nullptr, nullptr, &cfg) != UCS_OK) continue;
            uct_md_h md = nullptr;
            ucs_status_t st = u.md_open(comps[i], md_desc.md_name, cfg, &md);
            u.config_release(cfg);
            if (st != UCS_OK) continue;  // one failing device degrades the list, nothing more
            uct_tl_resource_desc_t *tls = nullptr;
            unsigned ntls = 0;
            if (u.query_tl_resources(md, &tls, &ntls) == UCS_OK) {
                for (unsigned t = 0; t < ntls; ++t) res.push_back({tls[t].tl_name, tls[t].dev_name});
                u.release_tl_resource_list(tls);
            }
            u.md_close(md);
        }
    }
    u.release_component_list(comps);
    std::sort(res.begin(), res.end(), [](const UcxResource &a, const UcxResource &b) {
        return std::tie(a.transport, a.device) < std::tie(b.transport, b.device);
    });
    out.ucx = std::move(res);
}

namespace {
// NVML is loaded at run time: the probe runs on nodes without a driver too.
struct Nvml {
    DlLibrary lib{"libnvidia-ml.so.1"};
    int (*init)();
    int (*shutdown)();
    int (*by_bus)(const char *, void **);
    int (*name)(void *, char *, unsigned);
    int (*memory)(void *, void *);
    int (*driver)(char *, unsigned);
    int (*cuda)(int *);
    int (*nvlink_state)(void *, unsigned, int *);
    int (*uuid)(void *, char *, unsigned);
    bool load() {
        lib.sym(init, "nvmlInit_v2").sym(shutdown, "nvmlShutdown").sym(by_bus, "nvmlDeviceGetHandleByPciBusId_v2")
            .sym(name, "nvmlDeviceGetName").sym(memory, "nvmlDeviceGetMemoryInfo")
            .sym(driver, "nvmlSystemGetDriverVersion").sym(cuda, "nvmlSystemGetCudaDriverVersion_v2")
            .sym(uuid, "nvmlDeviceGetUUID");
        bool ok = lib.complete();
        lib.sym(nvlink_state, "nvmlDeviceGetNvLinkState");  // optional: older drivers
        return ok;
    }
};
struct NvmlMemory { unsigned long long total, free, used; };
}  // namespace

void discover_nvml(NodeInfo &out) {
    // Only NVIDIA devices have anything to ask NVML: elsewhere, do not search
    // the library path for a driver library that is not there.
    if (std::none_of(out.accelerators.begin(), out.accelerators.end(),
                     [](const Accelerator &a) { return a.vendor == "nvidia"; }))
        return;
    Nvml n;
    if (!n.load() || n.init() != 0) return;  // no driver: GPUs keep what hwloc said
    char buf[96];
    if (n.driver(buf, sizeof buf) == 0) out.nvidia_driver = buf;
    int cuda = 0;
    if (n.cuda(&cuda) == 0) out.cuda_driver = std::to_string(cuda / 1000) + "." + std::to_string(cuda % 1000 / 10);
    for (auto &acc : out.accelerators) {
        if (acc.vendor != "nvidia") continue;
        void *dev = nullptr;
        if (n.by_bus(acc.pci_bus.c_str(), &dev) != 0) continue;
        if (n.name(dev, buf, sizeof buf) == 0) acc.model = buf;
        if (n.uuid(dev, buf, sizeof buf) == 0) acc.uuid = buf;  // "GPU-…", as CUDA_VISIBLE_DEVICES accepts it
        NvmlMemory mem{};
        if (n.memory(dev, &mem) == 0) acc.memory_bytes = mem.total;
        if (n.nvlink_state) {
            int up = 0, total = 0, active = 0;
            for (unsigned l = 0; l < 18; ++l)
                if (n.nvlink_state(dev, l, &active) == 0) { ++total; up += active == 1; }
            if (total) { acc.nvlinks_total = total; acc.nvlinks_up = up; }
        }
    }
    n.shutdown();
}

}  // namespace shardnet::probe
