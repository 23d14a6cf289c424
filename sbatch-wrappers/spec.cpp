#include "sbatch-wrappers/spec.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <yaml-cpp/yaml.h>

#include "common/job_options.hpp"
#include "sbatch-wrappers/image.hpp"

namespace shardnet::cli {

namespace {

std::string where(const std::string &label, const YAML::Mark &m) {
    return label + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) + ": ";
}

std::string lower(std::string s) {
    for (char &c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

struct Reader {
    const std::string &label;
    std::string err;
    bool fail(const YAML::Node &n, const std::string &key, const std::string &why) {
        if (err.empty()) err = where(label, n.Mark()) + key + ": " + why;
        return false;
    }
    bool str(const YAML::Node &n, const std::string &key, std::string &out) {
        if (!n.IsScalar()) return fail(n, key, "expected a string");
        out = n.Scalar();
        return true;
    }
    bool integer(const YAML::Node &n, const std::string &key, long lo, long hi, int &out) {
        long v = 0;
        if (!n.IsScalar() || !YAML::convert<long>::decode(n, v)) return fail(n, key, "expected an integer");
        if (v < lo || v > hi) return fail(n, key, "expected " + std::to_string(lo) + ".." + std::to_string(hi));
        out = int(v);
        return true;
    }
    bool number(const YAML::Node &n, const std::string &key, double lo, double hi, double &out) {
        double v = 0;
        if (!n.IsScalar() || !YAML::convert<double>::decode(n, v)) return fail(n, key, "expected a number");
        if (v < lo || v > hi) return fail(n, key, "expected a number from " + std::to_string(int(lo)) + " to " + std::to_string(int(hi)));
        out = v;
        return true;
    }
    bool list(const YAML::Node &n, const std::string &key, std::vector<std::string> &out) {
        if (!n.IsSequence()) return fail(n, key, "expected a list of names");
        for (const auto &e : n) {
            if (!e.IsScalar()) return fail(e, key, "expected a list of names");
            out.push_back(e.Scalar());
        }
        return true;
    }
    // Exit codes as a list ([3, 7]), one code, or --shardnet-fatal-exit's own "3,7".
    bool exit_codes(const YAML::Node &n, const std::string &key, std::string &out) {
        std::string text;
        if (n.IsSequence())
            for (const auto &e : n) text += (text.empty() ? "" : ",") + (e.IsScalar() ? e.Scalar() : std::string("?"));
        else if (n.IsScalar()) text = n.Scalar();
        const auto codes = parse_fatal_exit(text);
        if (!codes) return fail(n, key, "expected exit codes from 1 to 255, at most " + std::to_string(kMaxFatalExit) + " (e.g. [3, 7])");
        out = fatal_exit_text(*codes);
        return true;
    }
    bool one_of(const YAML::Node &n, const std::string &key, std::initializer_list<const char *> allowed, std::string &out) {
        if (!str(n, key, out)) return false;
        out = lower(out);
        std::string names;
        for (const char *a : allowed) {
            if (out == a) return true;
            names += (names.empty() ? "" : ", ") + std::string(a);
        }
        return fail(n, key, "expected one of " + names);
    }
};

}  // namespace

std::string accelerator_class(const std::string &name) {
    static const std::pair<const char *, const char *> aliases[] = {
        {"h100", "H100-SXM"}, {"h100-sxm", "H100-SXM"}, {"h100-pcie", "H100-PCIe"}, {"h200", "H200-SXM"},
        {"h200-sxm", "H200-SXM"}, {"h200-nvl", "H200-NVL"}, {"b200", "B200"}, {"b300", "B300"}, {"gb200", "GB200"},
        {"mi300x", "MI300X"}, {"mi325x", "MI325X"}, {"mi355x", "MI355X"}, {"rtx-pro-6000", "RTX-PRO-6000"},
        {"a100", "A100"}, {"v100", "V100"}};
    const std::string l = lower(name);
    for (const auto &[alias, cls] : aliases)
        if (l == alias) return cls;
    return "";
}

std::string parse_spec(const std::string &text, const std::string &label, JobSpec &spec) {
    YAML::Node root;
    try {
        root = YAML::Load(text);
    } catch (const YAML::ParserException &e) {
        return where(label, e.mark) + "not valid YAML: " + e.msg;
    }
    if (!root.IsMap()) return label + ":1:1: expected a mapping of spec keys (name, command, gpus, ...)";
    Reader r{label, ""};
    for (const auto &kv : root) {
        const std::string key = kv.first.Scalar();
        const YAML::Node &v = kv.second;
        bool ok = true;
        if (key == "name") ok = r.str(v, key, spec.name);
        else if (key == "command") ok = r.str(v, key, spec.command);
        else if (key == "accelerator") {
            std::string a;
            ok = r.str(v, key, a);
            if (ok && (spec.accelerator = accelerator_class(a)).empty())
                ok = r.fail(v, key, "'" + a + "' is not an accelerator class (e.g. h100, h200, b200, mi300x, a100)");
        }
        else if (key == "gpus") ok = r.integer(v, key, 0, 1000000, spec.gpus);
        else if (key == "gpus_per_node") ok = r.integer(v, key, 0, 64, spec.gpus_per_node);
        else if (key == "gpu_memory_gb") ok = r.number(v, key, 0, 100000, spec.gpu_memory_gb);
        else if (key == "nodes") ok = r.integer(v, key, 1, 100000, spec.nodes);
        else if (key == "tasks_per_node") ok = r.integer(v, key, 1, 1024, spec.tasks_per_node);
        else if (key == "fabric") ok = r.one_of(v, key, {"nvlink", "infiniband", "roce", "ethernet", "xgmi"}, spec.fabric);
        else if (key == "image") {
            image::Ref ref;
            ok = r.str(v, key, spec.image);
            if (ok)
                if (auto err = image::parse(spec.image, ref); !err.empty()) ok = r.fail(v, key, err);
        }
        else if (key == "heartbeat") ok = r.integer(v, key, 1, 3600, spec.heartbeat);
        else if (key == "requeue") ok = r.one_of(v, key, {"federated", "local", "off"}, spec.requeue);
        else if (key == "max_attempts") ok = r.integer(v, key, 1, 1000, spec.max_attempts);
        else if (key == "fatal_exit") ok = r.exit_codes(v, key, spec.fatal_exit);
        else if (key == "on_timeout") ok = r.one_of(v, key, {"fail", "requeue"}, spec.on_timeout);
        else if (key == "spares") ok = r.integer(v, key, 0, 64, spec.spares);
        else if (key == "straggler") ok = r.one_of(v, key, {"report", "replace"}, spec.straggler);
        else if (key == "clusters") ok = r.list(v, key, spec.clusters);
        else if (key == "regions") ok = r.list(v, key, spec.regions);
        else if (key == "time_limit") ok = r.str(v, key, spec.time_limit);
        else if (key == "checkpoint") {
            if (!v.IsMap()) ok = r.fail(v, key, "expected a mapping with root and every");
            else
                for (const auto &c : v) {
                    const std::string ck = c.first.Scalar();
                    if (ck == "root") {
                        ok = r.str(c.second, "checkpoint.root", spec.ckpt_root);
                        if (ok && (spec.ckpt_root.empty() || spec.ckpt_root[0] != '/'))
                            ok = r.fail(c.second, "checkpoint.root", "expected an absolute path");
                    } else if (ck == "every") {
                        std::string e;
                        ok = r.str(c.second, "checkpoint.every", e);
                        int n = 0;
                        if (ok && e != "auto" && !(YAML::convert<int>::decode(c.second, n) && n > 0))
                            ok = r.fail(c.second, "checkpoint.every", "expected a number of steps or auto");
                        if (ok) spec.ckpt_every = e;
                    } else {
                        ok = r.fail(c.first, "checkpoint." + ck, "unknown key (expected root, every)");
                    }
                    if (!ok) break;
                }
        } else {
            ok = r.fail(kv.first, key, "unknown key (expected name, command, accelerator, gpus, gpus_per_node, gpu_memory_gb, "
                                       "nodes, tasks_per_node, fabric, image, checkpoint, heartbeat, requeue, max_attempts, fatal_exit, on_timeout, spares, straggler, "
                                       "clusters, regions, time_limit)");
        }
        if (!ok) return r.err;
    }
    if (spec.command.empty()) return label + ":1:1: command: missing (what srun starts on every rank)";
    // A straggler is replaced by a spare, in the same job (shard launch).
    if (spec.straggler == "replace" && spec.spares == 0)
        return where(label, root["straggler"].Mark()) + "straggler: replace needs spares (a spare takes the slow node's place)";
    // Slurm (22.05) starts one task per node in a container step.
    if (!spec.image.empty() && spec.tasks_per_node > 1)
        return where(label, root["tasks_per_node"].Mark()) + "tasks_per_node: " + std::to_string(spec.tasks_per_node) +
               " with an image: Slurm runs one task per node in a container step (start the node's ranks inside it, e.g. torchrun)";
    if (spec.name.empty()) spec.name = "run";
    return "";
}

std::string load_spec(const std::string &path, JobSpec &spec) {
    std::ifstream f(path);
    if (!f) return path + ": cannot read the spec";
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_spec(ss.str(), path, spec);
}

std::string resolve_shape(JobSpec &spec) {
    if (spec.nodes == 0) {
        if (spec.gpus > 0 && spec.gpus_per_node > 0) {
            if (spec.gpus % spec.gpus_per_node)
                return "gpus (" + std::to_string(spec.gpus) + ") is not a multiple of gpus_per_node (" + std::to_string(spec.gpus_per_node) + ")";
            spec.nodes = spec.gpus / spec.gpus_per_node;
        } else {
            spec.nodes = 1;
        }
    }
    if (spec.gpus > 0 && spec.gpus_per_node == 0) {
        if (spec.gpus % spec.nodes) return "gpus (" + std::to_string(spec.gpus) + ") cannot be spread evenly over " + std::to_string(spec.nodes) + " nodes";
        spec.gpus_per_node = spec.gpus / spec.nodes;
    }
    return "";
}

}  // namespace shardnet::cli
