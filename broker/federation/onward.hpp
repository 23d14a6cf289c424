// Where a run went after it left this broker. The peer that took it tells
// its story (GET /v1/runs/ID/story there: its state, attempts and events),
// read here as untrusted input, rebuilt with bounded sizes, and kept a few
// seconds, so that this broker's run page, GET /v1/runs/ID and `shard show`
// follow a moved run without asking the peer on every read.
#pragma once
#include <boost/json/object.hpp>
#include <map>
#include <mutex>
#include <string>

#include "broker/federation/peer_link.hpp"
#include "common/http_client.hpp"

namespace shardnet::broker {

inline constexpr std::size_t kStoryEventsMax = 2000;        // events in one story
inline constexpr std::size_t kStoryEvidenceMax = 16 << 10;   // one event's evidence, as JSON text

// A story as the peer answered it, rebuilt; error: why it cannot be read
// ("events[3].kind: expected a word of A-Z and _").
struct PeerStory {
    std::string error;
    boost::json::object story;   // {run: {...}, events: [...], more}
};
PeerStory parse_peer_story(const HttpResponse &r);

// Where a decision of this broker's sent a run (the store's record).
struct MovedTo {
    std::string peer;
    long long attempt = 0, job = 0;
};

// The peer a run moved to, as one of this broker's peers is configured.
struct PeerAddress {
    std::string name, url, token, ca_file;
};

class OnwardViews {
public:
    explicit OnwardViews(PeerLink &link, double max_age = 2.0) : link_(link), max_age_(max_age) {}
    // The run's onward view: {broker, attempt, job, status, as_of, error?,
    // run?, events?, more?}. status: "ok" (as the peer told it at as_of),
    // "unreachable" / "bad answer" (with the last story read, if any), or
    // "asking" (another caller is asking and nothing was read yet). Asks the
    // peer when what is kept is older than max_age: it blocks up to the
    // peer's timeout, so it is called on a pool thread.
    boost::json::object view(const std::string &run, const MovedTo &moved, const PeerAddress &peer, double now);

private:
    struct Entry {
        double at = 0, tried = 0;   // last story read; last ask
        boost::json::object story;
        std::string status = "asking", error;
        bool asking = false;
    };
    static constexpr std::size_t kKept = 1024;   // runs whose views are kept
    PeerLink &link_;
    const double max_age_;
    std::mutex mu_;
    std::map<std::string, Entry> kept_;   // by peer and run
};

}  // namespace shardnet::broker
