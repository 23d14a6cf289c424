#include "sbatch-wrappers/failure_view.hpp"

#include <cstdio>
#include <ctime>
#include <vector>

#include "common/parse_util.hpp"

namespace shardnet::cli {

namespace json = boost::json;

namespace {

// Text a broker sent, made safe for a terminal: not UTF-8, C0 (but tab),
// DEL and C1 (U+009B is a CSI to some terminals) become '?'.
std::string terminal_safe(std::string_view s) {
    if (!is_valid_utf8(s)) return std::string(s.size(), '?');
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if ((c < 0x20 && c != '\t') || c == 0x7f) out += '?';
        else if (c == 0xc2 && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xe0) == 0x80) out += '?', ++i;
        else out += char(c);
    }
    return out;
}

const json::object *object_of(const json::value &v) { return v.is_object() ? &v.as_object() : nullptr; }

std::string string_at(const json::object &o, const char *k) {
    auto *v = o.if_contains(k);
    return v && v->is_string() ? std::string(v->as_string()) : "";
}

std::string tail_of(const json::object &event) {
    auto *ev = event.if_contains("evidence");
    return ev && ev->is_object() ? string_at(ev->as_object(), "stderr_tail") : "";
}

}  // namespace

std::string render_failure(const json::value &answer) {
    const json::object *a = object_of(answer);
    auto *list = a ? a->if_contains("events") : nullptr;
    if (!list || !list->is_array()) return "";
    // The last FAILED event, and a STDERR event after it.
    const json::object *failed = nullptr;
    std::string tail;
    for (const auto &e : list->as_array()) {
        const json::object *o = object_of(e);
        if (!o) continue;
        const std::string kind = string_at(*o, "kind");
        if (kind == "FAILED") failed = o, tail = tail_of(*o);
        else if (kind == "STDERR" && failed && tail.empty()) tail = tail_of(*o);
    }
    if (!failed) return "";
    std::string out = "FAILED: " + terminal_safe(string_at(*failed, "cause")) + "\n";
    if (tail.empty()) return out;
    out += "  last lines of the batch script's standard error:\n";
    for (std::size_t pos = 0; pos <= tail.size();) {
        const auto nl = tail.find('\n', pos);
        out += "    | " + terminal_safe(std::string_view(tail).substr(pos, nl == std::string::npos ? std::string::npos : nl - pos)) + "\n";
        if (nl == std::string::npos) break;
        pos = nl + 1;
    }
    return out;
}

std::string render_onward(const json::value &run) {
    const json::object *r = object_of(run);
    auto *ov = r ? r->if_contains("onward") : nullptr;
    const json::object *o = ov ? object_of(*ov) : nullptr;
    if (!o) return "";
    auto number = [](const json::object &x, const char *k) {
        auto *v = x.if_contains(k);
        return v && v->is_int64() ? std::to_string(v->as_int64()) : std::string("?");
    };
    const std::string peer = terminal_safe(string_at(*o, "broker"));
    std::string out = "moved to broker " + peer + ": attempt " + number(*o, "attempt") + " as job " + number(*o, "job") + "\n";
    const json::value *there = o->if_contains("run");
    if (there && there->is_object()) {
        const json::object &t = there->as_object();
        out += "  there: " + terminal_safe(string_at(t, "state")) + ", attempt " + number(t, "attempt");
        if (auto c = string_at(t, "cluster"); !c.empty()) out += " on " + terminal_safe(c) + ", job " + number(t, "job");
        if (auto s = string_at(t, "last_sealed"); !s.empty()) out += ", last sealed " + terminal_safe(s);
        if (auto *at = o->if_contains("as_of"); at && at->is_number()) {
            const std::time_t t = std::time_t(at->to_number<double>());
            char when[32];
            std::tm tm{};
            if (gmtime_r(&t, &tm) && std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm)) out += std::string(" (as of ") + when + ")";
        }
        out += "\n";
        // Its latest events there, oldest first.
        if (auto *ev = o->if_contains("events"); ev && ev->is_array()) {
            const auto &list = ev->as_array();
            for (std::size_t i = list.size() > 5 ? list.size() - 5 : 0; i < list.size(); ++i)
                if (const json::object *e = object_of(list[i]))
                    out += "    " + terminal_safe(string_at(*e, "kind")) + ": " + terminal_safe(string_at(*e, "cause")) + "\n";
        }
    }
    const std::string status = string_at(*o, "status");
    if (status != "ok") out += "  " + (status == "asking" ? std::string("asking broker ") + peer + " now; show it again in a moment"
                                                          : "not read from broker " + peer + " now: " + terminal_safe(string_at(*o, "error"))) + "\n";
    return out;
}

