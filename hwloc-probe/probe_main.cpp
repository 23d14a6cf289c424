// shardnet-probe: records this node's topology as evidence for placement.
// See shardnet-probe(8).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "hwloc-probe/accel_class.hpp"
#include "hwloc-probe/descriptor.hpp"
#include "hwloc-probe/discover.hpp"
#include "common/http_client.hpp"
#include "hwloc-probe/isolate.hpp"
#include "hwloc-probe/json_pretty.hpp"
#include "hwloc-probe/node_name.hpp"
#include "hwloc-probe/nccl_bandwidth.hpp"

using namespace shardnet::probe;

namespace {

constexpr const char *kUsage =
    "usage: shardnet-probe [--input FILE.xml] [--pretty | --slurm-node | --gres-conf]\n"
    "                      [--check DESCRIPTOR] [--publish URL [--token-file F]] [--bandwidth]\n"
    "                      [--host NAME]\n"
    "Prints this node's JSON descriptor (default), a human summary, a Slurm NodeName line\n"
    "or gres.conf lines; --check exits 1 with a reason when a GPU, NIC or memory went\n"
    "missing or degraded since DESCRIPTOR was recorded. See shardnet-probe(8).\n";

int fail(const std::string &msg, int code = 2) {
    std::fprintf(stderr, "shardnet-probe: %s\n", msg.c_str());
    return code;
}

bool read_file(const std::string &path, std::string &out, std::string &err) {
    std::ifstream f(path, std::ios::binary);
    if (!f) { err = "cannot read '" + path + "': " + std::strerror(errno); return false; }
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return true;
}

// Keeps the calling thread off CPU `busy` (another CPU this process may use),
// when there is one. A new thread starts on its parent's CPU and both queue
// there until the scheduler's load balancing moves one: the UCX thread and
// hwloc's discovery then run one after the other (measured on 2 vCPUs: 9.2 ms
// for both, 7.6 ms with the UCX thread placed away).
void move_off_cpu(int busy) {
    cpu_set_t allowed;
    if (busy < 0 || sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (c != busy && CPU_ISSET(c, &allowed)) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
}

// Fractional seconds, or SOURCE_DATE_EPOCH for reproducible output.
double probed_at() {
    if (const char *e = std::getenv("SOURCE_DATE_EPOCH")) return std::strtod(e, nullptr);
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec / 1000000) / 1e3;
}

enum Mode { json_out, pretty_out, slurm_out, gres_out };
struct Options {
    Mode mode;
    std::string input, check, publish, token_file, host;
    bool bandwidth;
};
int probe(const Options &opt);

}  // namespace

int main(int argc, char **argv) {
    Mode mode = json_out;
    std::string input, check, publish, token_file, host;
    bool bandwidth = false;
    static const option longopts[] = {
        {"input", required_argument, nullptr, 'i'},   {"pretty", no_argument, nullptr, 'p'},
        {"slurm-node", no_argument, nullptr, 's'},    {"gres-conf", no_argument, nullptr, 'g'},
        {"check", required_argument, nullptr, 'c'},   {"publish", required_argument, nullptr, 'P'},
        {"token-file", required_argument, nullptr, 't'}, {"bandwidth", no_argument, nullptr, 'b'},
        {"host", required_argument, nullptr, 'H'},    {"help", no_argument, nullptr, 'h'},
        {nullptr, 0, nullptr, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "i:psgc:P:t:bH:h", longopts, nullptr)) != -1) {
        switch (c) {
        case 'i': input = optarg; break;
        case 'p': mode = pretty_out; break;
        case 's': mode = slurm_out; break;
        case 'g': mode = gres_out; break;
        case 'c': check = optarg; break;
        case 'P': publish = optarg; break;
        case 't': token_file = optarg; break;
        case 'b': bandwidth = true; break;
        case 'H': host = optarg; break;
        case 'h': std::fputs(kUsage, stdout); return 0;
        default: std::fputs(kUsage, stderr); return 2;
        }
    }
    if (optind < argc) return fail(std::string("unexpected argument '") + argv[optind] + "'\n" + kUsage);
    if (input.empty())
        if (const char *x = std::getenv("HWLOC_XMLFILE")) input = x;
    Options o{mode, input, check, publish, token_file, host, bandwidth};
    // A saved topology is untrusted input to libhwloc: read it in a child.
    return input.empty() ? probe(o) : run_isolated(input, [&o] { return probe(o); });
}

