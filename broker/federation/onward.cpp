#include "broker/federation/onward.hpp"

#include <boost/json.hpp>
#include <cmath>

#include "broker/federation/peer_reader.hpp"
#include "broker/runs/run_state.hpp"
#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace peer_read;

namespace {

// An event kind or a state: A-Z and _ only (they become CSS classes and
// table cells on the dashboard).
bool is_word(std::string_view s) {
    if (s.empty() || s.size() > 32) return false;
    for (char c : s)
        if (!((c >= 'A' && c <= 'Z') || c == '_')) return false;
    return true;
}

bool time_of(Reader &rd, const json::object &o, const char *key, const std::string &path, double &out, bool required) {
    const json::value *v = rd.get(o, key, path, required);
    if (!v) return !required;
    if (!v->is_number()) return rd.fail(Reader::at(path, key), "expected a number");
    const double t = v->to_number<double>();
    if (!std::isfinite(t) || t < 0 || t > 1e11) return rd.fail(Reader::at(path, key), "expected a time (seconds since 1970)");
    out = t;
    return true;
}

bool attempt_row(Reader &rd, const json::value &v, const std::string &path, json::object &out) {
    const json::object *o = v.if_object();
    if (!o) return rd.fail(path, "expected an object");
    long long attempt = 0, job = 0, world = 0;
    std::string cluster;
    if (!rd.integer(*o, "attempt", path, 1, 1000000, attempt) || !rd.name(*o, "cluster", path, cluster) ||
        !rd.integer(*o, "job", path, 0, 1LL << 53, job) || !rd.integer(*o, "world", path, 0, 1 << 24, world, false))
        return false;
    out = json::object{{"attempt", attempt}, {"cluster", cluster}, {"job", job}, {"world", world}};
    return true;
}

bool event_row(Reader &rd, const json::value &v, const std::string &path, json::object &out) {
    const json::object *o = v.if_object();
    if (!o) return rd.fail(path, "expected an object");
    long long id = 0;
    double time = 0;
    std::string kind, cause;
    if (!rd.integer(*o, "id", path, 1, 1LL << 53, id) || !time_of(rd, *o, "time", path, time, true) || !rd.name(*o, "kind", path, kind) ||
        !rd.text(*o, "cause", path, cause))
        return false;
    if (!is_word(kind)) return rd.fail(path + ".kind", "expected a word of A-Z and _");
    // The evidence is shown as text, never acted on here: any object, but
    // not a large one (a peer cannot grow this broker's answers).
    json::value evidence = json::object{};
    if (const json::value *e = o->if_contains("evidence"); e && !e->is_null()) {
        if (!e->is_object())
            evidence = json::object{{"dropped", "evidence that is not an object"}};
        else if (json::serialize(*e).size() > kStoryEvidenceMax)
            evidence = json::object{{"dropped", "evidence larger than " + std::to_string(kStoryEvidenceMax) + " bytes"}};
        else
            evidence = *e;
    }
    out = json::object{{"id", id}, {"time", time}, {"kind", kind}, {"cause", cause}, {"evidence", std::move(evidence)}};
    return true;
}

bool run_row(Reader &rd, const json::object &given, json::object &out) {
    // null is "not known" (a run with no job yet, nothing sealed): as absent.
    json::object o;
    for (const auto &[k, v] : given)
        if (!v.is_null()) o[k] = v;
    std::string id, state, cluster, sealed;
    long long attempt = 0, job = 0;
    double updated = 0;
    if (!rd.name(o, "id", "run", id) || !rd.name(o, "state", "run", state) || !rd.integer(o, "attempt", "run", 1, 1000000, attempt) ||
        !rd.name(o, "cluster", "run", cluster, false) || !rd.integer(o, "job", "run", 0, 1LL << 53, job, false) ||
        !rd.name(o, "last_sealed", "run", sealed, false) || !time_of(rd, o, "updated", "run", updated, false))
        return false;
    if (!state_from_name(state)) return rd.fail("run.state", "not a run state");
    json::array attempts;
    if (const json::array *a = rd.array(o, "attempts", "run", kPeerListMax, false)) {
        for (std::size_t i = 0; i < a->size(); ++i) {
            json::object row;
            if (!attempt_row(rd, (*a)[i], item("run.attempts", i), row)) return false;
            attempts.push_back(std::move(row));
        }
    } else if (!rd.err.empty()) {
        return false;
    }
    out = json::object{{"id", id}, {"state", state}, {"attempt", attempt}, {"cluster", cluster.empty() ? json::value(nullptr) : json::value(cluster)},
                       {"job", job > 0 ? json::value(job) : json::value(nullptr)}, {"attempts", std::move(attempts)},
                       {"last_sealed", sealed.empty() ? json::value(nullptr) : json::value(sealed)},
                       {"updated", updated > 0 ? json::value(updated) : json::value(nullptr)}};
    return true;
}

}  // namespace

