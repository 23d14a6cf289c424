#include "sbatch-wrappers/failure_view.hpp"

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

}  // namespace shardnet::cli
