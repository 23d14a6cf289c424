#include "sbatch-wrappers/ckpt_policy.hpp"

#include <boost/json.hpp>
#include <cstdio>

#include "common/ckpt_model.hpp"

namespace shardnet::cli {

namespace json = boost::json;
using ckpt::format_duration;

namespace {

const json::object *obj(const json::object &o, const char *k) {
    auto *v = o.if_contains(k);
    return v ? v->if_object() : nullptr;
}
double num(const json::object *o, const char *k, double otherwise = 0) {
    const json::value *v = o ? o->if_contains(k) : nullptr;
    return v && v->is_number() ? v->to_number<double>() : otherwise;
}
std::string text(const json::object *o, const char *k) {
    const json::value *v = o ? o->if_contains(k) : nullptr;
    return v && v->is_string() ? std::string(v->as_string()) : "";
}
std::string fmt(const char *f, double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, x);
    return buf;
}
// "measured, 5 samples" or "site prior".
std::string source(const json::object *m, const char *one, const char *many) {
    const std::string s = text(m, "source");
    const long long n = (long long)num(m, "samples");
    if (s == "prior") return "site prior";
    return s + ", " + std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string render_policy(const json::value &answer) {
    const json::object *o = answer.if_object();
    if (!o || !o->contains("run")) return "";
    const std::string run = text(o, "run"), state = text(o, "state");
    std::string out;
    if (state == "fixed") return "run " + run + ": " + text(o, "message") + "\n";
    const json::object *c = obj(*o, "computed"), *in = obj(*o, "inputs");
    const long long version = (long long)num(o, "version");
    if (version > 0)
        out += "run " + run + ": checkpoint every " + std::to_string((long long)num(o, "every_steps")) + " steps (policy v" +
               std::to_string(version) + ", Daly 2006)\n";
    else
        out += "run " + run + ": no interval yet (the trainer uses its default); waiting for " + text(o, "waiting_for") + "\n";
    if (c) {
        out += "  now computed: every " + std::to_string((long long)num(c, "every_steps")) + " steps = " +
               format_duration(num(c, "seconds")) + " of compute; Daly " + format_duration(num(c, "daly_seconds")) + ", Young 1974 " +
               format_duration(num(c, "young_seconds")) + ", complete model's optimum " + format_duration(num(c, "optimum_seconds")) + "\n";
        out += "  expected waste " + fmt("%.1f%%", 100 * num(c, "expected_waste")) + " of wall time (writes, lost work, restarts)\n";
    }
    if (!in) return out;
    out += "inputs\n";
    auto line = [&](const char *name, const std::string &value, const std::string &from) {
        char buf[512];
        std::snprintf(buf, sizeof buf, "  %-32s %-10s %s\n", name, value.c_str(), from.c_str());
        out += buf;
    };
    const json::object *w = obj(*in, "write_seconds"), *st = obj(*in, "step_seconds"), *m = obj(*in, "mtbf_seconds"),
                       *r = obj(*in, "restart_seconds");
    line("write time (delta)", w ? format_duration(num(w, "value")) : "-", w ? source(w, "sealed checkpoint", "sealed checkpoints") + " (median)" : "not measured yet");
    line("step time", st ? format_duration(num(st, "value")) : "-", st ? source(st, "step", "steps") : "not measured yet");
    if (m) {
        const long long nodes = (long long)num(m, "nodes", 1), faults = (long long)num(m, "interruptions");
        line("mean time to interruption (M)", format_duration(num(m, "value")),
             "a node's " + format_duration(num(m, "node_value")) + " / " + std::to_string(nodes) + " node" + (nodes == 1 ? "" : "s") + ": " +
             std::to_string(faults) + " interruption" + (faults == 1 ? "" : "s") + " in " + fmt("%.3g", num(m, "node_hours_observed")) +
             " node-hours observed + prior " + fmt("%g", num(m, "prior_node_hours")) + " h (" + text(m, "source") + ")");
    }
    if (r) {
        line("restart (R)", format_duration(num(r, "value")), r && text(r, "source") == "prior" ? "site prior (no recovery measured yet)"
                                                                                               : source(r, "recovery", "recoveries") + " (median)");
        if (auto *tiers = r->if_contains("tiers"); tiers && tiers->is_array())
            for (const auto &t : tiers->as_array()) {
                const json::object *to = t.if_object();
                const long long n = (long long)num(to, "recoveries");
                char buf[512];
                std::snprintf(buf, sizeof buf, "    %-14s %lld recover%s: detect %s, place %s, start %s, first step %s = %s\n",
                              text(to, "tier").c_str(), n, n == 1 ? "y" : "ies", format_duration(num(to, "detect")).c_str(),
                              format_duration(num(to, "place")).c_str(), format_duration(num(to, "start")).c_str(),
                              format_duration(num(to, "restore")).c_str(), format_duration(num(to, "total")).c_str());
                out += buf;
            }
    }
    return out;
}

}  // namespace shardnet::cli