namespace {

// Where Slurm's oci.conf is looked for: beside the slurm.conf in use
// ($SLURM_CONF, else /etc/slurm/slurm.conf); for --check, where the
// recorded descriptor found it (a HealthCheckProgram runs with no
// SLURM_CONF: the recorded path is the node's own).
std::string oci_slurm_conf(const std::string &check) {
    if (!check.empty()) {
        std::string text, err;
        boost::system::error_code ec;
        if (read_file(check, text, err))
            if (auto v = boost::json::parse(text, ec); !ec && v.is_object())
                if (auto *c = v.as_object().if_contains("containers"); c && c->is_object())
                    if (auto *f = c->as_object().if_contains("oci_conf"); f && f->is_string() && f->as_string().starts_with("/")) {
                        const std::string conf(f->as_string());
                        return conf.substr(0, conf.rfind('/') + 1) + "slurm.conf";
                    }
    }
    const char *env = std::getenv("SLURM_CONF");
    return env && *env ? env : "/etc/slurm/slurm.conf";
}

int probe(const Options &opt) {
    const auto &[mode, input, check, publish, token_file, host, bandwidth] = opt;
    NodeInfo node;
    // Loading UCX and opening its memory domains do not need hwloc's answer:
    // do them beside hwloc's discovery, the slow part.
    NodeInfo ucx_part;
    std::thread ucx_thread;
    // Slurm's lines and --check (a HealthCheckProgram, run on every node
    // every few minutes) do not use UCX's answer: only the descriptor does.
    const bool want_ucx = input.empty() && check.empty() &&
                          (mode == json_out || mode == pretty_out || !publish.empty());
    if (want_ucx) {
        ucx_skip_absent_modules();
        ucx_thread = std::thread([&ucx_part, main_cpu = sched_getcpu()] {
            move_off_cpu(main_cpu);
            discover_ucx(ucx_part);
        });
    }
    std::string hwloc_err = discover_hwloc(input, node);
    if (ucx_thread.joinable()) ucx_thread.join();
    if (!hwloc_err.empty()) return fail(hwloc_err);
    if (input.empty()) {
        node.ucx = std::move(ucx_part.ucx);
        node.ucx_version = std::move(ucx_part.ucx_version);
        discover_meminfo(node);
        discover_ib_sysfs(node);
        discover_nvml(node);
        discover_amdgpu_sysfs(node);
        discover_nvswitch_sysfs(node);
        if (shardnet::OciSupport oci = shardnet::discover_oci(oci_slurm_conf(check)); oci.known) node.containers = std::move(oci);
        for (auto &a : node.accelerators) {  // NVML names are better evidence than PCI names
            unsigned v = 0, d = 0;
            std::sscanf(a.pci_id.c_str(), "%x:%x", &v, &d);
            a.cls = classify_accelerator(uint16_t(v), uint16_t(d), a.model, a.memory_bytes);
        }
        if (node.host.empty()) {
            char h[256] = {};
            gethostname(h, sizeof h - 1);
            node.host = h;
        }
    }
    std::string host_field = input.empty() ? "this machine's host name" : "the topology's HostName (" + input + ")";
    if (!host.empty()) { node.host = host; host_field = "--host"; }
    // It becomes NodeName= in Slurm's lines: a newline or space there would
    // add lines or keywords of the topology's choosing.
    if (!node.host.empty())
        if (auto err = check_node_name(node.host, host_field); !err.empty()) return fail(err);

    if (mode == slurm_out) {
        SlurmGeometry g;
        if (auto err = slurm_geometry(input, g); !err.empty()) return fail(err);
        node.slurm = g;
    }

    std::optional<BandwidthResult> bw;
    if (bandwidth) {
        BandwidthResult r;
        if (auto err = measure_nccl_allreduce(r); !err.empty()) return fail("--bandwidth: " + err, 1);
        if (r.gpus == 0) {
            std::puts("shardnet-probe: no GPUs on this node; no bandwidth to measure");
            return 0;
        }
        node.nccl = r.nccl_version;
        bw = r;
    }

    if (!check.empty()) {
        std::string text, err;
        if (!read_file(check, text, err)) return fail(err);
        boost::system::error_code ec;
        auto v = boost::json::parse(text, ec);
        if (ec || !v.is_object()) return fail("'" + check + "' is not a JSON node descriptor");
        if (auto reason = check_against(v.as_object(), node); !reason.empty()) {
            std::printf("shardnet-probe: %s\n", reason.c_str());  // Slurm's health check logs stdout
            return 1;
        }
        return 0;
    }

    boost::json::object desc = to_descriptor(node, probed_at());
    if (bw) {
        // A measurement, not a property of the hardware: outside the hash.
        desc["bandwidth"] = boost::json::object{{"method", "nccl all-reduce, float32, in-place-free"},
                                                {"gpus", bw->gpus}, {"bytes", bw->bytes},
                                                {"seconds", bw->seconds}, {"algbw_gbps", bw->algbw_gbps},
                                                {"busbw_gbps", bw->busbw_gbps}};
    }
    if (!publish.empty()) {
        shardnet::HttpRequest req;
        req.url = publish + "/v1/nodes";
        req.body = boost::json::serialize(desc);
        req.timeout_ms = 5000;
        if (!token_file.empty()) {
            std::string tok, err;
            if (!read_file(token_file, tok, err)) return fail(err);
            while (!tok.empty() && (tok.back() == '\n' || tok.back() == ' ')) tok.pop_back();
            req.bearer = tok;
        }
        shardnet::HttpClient client;
        auto res = client.send(req);
        if (!res.ok())
            return fail("publishing to " + req.url + " failed: " +
                        (res.status ? "HTTP " + std::to_string(res.status) : res.error), 1);
    }
    switch (mode) {
    case json_out: std::printf("%s\n", pretty_json(desc).c_str()); break;
    case pretty_out: std::fputs(pretty(node).c_str(), stdout); break;
    case slurm_out: std::printf("%s\n", slurm_node_line(node).c_str()); break;
    case gres_out: std::fputs(gres_conf(node).c_str(), stdout); break;
    }
    return 0;
}

}  // namespace
