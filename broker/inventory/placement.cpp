#include "broker/inventory/placement.hpp"

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>

#include "common/parse_util.hpp"
#include "common/safe_path.hpp"

namespace shardnet::broker {

namespace json = boost::json;

namespace {

// A class that may stand in for the required one: the same architecture
// with at least as much memory per GPU. Nothing else is assumed.
const std::vector<std::string> &compatible(const std::string &cls) {
    static const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
        {"H100-SXM", {"H100-SXM", "H200-SXM"}}, {"H100-PCIe", {"H100-PCIe", "H200-NVL"}},
        {"B200", {"B200", "B300"}},             {"MI300X", {"MI300X", "MI325X"}},
    };
    for (const auto &[k, v] : table)
        if (k == cls) return v;
    static thread_local std::vector<std::string> self;
    self.assign(1, cls);
    return self;
}

enum Reason { r_class, r_gpus, r_gpu_memory, r_fabric, r_memory, r_arch, r_cuda, r_undescribed, r_no_runtime, r_excluded, n_reasons };

struct Checker {
    const Requirements &req;
    std::vector<std::string> classes;
    unsigned fabric = 0;
    double min_cuda = 0;
    bool hardware, containers;
    explicit Checker(const Requirements &r) : req(r), hardware(r.needs_hardware()), containers(r.containers) {
        if (!r.accel_class.empty()) classes = compatible(r.accel_class);
        fabric_required(r.fabric, fabric);
        if (!r.min_cuda.empty()) min_cuda = std::strtod(r.min_cuda.c_str(), nullptr);
    }
    // n_reasons when the node fits.
    Reason check(const NodeOffer &n) const {
        // A job in an image: never a node whose probe found no container
        // runtime (one not probed, or by an older probe, may run it).
        if (containers && n.containers == NodeOffer::Oci::missing) return r_no_runtime;
        if (!hardware) return n_reasons;
        if (!n.described) return r_undescribed;
        if (!classes.empty() && std::find(classes.begin(), classes.end(), n.accel_class) == classes.end()) return r_class;
        if (n.gpus < req.gpus_per_node) return r_gpus;
        if (req.gpu_memory_gb > 0 && (!n.gpu_memory_gb || *n.gpu_memory_gb + 0.5 < req.gpu_memory_gb)) return r_gpu_memory;
        if (fabric && !(n.fabric & fabric)) return r_fabric;
        if (req.memory_gb > 0 && (!n.memory_gb || *n.memory_gb + 0.5 < req.memory_gb)) return r_memory;
        if (!req.arch.empty() && n.arch != req.arch) return r_arch;
        if (min_cuda > 0 && n.cuda + 1e-9 < min_cuda) return r_cuda;
        return n_reasons;
    }
    std::string why(Reason r) const {
        switch (r) {
        case r_class: return "accelerator class is not " + req.accel_class;
        case r_gpus: return "fewer than " + std::to_string(req.gpus_per_node) + " GPUs";
        case r_gpu_memory: return "GPU memory below " + num(req.gpu_memory_gb) + " GB or unknown";
        case r_fabric: return "no " + req.fabric + " fabric";
        case r_memory: return "memory below " + num(req.memory_gb) + " GB or unknown";
        case r_arch: return "CPU architecture is not " + req.arch;
        case r_cuda: return "CUDA driver below " + req.min_cuda + " or unknown";
        case r_undescribed: return "no probe descriptor";
        case r_no_runtime: return "no container runtime (the probe found no usable oci.conf)";
        case r_excluded: return "the failed node";
        default: return "";
        }
    }
    static std::string num(double v) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", v);
        return b;
    }
};