namespace {

double number_at(const json::object &o, const char *k) {
    auto *v = o.if_contains(k);
    return v && v->is_number() ? v->to_number<double>() : 0;
}

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", s);
    return buf;
}

// "redone 40.0 s, detection 10.0 s, ..." of a "lost" object, in this order.
std::string lost_parts(const json::object &lost, bool whole_run) {
    static const char *const kRun[] = {"startup", "redone", "detection", "placement", "queue_wait", "restart", "not_kept", "unattributed"};
    std::string out;
    for (std::size_t i = whole_run ? 0 : 1; i < (whole_run ? 8 : 6); ++i) {
        const double v = number_at(lost, kRun[i]);
        if (whole_run && v == 0) continue;
        std::string name = kRun[i];
        if (auto u = name.find('_'); u != std::string::npos) name[u] = ' ';
        out += (out.empty() ? "" : ", ") + name + " " + seconds(v);
    }
    return out;
}

}  // namespace

std::string render_goodput(const json::value &run) {
    const json::object *r = object_of(run);
    auto *gv = r ? r->if_contains("goodput") : nullptr;
    const json::object *g = gv ? object_of(*gv) : nullptr;
    if (!g) return "";
    const json::object *lost = g->if_contains("lost") ? object_of(g->at("lost")) : nullptr;
    const double wall = number_at(*g, "wall"), start = number_at(*g, "start");
    char ratio[16];
    std::snprintf(ratio, sizeof ratio, "%.1f%%", 100 * number_at(*g, "ratio"));
    const bool live = !g->if_contains("end") || g->at("end").is_null();
    std::string out = std::string("goodput: ") + ratio + " (productive " + seconds(number_at(*g, "productive")) + " of " + seconds(wall) +
                      " wall" + (live ? ", so far" : "") + "; doc/goodput.md)\n";
    out += "  unsealed " + seconds(number_at(*g, "unsealed")) + (live ? " (since the last seal: at risk)" : "") + ", lost " +
           seconds(lost ? number_at(*lost, "total") : 0);
    if (lost && number_at(*lost, "total") > 0) out += ": " + lost_parts(*lost, true);
    out += "\n";
    auto *fv = g->if_contains("faults");
    if (!fv || !fv->is_array()) return out;
    int n = 0;
    for (const auto &f : fv->as_array()) {
        const json::object *o = object_of(f);
        if (!o) continue;
        const json::object *fl = o->if_contains("lost") ? object_of(o->at("lost")) : nullptr;
        auto *attempt = o->if_contains("attempt");
        auto *next = o->if_contains("next_attempt");
        auto *from = o->if_contains("resumed_from");
        out += "  fault " + std::to_string(++n) + ": attempt " + (attempt && attempt->is_int64() ? std::to_string(attempt->as_int64()) : "?") +
               ", " + terminal_safe(string_at(*o, "node")) + " failed at +" + seconds(number_at(*o, "failed_at") - start) + " (" +
               terminal_safe(string_at(*o, "cause")) + ")\n    ";
        out += o->if_contains("in_job") && o->at("in_job").is_bool() && o->at("in_job").as_bool() ? "relaunched in the job"
               : next && next->is_int64() ? "recovered by attempt " + std::to_string(next->as_int64())
                                          : std::string("not recovered yet");
        out += ", from " + (from && from->is_string() ? terminal_safe(from->as_string()) : std::string("the start")) + "; lost " +
               seconds(fl ? number_at(*fl, "total") : 0) + (fl ? " (" + lost_parts(*fl, false) + ")" : "") + "\n";
    }
    return out;
}

}  // namespace shardnet::cli
