#include "broker/slurm/job_options.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <string_view>
#include <utility>

#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;

namespace {

// Each kept option: its name in a spec, its sbatch flag, and its kind.
// flag: the value is a switch ("--exclusive"); number: a count or minutes;
// word: a name Slurm knows (partition, account, ...); text: free text.
enum class Kind { flag, number, word, text, path };
struct Option {
    const char *name, *sbatch;
    Kind kind;
};
constexpr Option kOptions[] = {
    {"partition", "--partition", Kind::word},      {"account", "--account", Kind::word},
    {"qos", "--qos", Kind::word},                  {"time", "--time", Kind::number},
    {"time_min", "--time-min", Kind::number},      {"mem", "--mem", Kind::number},
    {"mem_per_cpu", "--mem-per-cpu", Kind::number}, {"mem_per_gpu", "--mem-per-gpu", Kind::number},
    {"cpus_per_task", "--cpus-per-task", Kind::number}, {"cpus_per_gpu", "--cpus-per-gpu", Kind::number},
    {"ntasks_per_node", "--ntasks-per-node", Kind::number}, {"gres", "--gres", Kind::word},
    {"gpus", "--gpus", Kind::word},                {"gpus_per_task", "--gpus-per-task", Kind::word},
    {"gpus_per_socket", "--gpus-per-socket", Kind::word}, {"constraint", "--constraint", Kind::text},
    {"exclusive", "--exclusive", Kind::word},      {"oversubscribe", "--oversubscribe", Kind::flag},
    {"licenses", "--licenses", Kind::word},        {"job_name", "--job-name", Kind::text},
    {"nice", "--nice", Kind::number},              {"comment", "--comment", Kind::text},
    {"reservation", "--reservation", Kind::word},  {"error", "--error", Kind::path},
    {"input", "--input", Kind::path},              {"no_requeue", "--no-requeue", Kind::flag},
    {"contiguous", "--contiguous", Kind::flag},    {"wckey", "--wckey", Kind::word},
    {"threads_per_core", "--threads-per-core", Kind::number},
    {"gpu_bind", "--gpu-bind", Kind::word},        {"gpu_freq", "--gpu-freq", Kind::word},
    {"sockets_per_node", "--sockets-per-node", Kind::number}, {"cores_per_socket", "--cores-per-socket", Kind::number},
    {"ntasks_per_socket", "--ntasks-per-socket", Kind::number}, {"ntasks_per_core", "--ntasks-per-core", Kind::number},
    {"mincpus", "--mincpus", Kind::number},        {"tmp", "--tmp", Kind::number},
    {"spread_job", "--spread-job", Kind::flag},     {"cpu_freq", "--cpu-freq", Kind::word},
    {"prefer", "--prefer", Kind::text},             {"core_spec", "--core-spec", Kind::number},
    {"thread_spec", "--thread-spec", Kind::number}, {"reboot", "--reboot", Kind::flag},
    {"profile", "--profile", Kind::word},           {"delay_boot", "--delay-boot", Kind::number},
    {"gres_enforce_binding", "--gres-flags=enforce-binding", Kind::flag}, {"use_min_nodes", "--use-min-nodes", Kind::flag},
};

const Option *option(std::string_view name) {
    for (const auto &o : kOptions)
        if (name == o.name) return &o;
    return nullptr;
}

std::string str(const json::object &o, const char *k) {
    auto *v = o.if_contains(k);
    return v && v->is_string() ? std::string(v->as_string()) : "";
}
// A number Slurm set (null, absent, NO_VAL and INFINITE are not set).
bool num(const json::object &o, const char *k, long long &out) {
    auto *v = o.if_contains(k);
    if (!v) return false;
    if (v->is_int64()) out = v->as_int64();
    else if (v->is_uint64() && v->as_uint64() < 0xfffffffeULL) out = (long long)v->as_uint64();
    else return false;
    return out >= 0 && out < 0xfffffffeLL && out != 0xfffe;
}

// "gres:gpu:2" or "gres/gpu:2" (Slurm's TRES spelling) as "gpu:2", and
// whether every entry is a GPU.
std::string gres_of(const std::string &tres, bool &only_gpus) {
    std::string out;
    only_gpus = !tres.empty();
    std::size_t pos = 0;
    while (pos <= tres.size()) {
        auto comma = tres.find(',', pos);
        std::string one = tres.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (one.rfind("gres:", 0) == 0 || one.rfind("gres/", 0) == 0) one = one.substr(5);
        if (one.rfind("gpu", 0) != 0) only_gpus = false;
        if (!one.empty()) out += (out.empty() ? "" : ",") + one;
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}
// "gpu:a100:2,gpu:v100:1" -> "a100:2,v100:1": --gpus*'s spelling of each entry.
std::string without_gpu_word(const std::string &gres) {
    std::string out;
    std::size_t pos = 0;
    for (;;) {
        const auto comma = gres.find(',', pos);
        std::string one = gres.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (one.rfind("gpu:", 0) == 0) one = one.substr(4);
        out += (out.empty() ? "" : ",") + one;
        if (comma == std::string::npos) return out;
        pos = comma + 1;
    }
}
// "gpu:4" -> "4" (a per-GPU count), "" otherwise.
std::string gpu_count(const std::string &gres) {
    if (gres.rfind("gpu:", 0) != 0 || gres.find(',') != std::string::npos) return "";
    const std::string n = gres.substr(gres.rfind(':') + 1);
    return parse_int(n, 0, 1LL << 40) ? n : "";
}

bool word_ok(const std::string &v) {
    if (v.empty() || v.size() > 1024 || v[0] == '-') return false;
    for (unsigned char c : v)
        if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == ':' || c == ',' || c == '=' || c == '+' || c == '@' || c == '/'))
            return false;
    return true;
}