bool listed(const std::vector<std::string> &allowed, const std::string &v) {
    return allowed.empty() || std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char &c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

bool Requirements::needs_hardware() const {
    return !accel_class.empty() || gpus_per_node > 0 || gpu_memory_gb > 0 || !fabric.empty() || memory_gb > 0 ||
           !arch.empty() || !min_cuda.empty();
}

unsigned fabric_bit(std::string_view name) {
    const std::string n = lower(name);
    if (n == "nvswitch" || n == "nvlink") return f_nvlink;
    if (n == "infiniband") return f_infiniband;
    if (n == "roce") return f_roce;
    if (n == "ethernet") return f_ethernet;
    if (n == "xgmi") return f_xgmi;
    return 0;
}

bool fabric_required(std::string_view name, unsigned &bit) {
    bit = name.empty() ? 0 : fabric_bit(name);
    return bit != 0;
}

int fabric_rank(unsigned f) {
    if (f & (f_nvlink | f_xgmi)) return 4;
    if (f & f_infiniband) return 3;
    if (f & f_roce) return 2;
    if (f & f_ethernet) return 1;
    return 0;
}

const char *fabric_name(unsigned f) {
    if (f & f_nvlink) return "nvlink";
    if (f & f_xgmi) return "xgmi";
    if (f & f_infiniband) return "infiniband";
    if (f & f_roce) return "roce";
    if (f & f_ethernet) return "ethernet";
    return "pcie-only";
}

std::string requirements_from_json(const json::object &o, Requirements &r) {
    static const char *known[] = {"nodes", "accelerator_class", "gpus_per_node", "gpu_memory_gb", "fabric", "memory_gb",
                                  "arch", "min_cuda", "clusters", "regions", "containers"};
    for (const auto &kv : o)
        if (std::none_of(std::begin(known), std::end(known), [&](const char *k) { return kv.key() == k; }))
            return "requires." + std::string(kv.key()) + ": unknown key";
    auto num = [&](const char *k, double lo, double hi, double &out) -> std::string {
        auto *v = o.if_contains(k);
        if (!v) return "";
        if (!v->is_number()) return std::string("requires.") + k + ": expected a number";
        double x = v->to_number<double>();
        if (x < lo || x > hi) return std::string("requires.") + k + ": expected " + Checker::num(lo) + ".." + Checker::num(hi);
        out = x;
        return "";
    };
    auto str = [&](const char *k, std::string &out) -> std::string {
        auto *v = o.if_contains(k);
        if (!v) return "";
        if (!v->is_string()) return std::string("requires.") + k + ": expected a string";
        out = std::string(v->as_string());
        return "";
    };
    auto list = [&](const char *k, std::vector<std::string> &out) -> std::string {
        auto *v = o.if_contains(k);
        if (!v) return "";
        if (!v->is_array()) return std::string("requires.") + k + ": expected an array of names";
        for (const auto &e : v->as_array()) {
            if (!e.is_string()) return std::string("requires.") + k + ": expected an array of names";
            out.emplace_back(e.as_string());
        }
        return "";
    };
    if (auto *v = o.if_contains("containers")) {
        if (!v->is_bool()) return "requires.containers: expected true or false";
        r.containers = v->as_bool();
    }
    double nodes = r.nodes, gpn = r.gpus_per_node;
    for (auto err : {num("nodes", 1, 100000, nodes), num("gpus_per_node", 0, 64, gpn), num("gpu_memory_gb", 0, 100000, r.gpu_memory_gb),
                     num("memory_gb", 0, 1e7, r.memory_gb), str("accelerator_class", r.accel_class), str("fabric", r.fabric),
                     str("arch", r.arch), str("min_cuda", r.min_cuda), list("clusters", r.clusters), list("regions", r.regions)})
        if (!err.empty()) return err;
    r.nodes = int(nodes);
    r.gpus_per_node = int(gpn);
    unsigned bit = 0;
    if (!r.fabric.empty() && !fabric_required(r.fabric, bit))
        return "requires.fabric: expected nvlink, infiniband, roce, ethernet or xgmi";
    r.fabric = lower(r.fabric);
    return "";
}

json::object requirements_to_json(const Requirements &r) {
    json::object o{{"nodes", r.nodes}};
    if (!r.accel_class.empty()) o["accelerator_class"] = r.accel_class;
    if (r.gpus_per_node) o["gpus_per_node"] = r.gpus_per_node;
    if (r.gpu_memory_gb > 0) o["gpu_memory_gb"] = r.gpu_memory_gb;
    if (!r.fabric.empty()) o["fabric"] = r.fabric;
    if (r.memory_gb > 0) o["memory_gb"] = r.memory_gb;
    if (!r.arch.empty()) o["arch"] = r.arch;
    if (!r.min_cuda.empty()) o["min_cuda"] = r.min_cuda;
    if (!r.clusters.empty()) o["clusters"] = json::value_from(r.clusters);
    if (!r.regions.empty()) o["regions"] = json::value_from(r.regions);
    if (r.containers) o["containers"] = true;
    return o;
}

NodeOffer offer_from_descriptor(const std::string &name, const json::object &d) {
    NodeOffer n;
    n.name = name;
    n.described = true;
    if (auto *accs = d.if_contains("accelerators"); accs && accs->is_array()) {
        std::optional<double> min_mem;
        bool unknown_mem = false;
        for (const auto &a : accs->as_array()) {
            if (!a.is_object()) continue;
            const auto &ao = a.as_object();
            ++n.gpus;
            if (auto *c = ao.if_contains("class"); c && c->is_string() && n.accel_class.empty()) n.accel_class = std::string(c->as_string());
            auto *m = ao.if_contains("memory_bytes");
            if (m && m->is_number()) {
                double gb = m->to_number<double>() / 1e9;
                if (!min_mem || gb < *min_mem) min_mem = gb;
            } else {
                unknown_mem = true;
            }
        }
        if (!unknown_mem) n.gpu_memory_gb = min_mem;
    }
    if (auto *f = d.if_contains("fabric"); f && f->is_object())
        if (auto *s = f->as_object().if_contains("summary"); s && s->is_array())
            for (const auto &e : s->as_array())
                if (e.is_string()) n.fabric |= fabric_bit(std::string_view(e.as_string().data(), e.as_string().size()));
    if (auto *m = d.if_contains("memory"); m && m->is_object())
        if (auto *t = m->as_object().if_contains("total_bytes"); t && t->is_number()) n.memory_gb = t->to_number<double>() / 1e9;
    if (auto *c = d.if_contains("cpu"); c && c->is_object())
        if (auto *a = c->as_object().if_contains("arch"); a && a->is_string()) n.arch = std::string(a->as_string());
    if (auto *s = d.if_contains("software"); s && s->is_object())
        if (auto *cu = s->as_object().if_contains("cuda_driver"); cu && cu->is_string()) n.cuda = std::strtod(cu->as_string().c_str(), nullptr);
    if (auto *c = d.if_contains("containers"); c && c->is_object()) {
        if (auto *r = c->as_object().if_contains("ready"); r && r->is_bool())
            n.containers = r->as_bool() ? NodeOffer::Oci::ready : NodeOffer::Oci::missing;
    }
    return n;
}

std::string descriptor_shape_error(const json::object &d, std::string &field) {
    auto wrong = [&field](const char *where, const char *what) { field = where; return std::string(where) + ": " + what; };
    if (auto *a = d.if_contains("accelerators")) {
        if (!a->is_array()) return wrong("accelerators", "expected an array");
        for (const auto &e : a->as_array()) {
            if (!e.is_object()) return wrong("accelerators", "expected objects");
            auto *c = e.as_object().if_contains("class");
            if (!c || !c->is_string()) return wrong("accelerators", "each needs a string class");
            if (auto *m = e.as_object().if_contains("memory_bytes"); m && !m->is_number() && !m->is_null())
                return wrong("accelerators", "memory_bytes: expected a number");
        }
    }
    if (auto *n = d.if_contains("nics")) {
        if (!n->is_array()) return wrong("nics", "expected an array");
        for (const auto &e : n->as_array())
            if (!e.is_object()) return wrong("nics", "expected objects");
    }
    if (auto *f = d.if_contains("fabric")) {
        auto *s = f->is_object() ? f->as_object().if_contains("summary") : nullptr;
        if (!s || !s->is_array()) return wrong("fabric", "expected an object with a summary array");
        for (const auto &e : s->as_array())
            if (!e.is_string()) return wrong("fabric", "summary: expected strings");
    }
    if (auto *m = d.if_contains("memory")) {
        if (!m->is_object()) return wrong("memory", "expected an object");
        if (auto *t = m->as_object().if_contains("total_bytes"); t && !t->is_number() && !t->is_null())
            return wrong("memory", "total_bytes: expected a number");
    }
    for (const char *k : {"cpu", "software"})
        if (auto *o = d.if_contains(k); o && !o->is_object()) return wrong(k, "expected an object");
    if (auto *c = d.if_contains("containers")) {
        auto *r = c->is_object() ? c->as_object().if_contains("ready") : nullptr;
        if (!r || !r->is_bool()) return wrong("containers", "expected an object with a boolean ready");
        if (auto *w = c->as_object().if_contains("why"); w && !w->is_string()) return wrong("containers", "why: expected a string");
    }
    return "";
}

std::string node_misfit(const Requirements &req, const NodeOffer &n) {
    Checker c(req);
    Reason r = c.check(n);
    return r == n_reasons ? "" : c.why(r);
}

std::string image_requirements(const json::object &manifest, Requirements &r) {
    if (!manifest.contains("image_digest")) return "";
    r.containers = true;
    const auto *v = manifest.if_contains("image_layout");
    if (!v) return "";   // a run pinned before the layout was recorded: not checked
    if (!v->is_string()) return "image_layout: expected a string";
    if (auto err = check_path_syntax(std::string(v->as_string())); !err.empty()) return "image_layout: " + err;
    if (!is_valid_utf8(v->as_string())) return "image_layout: not UTF-8";
    r.image_layout = std::string(v->as_string());
    return "";
}

std::string image_unreachable(const std::string &cluster, const std::string &layout, const std::vector<std::string> &roots) {
    if (layout.empty() || roots.empty() ||
        std::any_of(roots.begin(), roots.end(), [&](const std::string &r) { return path_is_under(layout, r); }))
        return "";
    std::string list;
    for (const auto &r : roots) list += (list.empty() ? "" : ", ") + r;
    return "cannot read the image's layout " + layout + " (clusters." + cluster + ".image_roots: " + list + ")";
}

Placement place(const Requirements &req, const std::vector<ClusterOffer> &clusters, const std::string &home_cluster,
                const std::string &home_region, const std::string &exclude) {
    const Checker checker(req);
    struct Fit { const ClusterOffer *c; std::vector<const NodeOffer *> nodes; unsigned fabric; };
    std::vector<Fit> fits;
    // Where the job could wait: idle and busy nodes that fit are enough.
    struct Wait { const ClusterOffer *c; int fit; std::vector<std::string> exclude; size_t rejection; };
    std::vector<Wait> waits;
    Placement out;
    std::vector<const NodeOffer *> ok;
    for (const auto &c : clusters) {
        auto reject = [&](std::string why) { out.rejected.push_back({c.name, std::move(why)}); };
        if (!listed(req.clusters, c.name)) { reject("not an allowed cluster"); continue; }
        if (!listed(req.regions, c.region)) { reject("region " + (c.region.empty() ? std::string("(none)") : c.region) + " not allowed"); continue; }
        if (!c.reachable) { reject("slurmctld did not answer"); continue; }
        if (!c.reads_checkpoint) { reject("cannot read the checkpoint's storage"); continue; }
        if (req.containers && !c.containers) { reject("runs no containers (clusters." + c.name + ".containers is false): the job's image cannot run there"); continue; }
        if (auto why = image_unreachable(c.name, req.image_layout, c.image_roots); !why.empty()) { reject(why); continue; }
        if (!c.refused.empty()) { reject(c.refused); continue; }
        std::array<int, n_reasons + 1> count{};
        ok.clear();
        unsigned fabric_all = ~0u;
        for (const auto &n : c.idle) {
            Reason r = c.name == home_cluster && n.name == exclude ? r_excluded : checker.check(n);
            ++count[r];
            if (r == n_reasons) { ok.push_back(&n); fabric_all &= n.fabric; }
        }
        if (int(ok.size()) >= req.nodes) {
            fits.push_back({&c, ok, ok.empty() ? 0u : fabric_all});
            continue;
        }
        std::string why = std::to_string(ok.size()) + " of " + std::to_string(c.idle.size() - count[r_excluded]) +
                          " idle node(s) fit, " + std::to_string(req.nodes) + " needed";
        for (int r = 0; r < n_reasons; ++r)
            if (count[r] && r != r_excluded) why += "; " + std::to_string(count[r]) + ": " + checker.why(Reason(r));
        if (!c.busy.empty()) {
            Wait w{&c, int(ok.size()), c.held, out.rejected.size()};
            if (req.containers) w.exclude.insert(w.exclude.end(), c.no_runtime.begin(), c.no_runtime.end());
            auto skip = [&](const NodeOffer &n) {
                const bool bad = (c.name == home_cluster && n.name == exclude) || checker.check(n) != n_reasons;
                if (bad) w.exclude.push_back(n.name);
                return bad;
            };
            for (const auto &n : c.idle) skip(n);
            for (const auto &n : c.busy) w.fit += skip(n) ? 0 : 1;
            if (c.name == home_cluster && !exclude.empty() && std::find(w.exclude.begin(), w.exclude.end(), exclude) == w.exclude.end())
                w.exclude.push_back(exclude);
            if (w.fit >= req.nodes) waits.push_back(std::move(w));
            else why += "; " + std::to_string(w.fit) + " counting those in use";
        }
        reject(why);
    }
    if (fits.empty() && !waits.empty()) {
        // No idle room anywhere: the queue of the home cluster, else of the
        // cluster with the most nodes that fit (then by name).
        auto wait_key = [&](const Wait &w) { return std::make_tuple(w.c->name == home_cluster ? 0 : 1, -w.fit, w.c->name); };
        auto best = std::min_element(waits.begin(), waits.end(), [&](const Wait &a, const Wait &b) { return wait_key(a) < wait_key(b); });
        out.cluster = best->c->name;
        out.queued = req.nodes;
        out.exclude = best->exclude;
        std::sort(out.exclude.begin(), out.exclude.end());
        out.exclude.erase(std::unique(out.exclude.begin(), out.exclude.end()), out.exclude.end());
        out.waits_because = out.rejected[best->rejection].reason;
        out.rejected.erase(out.rejected.begin() + long(best->rejection));
        return out;
    }
    if (fits.empty()) return out;
    auto key = [&](const Fit &f) {
        return std::make_tuple(f.c->name == home_cluster ? 0 : 1, -fabric_rank(f.fabric),
                               !home_region.empty() && f.c->region == home_region ? 0 : 1, f.c->name);
    };
    auto best = std::min_element(fits.begin(), fits.end(), [&](const Fit &a, const Fit &b) { return key(a) < key(b); });
    for (const auto &f : fits)
        if (&f != &*best)
            out.rejected.push_back({f.c->name, "fits, but " + best->c->name + " is preferred (" +
                                                   (best->c->name == home_cluster ? std::string("same cluster")
                                                    : fabric_rank(best->fabric) > fabric_rank(f.fabric) ? std::string("better fabric")
                                                    : std::string("locality, then name")) + ")"});
    auto &nodes = best->nodes;
    std::partial_sort(nodes.begin(), nodes.begin() + req.nodes, nodes.end(),
                      [](const NodeOffer *a, const NodeOffer *b) { return a->name < b->name; });
    out.cluster = best->c->name;
    for (int i = 0; i < req.nodes; ++i) out.nodes.push_back(nodes[i]->name);
    out.fabric = fabric_name(best->fabric);
    return out;
}

}  // namespace shardnet::broker
