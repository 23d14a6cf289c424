#include "broker/slurm/slurm_json.hpp"

#include <boost/json.hpp>
#include <string_view>

#include "common/json_fields.hpp"

namespace shardnet::broker {

namespace json = boost::json;

namespace {

// The data_parser version that wrote an answer: 22.05 names its OpenAPI
// plugin (meta.plugin.type "openapi/v0.0.38"), 24.11 its data_parser
// (meta.plugin.data_parser "data_parser/v0.0.42"). "" when it names neither.
std::string parser_of(const json::object &doc) {
    auto *meta = doc.if_contains("meta");
    const json::object *m = meta ? meta->if_object() : nullptr;
    const json::value *plugin = m ? m->if_contains("plugin") : nullptr;
    const json::object *p = plugin ? plugin->if_object() : nullptr;
    if (!p) return "";
    auto named = [p](const char *key, std::string_view prefix) -> std::string {
        auto *v = p->if_contains(key);
        if (!v || !v->is_string()) return "";
        std::string_view s = v->as_string();
        return s.starts_with(prefix) ? std::string(s.substr(prefix.size())) : "";
    };
    if (std::string v = named("data_parser", "data_parser/"); !v.empty()) return v;
    return named("type", "openapi/");
}

// The versions read, each with captured fixtures (tests/fixtures/slurm/).
enum class Shape { v0038, numbers_as_objects };
bool shape_of(const std::string &parser, Shape &out) {
    if (parser == "v0.0.38") { out = Shape::v0038; return true; }
    if (parser == "v0.0.42") { out = Shape::numbers_as_objects; return true; }
    return false;
}

// {set, infinite, number}: Slurm's number that may be unset or infinite.
bool is_number_object(const json::object &o) {
    auto *set = o.if_contains("set");
    auto *number = o.if_contains("number");
    return set && set->is_bool() && number && number->is_number() && o.size() <= 3;
}

json::value number_of(const json::object &o) {
    if (auto *inf = o.if_contains("infinite"); inf && inf->is_bool() && inf->as_bool()) return json::value(4294967295ULL);
    if (!o.at("set").as_bool()) return nullptr;
    return o.at("number");
}

}  // namespace

std::string job_state_word(const json::array &states) {
    // Slurm's job_state_string(): the first of these flags that is set,
    // else the base state.
    static constexpr std::string_view kFlags[] = {"COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED",
                                                  "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING"};
    static constexpr std::string_view kBase[] = {"PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
                                                 "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"};
    auto has = [&](std::string_view word) {
        for (const auto &s : states)
            if (s.is_string() && s.as_string() == word) return true;
        return false;
    };
    for (auto f : kFlags)
        if (has(f)) return std::string(f);
    for (auto b : kBase)
        if (has(b)) return std::string(b);
    return "";
}

std::string job_record_as_v0038(json::object &job) {
    for (auto &kv : job)
        if (auto *o = kv.value().if_object(); o && is_number_object(*o)) kv.value() = number_of(*o);
    if (auto *s = job.if_contains("job_state")) {
        if (!s->is_array()) return "job_state: expected a list of state and flags";
        std::string word = job_state_word(s->as_array());
        if (word.empty()) return "job_state: no state this broker knows in " + json::serialize(*s);
        *s = word;
    }
    // Unset where 22.05 printed null: thread_spec's and core_spec's
    // NO_VAL16 less the thread flag (32766), profile's ["NOT_SET"].
    for (const char *k : {"thread_spec", "core_spec"})
        if (auto *v = job.if_contains(k); v && v->is_number() && v->to_number<double>() == 32766) *v = nullptr;
    if (auto *p = job.if_contains("profile"); p && p->is_array() && p->as_array().size() == 1 && p->as_array()[0] == "NOT_SET")
        *p = nullptr;
    // tres_per_task: newer Slurm also records --cpus-per-task there
    // ("cpu=1"); it is carried as cpus_per_task, which says the same.
    if (auto *t = job.if_contains("tres_per_task"); t && t->is_string()) {
        std::string kept;
        std::string_view all = t->as_string();
        while (!all.empty()) {
            const auto comma = all.find(',');
            const std::string_view one = all.substr(0, comma);
            if (!one.starts_with("cpu=")) kept += (kept.empty() ? "" : ",") + std::string(one);
            all = comma == std::string_view::npos ? std::string_view{} : all.substr(comma + 1);
        }
        if (kept.empty()) *t = nullptr;
        else *t = kept;
    }
    // shared: a list of one word (or none) where 22.05 printed the word.
    if (auto *s = job.if_contains("shared"); s && s->is_array()) {
        std::string words;
        for (const auto &w : s->as_array())
            if (w.is_string()) words += (words.empty() ? "" : ",") + std::string(w.as_string());
        if (words.empty()) *s = nullptr;
        else *s = words;
    }
    return "";
}

std::string read_squeue_json(const std::string &text, SlurmJobs &out) {
    // Slurm writes a job's strings (its name, comment, paths, --export
    // values) as the bytes it was given, so one job of any user can make
    // the answer invalid UTF-8: read as bytes here, made valid per record
    // (valid_utf8_record), never refused whole.
    json::error_code ec;
    json::parse_options bytes;
    bytes.allow_invalid_utf8 = true;
    json::value v = json::parse(text, ec, {}, bytes);
    if (ec || !v.is_object()) return "squeue --json did not answer a JSON object";
    auto &doc = v.as_object();
    const std::string parser = parser_of(doc);
    Shape shape;
    if (!shape_of(parser, shape))
        return parser.empty() ? "squeue --json: the answer names no data_parser version (meta.plugin)"
                              : "squeue --json: data_parser " + parser + " is not a version this broker reads (v0.0.38, v0.0.42)";
    auto *jobs = doc.if_contains("jobs");
    if (!jobs || !jobs->is_array()) return "squeue --json: no jobs array";
    out.parser = parser;
    out.jobs = std::move(jobs->as_array());
    out.numbers_as_objects = shape == Shape::numbers_as_objects;
    return "";
}

std::vector<std::string> valid_utf8_record(json::object &job) {
    std::vector<std::string> changed;
    for (auto &kv : job)
        if (make_strings_valid_utf8(kv.value())) changed.push_back(valid_utf8(kv.key()));
    return changed;
}

std::string SlurmJobs::record(json::object &job) const {
    if (!numbers_as_objects) return "";
    if (std::string err = job_record_as_v0038(job); !err.empty()) return "squeue --json (" + parser + "): job field " + err;
    return "";
}

}  // namespace shardnet::broker