// "gpu:closest" (tres_bind, tres_freq) -> "closest"; another TRES's is named.
std::string gpu_part(const std::string &v, const char *what, std::vector<std::string> &uncarried) {
    if (v.rfind("gpu:", 0) == 0 && v.size() > 4) return v.substr(4);
    if (!v.empty()) uncarried.push_back(std::string(what) + " " + v);
    return "";
}

// A frequency of --cpu-freq as sbatch takes it: kHz, or one of Slurm's
// names (CPU_FREQ_* of slurm.h: the range flag and 1 to 4).
std::string freq_word(long long v) {
    constexpr long long kRange = 0x80000000LL;
    if (!(v & kRange)) return std::to_string(v);
    constexpr const char *kNames[] = {"", "low", "medium", "high", "highm1"};
    return v - kRange >= 1 && v - kRange <= 4 ? kNames[v - kRange] : "";
}
std::string governor_word(long long v) {
    for (auto [bits, name] : {std::pair{0x88000000LL, "conservative"}, {0x84000000LL, "ondemand"}, {0x82000000LL, "performance"},
                              {0x81000000LL, "powersave"}, {0x80800000LL, "userspace"}, {0x80400000LL, "schedutil"}})
        if (v == bits) return name;
    return "";
}

// --cpu-freq=MIN-MAX[:GOVERNOR], MAX or GOVERNOR back from the record.
// Slurm 22.05's squeue --json spells the set minimum
// "cpu_frequency_minumum"; unset, it is "cpu_frequency_minimum": null.
void read_cpu_freq(const json::object &j, json::object &opts, std::vector<std::string> &uncarried) {
    long long lo = 0, hi = 0, gov = 0;
    const bool has_lo = num(j, "cpu_frequency_minumum", lo) || num(j, "cpu_frequency_minimum", lo);
    const bool has_hi = num(j, "cpu_frequency_maximum", hi), has_gov = num(j, "cpu_frequency_governor", gov);
    if (!has_lo && !has_hi && !has_gov) return;
    const std::string l = has_lo ? freq_word(lo) : "", h = has_hi ? freq_word(hi) : "", g = has_gov ? governor_word(gov) : "";
    std::string v;
    if (has_lo && has_hi && !l.empty() && !h.empty() && (!has_gov || !g.empty())) v = l + "-" + h + (has_gov ? ":" + g : "");
    else if (!has_lo && has_hi && !has_gov && !h.empty()) v = h;
    else if (!has_lo && !has_hi && !g.empty()) v = g;
    if (!v.empty()) opts["cpu_freq"] = v;
    else uncarried.push_back("cpu frequency min " + std::to_string(has_lo ? lo : -1) + " max " + std::to_string(has_hi ? hi : -1) +
                             " governor " + std::to_string(has_gov ? gov : -1));
}

