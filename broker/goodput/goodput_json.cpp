#include "broker/goodput/goodput_json.hpp"

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cstdlib>
#include <string_view>

namespace shardnet::broker::goodput {

namespace json = boost::json;

namespace {

constexpr std::array<std::string_view, 12> kRead = {"PENDING", "RUNNING", "ATTEMPT", "RECOVERED", "FAULT", "RECOVERING", "RESTARTED",
                                                     "SEALED", "SUCCEEDED", "FAILED", "CANCELLED", "MOVED"};

long long number_after(std::string_view text, std::string_view word) {
    const auto at = text.rfind(word);
    if (at == std::string_view::npos) return 0;
    return std::atoll(std::string(text.substr(at + word.size())).c_str());
}

// The attempt an event names: its evidence's "attempt", a decision's id
// ("B:RUN/attempt-N"), or its cause ("attempt N submitted ...").
long long attempt_of(const json::object *e, std::string_view cause) {
    if (e) {
        if (const auto *a = e->if_contains("attempt"); a && a->is_int64()) return a->as_int64();
        if (const auto *d = e->if_contains("decision"); d && d->is_string())
            if (long long n = number_after(d->as_string(), "/attempt-"); n > 0) return n;
    }
    if (cause.starts_with("attempt ")) return number_after(cause.substr(0, cause.find(' ', 8)), "attempt ");
    return 0;
}

std::string text_of(const json::object *e, std::string_view key) {
    if (!e) return {};
    const auto *v = e->if_contains(key);
    return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

json::value or_null(double v) { return v > 0 ? json::value(v) : json::value(nullptr); }

}  // namespace

std::optional<Mark> mark_of_event(const std::string &kind, double time, const std::string &cause, const std::string &evidence) {
    if (std::find(kRead.begin(), kRead.end(), kind) == kRead.end()) return std::nullopt;
    json::error_code ec;
    const json::value v = json::parse(evidence, ec);
    const json::object *e = !ec && v.is_object() ? &v.as_object() : nullptr;
    // A straggler's swap (RESTARTED naming a straggler) answers no FAULT:
    // its relaunch is training time, not a fault's recovery.
    if (kind == "RESTARTED" && e && e->contains("straggler")) return std::nullopt;
    Mark m{kind == "SEALED" ? "SEAL" : kind, time, attempt_of(e, cause), 0, {}, cause};
    if (kind == "SEALED") m.cause = text_of(e, "checkpoint");
    if (kind == "FAULT") {
        m.node = text_of(e, "node");
        if (const auto *s = e ? e->if_contains("last_seen") : nullptr; s && s->is_number()) m.failed_at = s->to_number<double>();
    }
    return m;
}

json::object to_json(const Goodput &g) {
    json::array faults;
    double redone = 0, detection = 0, placement = 0, queue_wait = 0, restart = 0;
    for (const auto &f : g.faults) {
        redone += f.redone, detection += f.detection, placement += f.placement, queue_wait += f.queue_wait, restart += f.restart;
        faults.push_back(json::object{
            {"attempt", f.attempt}, {"node", f.node}, {"cause", f.cause}, {"failed_at", f.failed_at}, {"fault_at", f.fault_at},
            {"resumed_from", f.resumed_from ? json::value(*f.resumed_from) : json::value(nullptr)}, {"in_job", f.in_job},
            {"next_attempt", f.next_attempt > 0 ? json::value(f.next_attempt) : json::value(nullptr)},
            {"recovered_at", or_null(f.recovered_at)},
            {"lost", json::object{{"redone", f.redone}, {"detection", f.detection}, {"placement", f.placement},
                                  {"queue_wait", f.queue_wait}, {"restart", f.restart}, {"total", f.total()}}}});
    }
    return json::object{
        {"definition", "doc/goodput.md"}, {"start", or_null(g.start)}, {"end", g.ended ? json::value(g.end) : json::value(nullptr)},
        {"as_of", g.end}, {"wall", g.wall}, {"productive", g.productive}, {"unsealed", g.unsealed}, {"ratio", g.ratio()},
        {"lost", json::object{{"startup", g.startup}, {"redone", redone}, {"detection", detection}, {"placement", placement},
                              {"queue_wait", queue_wait}, {"restart", restart}, {"not_kept", g.not_kept},
                              {"unattributed", g.unattributed}, {"total", g.lost()}}},
        {"faults", std::move(faults)}};
}

void MarkLog::add(long long event_id, Mark m) {
    last_id = std::max(last_id, event_id);
    const bool seal = m.kind == "SEAL";
    if (seal && seals_run >= 2 && marks.back().attempt == m.attempt) {
        marks.back() = std::move(m);   // the run's middle seal goes; its last is the new one
        return;
    }
    seals_run = seal && seals_run > 0 && marks.back().attempt == m.attempt ? seals_run + 1 : seal ? 1 : 0;
    marks.push_back(std::move(m));
}

}  // namespace shardnet::broker::goodput
