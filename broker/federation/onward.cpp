#include "broker/federation/onward.hpp"

#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <cmath>

#include "broker/peers/peer_reader.hpp"
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
    if (!rd.integer(*o, "id", path, 1, 1LL << 53, id) || !time_of(rd, *o, "time", path, time, true) || !rd.name(*o, "kind", path, kind))
        return false;
    // A long cause (a placement on many nodes) is cut, not the story refused.
    const json::value *cv = rd.get(*o, "cause", path, true);
    if (!cv) return false;
    if (!cv->is_string()) return rd.fail(path + ".cause", "expected a string");
    const json::string &text = cv->get_string();
    std::size_t cut = std::min<std::size_t>(text.size(), kPeerTextMax);
    if (cut < text.size())   // at a character's start, never inside one
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
    cause.assign(text.data(), cut);
    if (cut < text.size()) cause += "...";
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

bool run_row(Reader &rd, const json::object &given, const std::string &want, json::object &out) {
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
    if (id != want) return rd.fail("run.id", "the story of another run (" + id.substr(0, 64) + ")");
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

PeerStory parse_peer_story(const HttpResponse &r, const std::string &want) {
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
    long long omitted = 0;
    const json::value *rv = o ? rd.get(*o, "run", "", true) : nullptr;
    if (rv && !rv->is_object()) rd.fail("run", "expected an object");
    else if (rv && run_row(rd, rv->get_object(), want, run)) {
        if (const json::array *a = rd.array(*o, "events", "", kStoryEventsMax, true)) {
            for (std::size_t i = 0; i < a->size(); ++i) {
                json::object ev;
                if (!event_row(rd, (*a)[i], item("events", i), ev)) break;
                events.push_back(std::move(ev));
            }
        }
        if (rd.err.empty()) rd.integer(*o, "omitted", "", 0, 1LL << 53, omitted, false);
    }
    if (!rd.err.empty()) {
        s.error = "bad answer: " + rd.err;
        return s;
    }
    s.story = json::object{{"run", std::move(run)}, {"events", std::move(events)}, {"omitted", omitted}};
    return s;
}

json::object OnwardViews::view(const std::string &run, const MovedTo &moved, const PeerAddress &peer, double now, bool full) {
    const std::string key = peer.name + "/" + run;
    std::shared_ptr<const std::string> story;
    json::object o{{"broker", peer.name}, {"attempt", moved.attempt}, {"job", moved.job}};
    {
        std::lock_guard<std::mutex> lock(mu_);
        trim(now);
        Entry &e = kept_[key];
        e.read = now;
        const auto backoff = failed_until_.find(peer.name);
        const bool resting = backoff != failed_until_.end() && backoff->second > now;
        if (!e.asking && !resting && now - e.tried >= max_age_) {
            e.asking = true;
            e.tried = now;
            boost::asio::post(pool_, [this, run, peer, now] { refresh(run, peer, now); });
        }
        o["status"] = e.status;
        o["as_of"] = e.at > 0 ? json::value(e.at) : json::value(nullptr);
        if (!e.error.empty()) o["error"] = e.error;
        story = e.story;
    }
    if (!story) return o;
    // Parsed for this answer only (what is kept is text, bounded in all).
    json::error_code ec;
    json::value v = json::parse(*story, ec);
    if (ec || !v.is_object()) return o;
    for (auto &[k, x] : v.as_object()) o[k] = std::move(x);
    // A plain read gets the newest few events; the dashboard's view all.
    if (!full)
        if (auto *evs = o.if_contains("events"); evs && evs->is_array() && evs->as_array().size() > 5) {
            json::array &a = evs->as_array();
            o["omitted"] = o["omitted"].to_number<long long>() + (long long)a.size() - 5;
            a.erase(a.begin(), a.end() - 5);
        }
    return o;
}

void OnwardViews::refresh(const std::string &run, const PeerAddress &peer, double now) {
    HttpRequest r;
    r.method = "GET";
    r.url = peer.url + "/v1/runs/" + run + "/story";
    r.bearer = peer.token;
    r.ca_file = peer.ca_file;
    r.timeout_ms = 1500;
    r.max_body = kStoryBodyMax;
    PeerStory s = parse_peer_story(link_.send(r), run);
    std::lock_guard<std::mutex> lock(mu_);
    Entry &e = kept_[peer.name + "/" + run];
    e.asking = false;
    if (e.read == 0) e.read = now;
    if (s.error.empty()) {
        auto text = std::make_shared<const std::string>(json::serialize(s.story));
        bytes_ -= e.story ? e.story->size() : 0;
        bytes_ += text->size();
        e.story = std::move(text);
        e.at = now;
        e.status = "ok";
        e.error.clear();
        failed_until_.erase(peer.name);
    } else {
        // What was read before stays, said to be as of then; the peer rests.
        e.status = s.error.rfind("bad answer", 0) == 0 ? "bad answer" : "unreachable";
        e.error = "broker " + peer.name + ": " + s.error;
        failed_until_[peer.name] = now + kPeerBackoff;
    }
    trim(now);
}

void OnwardViews::trim(double now) {
    // Stories nobody viewed for a while go; then the least recently viewed,
    // until what is kept fits.
    for (auto it = kept_.begin(); it != kept_.end();) {
        if (!it->second.asking && now - it->second.read > kForgetAfter) {
            bytes_ -= it->second.story ? it->second.story->size() : 0;
            it = kept_.erase(it);
        } else {
            ++it;
        }
    }
    while (bytes_ > kKeptBytes) {
        auto oldest = kept_.end();
        for (auto it = kept_.begin(); it != kept_.end(); ++it)
            if (it->second.story && !it->second.asking && (oldest == kept_.end() || it->second.read < oldest->second.read)) oldest = it;
        if (oldest == kept_.end()) break;
        bytes_ -= oldest->second.story->size();
        kept_.erase(oldest);
    }
}

}  // namespace shardnet::broker