// How the job is laid out on a node's sockets, cores and disk, and how its
// GPUs are bound and clocked (squeue --json of Slurm 22.05).
void read_layout(const json::object &j, json::object &opts, std::vector<std::string> &uncarried) {
    long long n = 0;
    for (auto [field, name] : {std::pair{"sockets_per_node", "sockets_per_node"}, {"cores_per_socket", "cores_per_socket"},
                               {"tasks_per_socket", "ntasks_per_socket"}, {"tasks_per_core", "ntasks_per_core"},
                               {"minimum_tmp_disk_per_node", "tmp"}})
        if (num(j, field, n) && n > 0) opts[name] = std::to_string(n);
    // 1 is every job's minimum unless asked otherwise.
    if (num(j, "minimum_cpus_per_node", n) && n > 1) opts["mincpus"] = std::to_string(n);
    if (auto *f = j.if_contains("flags"); f && f->is_array())
        for (const auto &x : f->as_array()) {
            if (!x.is_string()) continue;
            if (x.as_string() == "SPREAD_JOB") opts["spread_job"] = true;
            else if (x.as_string() == "GRES_ENFORCE_BIND") opts["gres_enforce_binding"] = true;
            else if (x.as_string() == "USE_MIN_NODES") opts["use_min_nodes"] = true;
        }
    if (std::string b = gpu_part(str(j, "tres_bind"), "tres_bind", uncarried); !b.empty()) opts["gpu_bind"] = b;
    if (std::string f = gpu_part(str(j, "tres_freq"), "tres_freq", uncarried); !f.empty()) opts["gpu_freq"] = f;
    read_cpu_freq(j, opts, uncarried);
    if (num(j, "core_spec", n) && n > 0) opts["core_spec"] = std::to_string(n);
    if (num(j, "thread_spec", n) && n > 0) opts["thread_spec"] = std::to_string(n);
    if (std::string p = str(j, "prefer"); !p.empty()) opts["prefer"] = p;
    if (auto *v = j.if_contains("reboot"); v && v->is_bool() && v->as_bool()) opts["reboot"] = true;
    // Set, but not for a new job to ask again as it stands: named.
    if (num(j, "deadline", n) && n > 0) uncarried.push_back("deadline " + std::to_string(n) + " (a time of attempt 1's)");
    // Seconds in the record, minutes to sbatch.
    if (num(j, "delay_boot", n) && n > 0) {
        if (n % 60 == 0) opts["delay_boot"] = std::to_string(n / 60);
        else uncarried.push_back("delay boot " + std::to_string(n) + " s");
    }
    // ["Task"] for --profile=task.
    if (auto *p = j.if_contains("profile"); p && p->is_array() && !p->as_array().empty()) {
        std::string v;
        for (const auto &x : p->as_array())
            if (x.is_string()) v += (v.empty() ? "" : ",") + std::string(x.as_string());
        std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
        if (!v.empty() && v != "none") opts["profile"] = v;
    }
    // -N MIN-MAX: placement gives the job a fixed count.
    long long count = 0;
    if (num(j, "max_nodes", n) && num(j, "node_count", count) && count > 0 && n > count)
        uncarried.push_back("node count range up to " + std::to_string(n) + " (placement gives " + std::to_string(count) + ")");
    if (std::string c = str(j, "cluster_features"); !c.empty()) uncarried.push_back("cluster constraint " + c);
    if (std::string m = str(j, "mcs_label"); !m.empty()) uncarried.push_back("mcs label " + m);
}

}  // namespace

std::string comment_with_marker(const std::string &user, const std::string &decision) {
    return user.empty() ? kDecisionMarker + decision : user + " " + kDecisionMarker + decision;
}