PeerStory parse_peer_story(const HttpResponse &r) {
    PeerStory s;
    if (r.too_large) {
        s.error = "body: " + r.error;
        return s;
    }
    if (!r.ok()) {
        s.error = r.status ? "HTTP " + std::to_string(r.status) : r.error.empty() ? std::string("no answer") : r.error;
        return s;
    }
    Reader rd;
    json::value v;
    const json::object *o = body_object(r.body, v, rd);
    json::object run;
    json::array events;
    bool more = false;
    const json::value *rv = o ? rd.get(*o, "run", "", true) : nullptr;
    if (rv && !rv->is_object()) rd.fail("run", "expected an object");
    else if (rv && run_row(rd, rv->get_object(), run)) {
        if (const json::array *a = rd.array(*o, "events", "", kStoryEventsMax, true)) {
            double last = 0;
            for (std::size_t i = 0; i < a->size(); ++i) {
                json::object ev;
                if (!event_row(rd, (*a)[i], item("events", i), ev)) break;
                // In the peer's order (its ids): a story out of order is not one.
                if (ev.at("time").as_double() + 1e-6 < last) { rd.fail(item("events", i) + ".time", "earlier than the event before it"); break; }
                last = ev.at("time").as_double();
                events.push_back(std::move(ev));
            }
        }
        if (rd.err.empty()) rd.boolean(*o, "more", "", more, false);
    }
    if (!rd.err.empty()) {
        s.error = "bad answer: " + rd.err;
        return s;
    }
    s.story = json::object{{"run", std::move(run)}, {"events", std::move(events)}, {"more", more}};
    return s;
}

json::object OnwardViews::view(const std::string &run, const MovedTo &moved, const PeerAddress &peer, double now) {
    const std::string key = peer.name + "/" + run;
    auto answer = [&](const Entry &e) {
        json::object o{{"broker", peer.name}, {"attempt", moved.attempt}, {"job", moved.job}, {"status", e.status},
                       {"as_of", e.at > 0 ? json::value(e.at) : json::value(nullptr)}};
        if (!e.error.empty()) o["error"] = e.error;
        for (const auto &[k, x] : e.story) o[k] = x;
        return o;
    };
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = kept_.find(key);
        if (it == kept_.end()) {
            // Bounded: the view asked for least recently is forgotten.
            if (kept_.size() >= kKept)
                kept_.erase(std::min_element(kept_.begin(), kept_.end(),
                                             [](const auto &a, const auto &b) { return a.second.tried < b.second.tried; }));
            it = kept_.emplace(key, Entry{}).first;
        }
        Entry &e = it->second;
        // One caller asks at a time; the others take what is kept.
        if (e.asking || now - e.tried < max_age_) return answer(e);
        e.asking = true;
        e.tried = now;
    }
    HttpRequest r;
    r.method = "GET";
    r.url = peer.url + "/v1/runs/" + run + "/story";
    r.bearer = peer.token;
    r.ca_file = peer.ca_file;
    r.timeout_ms = 1500;
    r.max_body = std::size_t(8) << 20;
    PeerStory s = parse_peer_story(link_.send(r));
    std::lock_guard<std::mutex> lock(mu_);
    Entry &e = kept_[key];
    e.asking = false;
    if (s.error.empty()) {
        e.story = std::move(s.story);
        e.at = now;
        e.status = "ok";
        e.error.clear();
    } else {
        // What was read before stays, said to be as of then.
        e.status = s.error.rfind("bad answer", 0) == 0 ? "bad answer" : "unreachable";
        e.error = "broker " + peer.name + ": " + s.error;
    }
    return answer(e);
}

}  // namespace shardnet::broker
