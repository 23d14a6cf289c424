#include "hwloc-probe/descriptor.hpp"
#include "common/digest.hpp"
#include "hwloc-probe/utf8.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

namespace shardnet::probe {

namespace json = boost::json;

namespace {

template <typename T>
json::value opt(const std::optional<T> &v) {
    return v ? json::value(*v) : json::value(nullptr);
}
json::value opt_str(const std::optional<std::string> &v) { return v ? json::value(*v) : json::value(nullptr); }
json::value str_or_null(const std::string &s) { return s.empty() ? json::value(nullptr) : json::value(s); }

std::string gpu_interconnect(const NodeInfo &n) {
    if (n.nvswitches > 0) return "NVSwitch";
    for (const auto &a : n.accelerators)
        if ((a.nvlinks_up && *a.nvlinks_up > 0) || (a.nvlink_peers && *a.nvlink_peers > 0)) return "NVLink";
    for (const auto &a : n.accelerators)
        if (!a.xgmi_hive.empty()) return "XGMI";
    return "";
}

// Every string as valid UTF-8: names and models come from the topology.
NodeInfo utf8_clean(NodeInfo n) {
    auto fix = [](std::string &s) { s = valid_utf8(s); };
    auto fix_opt = [&](std::optional<std::string> &s) { if (s) fix(*s); };
    fix(n.host); fix(n.arch); fix(n.cpu_model); fix(n.memory_source);
    for (auto &nn : n.numa) fix(nn.cpus);
    for (auto &a : n.accelerators)
        for (auto *s : {&a.vendor, &a.pci_id, &a.pci_bus, &a.model, &a.cls, &a.cpus, &a.cores, &a.uuid, &a.xgmi_hive}) fix(*s);
    for (auto &nic : n.nics) {
        for (auto *s : {&nic.name, &nic.kind, &nic.pci_id, &nic.pci_bus, &nic.cpus}) fix(*s);
        for (auto &d : nic.netdevs) fix(d);
        for (auto &p : nic.ports) fix(p.state);
    }
    if (n.ucx)
        for (auto &r : *n.ucx) { fix(r.transport); fix(r.device); }
    for (auto *s : {&n.nvidia_driver, &n.cuda_driver, &n.nccl, &n.hwloc_version, &n.ucx_version}) fix_opt(*s);
    if (n.containers)
        for (auto *s : {&n.containers->oci_conf, &n.containers->runtime, &n.containers->why}) fix(*s);
    return n;
}

std::map<std::string, int> class_counts(const NodeInfo &n) {
    std::map<std::string, int> c;
    for (const auto &a : n.accelerators) ++c[a.cls];
    return c;
}

}  // namespace

std::vector<std::string> fabric_summary(const NodeInfo &n) {
    std::vector<std::string> f;
    if (auto g = gpu_interconnect(n); !g.empty()) f.push_back(g);
    else if (!n.accelerators.empty()) f.push_back("PCIe-only");  // GPUs talk through the host
    std::set<std::string> kinds;
    for (const auto &nic : n.nics) kinds.insert(nic.kind);
    for (const auto &[kind, label] : {std::pair{"infiniband", "InfiniBand"}, {"omnipath", "OmniPath"},
                                      {"roce", "RoCE"}, {"ethernet", "Ethernet"}})
        if (kinds.count(kind)) f.push_back(label);
    return f;
}

json::object to_descriptor(const NodeInfo &raw, double probed_at) {
    const NodeInfo n = utf8_clean(raw);
    json::object d;
    d["schema"] = kSchema;
    d["host"] = str_or_null(n.host);
    json::array numa;
    for (const auto &nn : n.numa)
        numa.push_back(json::object{{"index", nn.index}, {"memory_bytes", opt(nn.memory_bytes)}, {"cpus", str_or_null(nn.cpus)}});
    d["cpu"] = json::object{{"arch", str_or_null(n.arch)}, {"model", str_or_null(n.cpu_model)},
                            {"packages", n.packages}, {"cores", n.cores}, {"pus", n.pus}, {"numa", std::move(numa)}};
    d["memory"] = json::object{{"total_bytes", opt(n.memory_bytes)}, {"source", str_or_null(n.memory_source)},
                               {"hwloc_bytes", opt(n.hwloc_memory_bytes)}};
    json::array accs;
    for (const auto &a : n.accelerators) {
        json::object o{{"vendor", a.vendor}, {"class", a.cls}, {"model", str_or_null(a.model)},
                       {"pci_id", a.pci_id}, {"pci_bus", a.pci_bus}, {"memory_bytes", opt(a.memory_bytes)},
                       {"numa", opt(a.numa)}, {"cpus", str_or_null(a.cpus)}, {"cores", str_or_null(a.cores)},
                       {"uuid", str_or_null(a.uuid)},
                       {"nvlinks_up", opt(a.nvlinks_up)}, {"nvlinks_total", opt(a.nvlinks_total)},
                       {"nvlink_peers", opt(a.nvlink_peers)},
                       {"xgmi_hive", str_or_null(a.xgmi_hive)}};
        accs.push_back(std::move(o));
    }
    d["accelerators"] = std::move(accs);
    json::array nics;
    for (const auto &nic : n.nics) {
        json::array ports, netdevs;
        for (const auto &p : nic.ports)
            ports.push_back(json::object{{"port", p.port}, {"state", p.state}, {"rate_gbps", opt(p.rate_gbps)}});
        for (const auto &nd : nic.netdevs) netdevs.push_back(json::value(nd));
        nics.push_back(json::object{{"name", nic.name}, {"kind", nic.kind}, {"pci_id", nic.pci_id},
                                    {"pci_bus", nic.pci_bus}, {"numa", opt(nic.numa)}, {"cpus", str_or_null(nic.cpus)},
                                    {"netdevs", std::move(netdevs)}, {"ports", std::move(ports)}});
    }
    d["nics"] = std::move(nics);
    json::array fabric;
    for (const auto &f : fabric_summary(n)) fabric.push_back(json::value(f));
    d["fabric"] = json::object{{"summary", std::move(fabric)}, {"nvswitches", n.nvswitches}};
    if (n.ucx) {
        json::array u;
        for (const auto &r : *n.ucx) u.push_back(json::object{{"transport", r.transport}, {"device", r.device}});
        d["ucx"] = std::move(u);
    } else {
        d["ucx"] = nullptr;
    }
    d["software"] = json::object{{"nvidia_driver", opt_str(n.nvidia_driver)}, {"cuda_driver", opt_str(n.cuda_driver)},
                                 {"nccl", opt_str(n.nccl)}, {"hwloc", opt_str(n.hwloc_version)},
                                 {"ucx", opt_str(n.ucx_version)}};
    if (n.containers) {
        json::object c{{"ready", n.containers->ready}};
        if (!n.containers->oci_conf.empty()) c["oci_conf"] = n.containers->oci_conf;
        if (!n.containers->runtime.empty()) c["runtime"] = n.containers->runtime;
        if (!n.containers->why.empty()) c["why"] = n.containers->why;
        d["containers"] = std::move(c);
    }
    d["hash"] = content_hash(d);
    d["probed_at"] = probed_at;
    return d;
}

std::string content_hash(const json::object &descriptor) {
    json::object stable = descriptor;
    stable.erase("hash");
    stable.erase("probed_at");
    stable.erase("bandwidth");
    // Why containers do not run names the path the probe looked at, which
    // depends on how it was started, not on the node.
    if (auto *c = stable.if_contains("containers"); c && c->is_object()) c->as_object().erase("why");
    const std::string text = json::serialize(stable);
    // Nettle: SHA-256 without OpenSSL's start-up cost (its library load and
    // config file alone were ~2 ms of a ~15 ms probe).
    return "sha256:" + sha256_hex(text);
}

std::string pretty(const NodeInfo &raw) {
    NodeInfo n = utf8_clean(raw);
    for (auto *t : {&n.host, &n.cpu_model}) *t = printable(*t);
    for (auto &a : n.accelerators) a.model = printable(a.model);
    for (auto &nic : n.nics) nic.name = printable(nic.name);
    std::string s;
    char line[512];
    auto gib = [](std::optional<uint64_t> b) { return b ? std::to_string(*b >> 30) + " GiB" : std::string("unknown"); };
    std::snprintf(line, sizeof line, "%s: %u package(s), %u cores, %u PUs, %zu NUMA node(s), memory %s (%s)\n",
                  n.host.empty() ? "(host unknown)" : n.host.c_str(), n.packages, n.cores, n.pus, n.numa.size(),
                  gib(n.memory_bytes).c_str(), n.memory_source.empty() ? "no source" : n.memory_source.c_str());
    s += line;
    for (const auto &[cls, count] : class_counts(n)) {
        std::snprintf(line, sizeof line, "  accelerators: %d x %s\n", count, cls.c_str());
        s += line;
    }
    for (const auto &a : n.accelerators) {
        std::snprintf(line, sizeof line, "    %s %s [%s] %s numa %s memory %s\n", a.pci_bus.c_str(), a.cls.c_str(),
                      a.pci_id.c_str(), a.model.empty() ? "(no name)" : a.model.c_str(),
                      a.numa ? std::to_string(*a.numa).c_str() : "?", gib(a.memory_bytes).c_str());
        s += line;
    }
    for (const auto &nic : n.nics) {
        std::snprintf(line, sizeof line, "  nic %s (%s) %s numa %s\n", nic.name.c_str(), nic.kind.c_str(),
                      nic.pci_bus.c_str(), nic.numa ? std::to_string(*nic.numa).c_str() : "?");
        s += line;
    }
    std::string f;
    for (const auto &x : fabric_summary(n)) f += (f.empty() ? "" : ", ") + x;
    s += "  fabric: " + f + "\n";
    if (n.ucx) s += "  ucx: " + std::to_string(n.ucx->size()) + " transport/device pairs\n";
    if (n.containers)
        s += n.containers->ready ? "  containers: " + printable(n.containers->runtime.empty() ? "(a shell command)" : n.containers->runtime) +
                                       " (" + printable(n.containers->oci_conf) + ")\n"
                                 : "  containers: none (" + printable(n.containers->why) + ")\n";
    return s;
}

std::string slurm_node_line(const NodeInfo &n) {
    std::string s = "NodeName=" + (n.host.empty() ? std::string("UNKNOWN") : n.host);
    // Slurm's own reading of the topology (see slurm_geometry.hpp): slurmd
    // marks a node whose configured geometry differs from it unusable.
    if (n.slurm) {
        const auto &g = *n.slurm;
        s += " CPUs=" + std::to_string(g.cpus) + " Boards=" + std::to_string(g.boards) +
             " SocketsPerBoard=" + std::to_string(g.sockets_per_board) +
             " CoresPerSocket=" + std::to_string(g.cores_per_socket) +
             " ThreadsPerCore=" + std::to_string(g.threads_per_core);
    } else {
        s += " CPUs=" + std::to_string(n.pus);
    }
    if (n.memory_bytes) s += " RealMemory=" + std::to_string(*n.memory_bytes >> 20);
    // An unknown device is a GPU without a type: Slurm must not be told a
    // class we could not establish.
    std::string gres;
    for (const auto &[cls, count] : class_counts(n))
        gres += (gres.empty() ? "" : ",") + std::string("gpu:") + (cls == "unknown" ? "" : cls + ":") + std::to_string(count);
    if (!gres.empty()) s += " Gres=" + gres;
    std::string feats;
    for (const auto &[cls, count] : class_counts(n))
        if (cls != "unknown") feats += (feats.empty() ? "" : ",") + cls;
    for (const auto &f : fabric_summary(n)) feats += (feats.empty() ? "" : ",") + f;
    if (!feats.empty()) s += " Features=" + feats;
    return s;
}

std::string gres_conf(const NodeInfo &n) {
    std::string s;
    std::map<std::string, unsigned> index_by_vendor;
    for (const auto &a : n.accelerators) {
        unsigned idx = index_by_vendor[a.vendor]++;
        // Gaudi: the kernel's compute-accelerator nodes (drivers/accel,
        // Linux 6.2+, where the habanalabs driver lives: /dev/accel/accelN).
        std::string file = a.vendor == "nvidia" ? "/dev/nvidia" + std::to_string(idx)
                         : a.vendor == "amd"    ? "/dev/dri/renderD" + std::to_string(128 + idx)
                         : a.vendor == "habana" ? "/dev/accel/accel" + std::to_string(idx)
                                                : "";
        s += "NodeName=" + (n.host.empty() ? std::string("UNKNOWN") : n.host) + " Name=gpu";
        if (a.cls != "unknown") s += " Type=" + a.cls;
        if (!file.empty()) s += " File=" + file;
        if (!a.cores.empty()) s += " Cores=" + a.cores;
        s += "\n";
    }
    return s;
}

std::string check_against(const json::object &rec, const NodeInfo &live) {
    try {
        // GPUs: each recorded one must be there, same class, not degraded.
        for (const auto &v : rec.at("accelerators").as_array()) {
            const auto &a = v.as_object();
            const std::string bus = json::value_to<std::string>(a.at("pci_bus"));
            const std::string cls = json::value_to<std::string>(a.at("class"));
            auto it = std::find_if(live.accelerators.begin(), live.accelerators.end(),
                                   [&](const Accelerator &x) { return x.pci_bus == bus; });
            if (it == live.accelerators.end()) return "accelerator " + cls + " at " + bus + " is missing";
            if (it->cls != cls) return "accelerator at " + bus + " is now " + it->cls + ", was " + cls;
            if (a.at("nvlinks_up").is_int64() && it->nvlinks_up && *it->nvlinks_up < a.at("nvlinks_up").as_int64())
                return "accelerator at " + bus + " has " + std::to_string(*it->nvlinks_up) + " NVLinks up, was " +
                       std::to_string(a.at("nvlinks_up").as_int64());
            if (a.at("memory_bytes").is_number() && it->memory_bytes &&
                *it->memory_bytes < a.at("memory_bytes").to_number<uint64_t>())
                return "accelerator at " + bus + " reports less memory than recorded";
        }
        for (const auto &v : rec.at("nics").as_array()) {
            const auto &r = v.as_object();
            const std::string name = json::value_to<std::string>(r.at("name"));
            auto it = std::find_if(live.nics.begin(), live.nics.end(), [&](const Nic &x) { return x.name == name; });
            if (it == live.nics.end()) return "NIC " + name + " is missing";
            for (const auto &pv : r.at("ports").as_array()) {
                const auto &p = pv.as_object();
                if (json::value_to<std::string>(p.at("state")) != "ACTIVE") continue;
                auto port = unsigned(p.at("port").to_number<int>());
                auto lp = std::find_if(it->ports.begin(), it->ports.end(), [&](const NicPort &x) { return x.port == port; });
                if (lp == it->ports.end() || lp->state != "ACTIVE")
                    return "NIC " + name + " port " + std::to_string(port) + " is not ACTIVE";
            }
        }
        const auto &mem = rec.at("memory").as_object().at("total_bytes");
        // 5% slack: kernels and firmware reserve a little more after updates.
        if (mem.is_number() && live.memory_bytes && double(*live.memory_bytes) < 0.95 * mem.to_number<double>())
            return "memory is " + std::to_string(*live.memory_bytes >> 20) + " MiB, recorded " +
                   std::to_string(mem.to_number<uint64_t>() >> 20) + " MiB";
        // Containers: a node recorded as running them that no longer can.
        if (auto *c = rec.if_contains("containers"); c && c->is_object() && live.containers && !live.containers->ready)
            if (auto *r = c->as_object().if_contains("ready"); r && r->is_bool() && r->as_bool())
                return "containers no longer run here: " + printable(live.containers->why);
        if (rec.at("cpu").as_object().at("pus").to_number<unsigned>() > live.pus)
            return "only " + std::to_string(live.pus) + " PUs online, recorded " +
                   std::to_string(rec.at("cpu").as_object().at("pus").to_number<unsigned>());
    } catch (const std::exception &e) {
        return std::string("recorded descriptor is malformed: ") + e.what();
    }
    return "";
}

}  // namespace shardnet::probe