std::string user_comment(const std::string &comment) {
    const auto at = comment.find(kDecisionMarker);
    if (at == std::string::npos) return comment;
    std::string out = comment.substr(0, at);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

void read_job_options(const json::object &j, json::object &opts, std::vector<std::string> &uncarried) {
    for (const char *k : {"partition", "account", "qos", "licenses", "wckey"})
        if (std::string v = str(j, k); !v.empty()) opts[k] = v;
    if (std::string v = str(j, "resv_name"); !v.empty()) opts["reservation"] = v;
    if (std::string v = str(j, "features"); !v.empty()) opts["constraint"] = v;
    if (std::string v = str(j, "name"); !v.empty()) opts["job_name"] = v;
    if (std::string v = user_comment(str(j, "comment")); !v.empty()) opts["comment"] = v;
    long long n = 0;
    if (num(j, "time_limit", n) && n > 0) opts["time"] = std::to_string(n);
    if (num(j, "time_minimum", n) && n > 0) opts["time_min"] = std::to_string(n);
    if (num(j, "memory_per_node", n) && n > 0) opts["mem"] = std::to_string(n);
    if (num(j, "memory_per_cpu", n) && n > 0) opts["mem_per_cpu"] = std::to_string(n);
    if (num(j, "cpus_per_task", n) && n > 0) opts["cpus_per_task"] = std::to_string(n);
    if (num(j, "tasks_per_node", n) && n > 0) opts["ntasks_per_node"] = std::to_string(n);
    if (num(j, "threads_per_core", n) && n > 0) opts["threads_per_core"] = std::to_string(n);
    // A negative nice is an admin's to give: submitted as the user, it would be refused.
    if (auto *v = j.if_contains("nice"); v && v->is_int64() && v->as_int64() > 0) opts["nice"] = std::to_string(v->as_int64());
    else if (v && v->is_int64() && v->as_int64() < 0) uncarried.push_back("nice " + std::to_string(v->as_int64()) + " (an admin's)");
    bool gpus = false;
    if (std::string g = gres_of(str(j, "tres_per_node"), gpus); !g.empty()) opts["gres"] = g;
    if (std::string g = gres_of(str(j, "tres_per_job"), gpus); !g.empty()) {
        if (gpus) opts["gpus"] = without_gpu_word(g);
        else uncarried.push_back("tres_per_job " + g);
    }
    if (std::string g = gres_of(str(j, "tres_per_task"), gpus); !g.empty()) {
        if (gpus) opts["gpus_per_task"] = without_gpu_word(g);
        else uncarried.push_back("tres_per_task " + g);
    }
    if (std::string g = gres_of(str(j, "tres_per_socket"), gpus); !g.empty()) {
        if (gpus) opts["gpus_per_socket"] = without_gpu_word(g);
        else uncarried.push_back("tres_per_socket " + g);
    }
    if (std::string g = gres_of(str(j, "cpus_per_tres"), gpus); !g.empty()) {
        if (std::string c = gpu_count(g); !c.empty()) opts["cpus_per_gpu"] = c;
        else uncarried.push_back("cpus_per_tres " + g);
    }
    if (std::string g = gres_of(str(j, "memory_per_tres"), gpus); !g.empty()) {
        if (std::string c = gpu_count(g); !c.empty()) opts["mem_per_gpu"] = c;
        else uncarried.push_back("memory_per_tres " + g);
    }
    const std::string shared = str(j, "shared");
    if (shared == "none" || shared == "exclusive") opts["exclusive"] = "";
    else if (shared == "user" || shared == "mcs") opts["exclusive"] = shared;
    else if (shared == "oversubscribe" || shared == "yes") opts["oversubscribe"] = true;
    else if (!shared.empty()) uncarried.push_back("shared " + shared);
    if (auto *v = j.if_contains("requeue"); v && v->is_bool() && !v->as_bool()) opts["no_requeue"] = true;
    if (auto *v = j.if_contains("contiguous"); v && v->is_bool() && v->as_bool()) opts["contiguous"] = true;
    if (std::string in = str(j, "standard_input"); !in.empty() && in != "/dev/null") {
        const std::string wd = str(j, "current_working_directory");
        if (in[0] != '/' && !wd.empty()) in = wd + "/" + in;
        if (in[0] == '/' && in.find('%') == std::string::npos) opts["input"] = in;
        else uncarried.push_back("input " + in);
    }
    read_layout(j, opts, uncarried);
    if (std::string x = str(j, "excluded_nodes"); !x.empty()) uncarried.push_back("exclude " + x + " (placement chooses the nodes)");
    // What a new job cannot be: named, never dropped in silence.
    if (std::string d = str(j, "dependency"); !d.empty()) uncarried.push_back("dependency " + d);
    long long array = 0;
    if (num(j, "array_job_id", array) && array > 0) {
        long long task = 0;
        uncarried.push_back(num(j, "array_task_id", task) ? "array task " + std::to_string(task) + " of job " + std::to_string(array)
                                                          : "array job " + std::to_string(array));
    }
    if (num(j, "het_job_id", n) && n > 0) uncarried.push_back("heterogeneous job " + std::to_string(n));
    if (std::string b = str(j, "burst_buffer"); !b.empty()) uncarried.push_back("burst buffer");
    if (std::string b = str(j, "batch_features"); !b.empty()) uncarried.push_back("batch features " + b);
    if (std::string c = str(j, "container"); !c.empty()) uncarried.push_back("container " + c);
    if (std::string r = str(j, "required_nodes"); !r.empty()) uncarried.push_back("nodelist " + r + " (placement chooses the nodes)");
}

bool step_option_variable(const std::string &name) {
    return name == "SLURM_DISTRIBUTION" || name == "SLURM_MEM_BIND" || name == "SLURM_MEM_BIND_VERBOSE";
}

std::vector<std::string> step_options(std::string &environment, std::vector<std::string> &not_carried) {
    std::string rest, dist, bind, verbose;
    for (std::size_t pos = 0; pos < environment.size();) {
        const auto end = std::min(environment.find('\0', pos), environment.size());
        const std::string e = environment.substr(pos, end - pos);
        pos = end + 1;
        const auto eq = e.find('=');
        const std::string name = e.substr(0, eq), value = eq == std::string::npos ? "" : e.substr(eq + 1);
        if (!step_option_variable(name)) { rest += e, rest += '\0'; continue; }
        (name == "SLURM_DISTRIBUTION" ? dist : name == "SLURM_MEM_BIND" ? bind : verbose) = value;
    }
    environment = std::move(rest);
    std::vector<std::string> out;
    // sbatch --mem-bind=verbose,local gives SLURM_MEM_BIND=local and SLURM_MEM_BIND_VERBOSE=verbose.
    if (!bind.empty() && verbose == "verbose") bind = "verbose," + bind;
    for (auto [flag, v] : {std::pair{"--distribution", dist}, {"--mem-bind", bind}}) {
        if (v.empty()) continue;
        if (word_ok(v)) out.push_back(std::string(flag) + "=" + v);
        else not_carried.push_back(std::string(flag + 2) + " (malformed value)");
    }
    return out;
}

std::vector<std::string> sbatch_options(const json::object &opts, std::string &err, std::vector<std::string> *dropped) {
    std::vector<std::string> out;
    // A bad option: named and left out, or the end of it all.
    auto bad = [&](const std::string &name, const std::string &why) {
        if (dropped) { dropped->push_back(name + " (" + why + ")"); return true; }
        err = "job option " + name + ": " + why;
        return false;
    };
    for (const auto &[k, v] : opts) {
        const Option *o = option(std::string_view(k.data(), k.size()));
        const std::string name = std::string(k).substr(0, 64);
        if (!o) { if (bad(name, "not one a requeue carries")) continue; return {}; }
        if (o->kind == Kind::flag) {
            if (!v.is_bool()) { if (bad(name, "expected true or false")) continue; return {}; }
            if (v.as_bool()) out.push_back(o->sbatch);
            continue;
        }
        if (!v.is_string()) { if (bad(name, "expected a string")) continue; return {}; }
        const std::string s(v.as_string());
        if (name == "exclusive" && s.empty()) { out.push_back("--exclusive"); continue; }
        bool good = false;
        switch (o->kind) {
        case Kind::number: good = (name == "nice" ? parse_int(s, -2147483645LL, 2147483645LL) : parse_int(s, 0, 1LL << 40)).has_value(); break;
        case Kind::word: good = word_ok(s); break;
        // Free text is the user's as Slurm took it (a name may hold a
        // newline): one argv element, never through a shell; no NUL.
        case Kind::text: good = !s.empty() && s.size() <= 1024 && s.find('\0') == std::string::npos; break;
        case Kind::path: good = !s.empty() && s.size() <= 4096 && s[0] == '/' && !has_control_chars(s); break;
        case Kind::flag: break;
        }
        if (!good) { if (bad(name, "malformed value")) continue; return {}; }
        out.push_back(std::string(o->sbatch) + "=" + s);
    }
    return out;
}

}  // namespace shardnet::broker
