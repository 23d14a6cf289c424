// Sources that only make sense on the machine itself.
#include <algorithm>
#include <cstring>
#include <tuple>
#include <dirent.h>
#include <dlfcn.h>
#include <fstream>
#include <sstream>
#include <uct/api/uct.h>
#include <ucp/api/ucp.h>

#include "discover.hpp"

namespace shardnet::probe {

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

void discover_ib_sysfs(NodeInfo &out) {
    for (auto &nic : out.nics) {
        if (nic.kind == "ethernet") continue;
        for (auto &p : nic.ports) {
            std::string base = "/sys/class/infiniband/" + nic.name + "/ports/" + std::to_string(p.port) + "/";
            std::ifstream rate(base + "rate"), state(base + "state"), link(base + "link_layer");
            double gbps;
            if (rate >> gbps) p.rate_gbps = gbps;  // "100 Gb/sec (4X EDR)"
            std::string n, s;
            if (state >> n >> s) p.state = s;      // "4: ACTIVE"
            std::string layer;
            if (link >> layer && layer == "Ethernet") nic.kind = "roce";
        }
    }
}

void discover_ucx(NodeInfo &out) {
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    out.ucx_version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
    uct_component_h *comps = nullptr;
    unsigned ncomps = 0;
    if (uct_query_components(&comps, &ncomps) != UCS_OK) return;
    std::vector<UcxResource> res;
    for (unsigned i = 0; i < ncomps; ++i) {
        uct_component_attr_t attr{};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        if (uct_component_query(comps[i], &attr) != UCS_OK) continue;
        std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = mds.data();
        if (uct_component_query(comps[i], &attr) != UCS_OK) continue;
        for (const auto &md_desc : mds) {
            uct_md_config_t *cfg = nullptr;
            if (uct_md_config_read(comps[i], nullptr, nullptr, &cfg) != UCS_OK) continue;
            uct_md_h md = nullptr;
            ucs_status_t st = uct_md_open(comps[i], md_desc.md_name, cfg, &md);
            uct_config_release(cfg);
            if (st != UCS_OK) continue;  // one failing device degrades the list, nothing more
            uct_tl_resource_desc_t *tls = nullptr;
            unsigned ntls = 0;
            if (uct_md_query_tl_resources(md, &tls, &ntls) == UCS_OK) {
                for (unsigned t = 0; t < ntls; ++t) res.push_back({tls[t].tl_name, tls[t].dev_name});
                uct_release_tl_resource_list(tls);
            }
            uct_md_close(md);
        }
    }
    uct_release_component_list(comps);
    std::sort(res.begin(), res.end(), [](const UcxResource &a, const UcxResource &b) {
        return std::tie(a.transport, a.device) < std::tie(b.transport, b.device);
    });
    out.ucx = std::move(res);
}

namespace {
// The NVML entry points we use, loaded at run time: the probe runs on
// nodes without a driver too.
struct Nvml {
    void *lib = nullptr;
    int (*init)() = nullptr;
    int (*shutdown)() = nullptr;
    int (*count)(unsigned *) = nullptr;
    int (*by_bus)(const char *, void **) = nullptr;
    int (*name)(void *, char *, unsigned) = nullptr;
    int (*memory)(void *, void *) = nullptr;
    int (*driver)(char *, unsigned) = nullptr;
    int (*cuda)(int *) = nullptr;
    int (*nvlink_state)(void *, unsigned, int *) = nullptr;
    template <typename F> bool load(F &f, const char *sym) { f = reinterpret_cast<F>(dlsym(lib, sym)); return f; }
};
struct NvmlMemory { unsigned long long total, free, used; };
}  // namespace

void discover_nvml(NodeInfo &out) {
    Nvml n;
    n.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n.lib) return;  // no driver: GPUs keep what hwloc said
    bool ok = n.load(n.init, "nvmlInit_v2") && n.load(n.shutdown, "nvmlShutdown") &&
              n.load(n.by_bus, "nvmlDeviceGetHandleByPciBusId_v2") && n.load(n.name, "nvmlDeviceGetName") &&
              n.load(n.memory, "nvmlDeviceGetMemoryInfo") && n.load(n.driver, "nvmlSystemGetDriverVersion") &&
              n.load(n.cuda, "nvmlSystemGetCudaDriverVersion_v2");
    n.load(n.nvlink_state, "nvmlDeviceGetNvLinkState");
    if (!ok || n.init() != 0) { dlclose(n.lib); return; }
    char buf[96];
    if (n.driver(buf, sizeof buf) == 0) out.nvidia_driver = buf;
    int cuda = 0;
    if (n.cuda(&cuda) == 0) out.cuda_driver = std::to_string(cuda / 1000) + "." + std::to_string(cuda % 1000 / 10);
    for (auto &acc : out.accelerators) {
        if (acc.vendor != "nvidia") continue;
        void *dev = nullptr;
        if (n.by_bus(acc.pci_bus.c_str(), &dev) != 0) continue;
        if (n.name(dev, buf, sizeof buf) == 0) acc.model = buf;
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
    dlclose(n.lib);
}

}  // namespace shardnet::probe
