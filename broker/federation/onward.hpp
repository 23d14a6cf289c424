// Where a run went after it left this broker. The peer that took it tells
// its story (GET /v1/runs/ID/story there: its state, attempts and events),
// read here as untrusted input, rebuilt with bounded sizes and kept as text,
// so that this broker's run page, GET /v1/runs/ID and `shard show` follow a
// moved run without asking the peer on every read. A read never waits for
// the peer: it gets what is kept, and a fetch runs in the background (one at
// a time, a peer that failed left alone for a while).
#pragma once
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "broker/peers/peer_link.hpp"
#include "common/http_client.hpp"

namespace shardnet::broker {

inline constexpr std::size_t kStoryFirstEvents = 200;     // a story's first events (the recovery that brought it)...
inline constexpr std::size_t kStoryLastEvents = 800;      // ...and its newest
inline constexpr std::size_t kStoryEventsMax = kStoryFirstEvents + kStoryLastEvents;
inline constexpr std::size_t kStoryEvidenceMax = 4 << 10;  // one event's evidence, as JSON text
inline constexpr std::size_t kStoryBodyMax = 1 << 20;      // a story's answer

// A story as the peer answered it, rebuilt; error: why it cannot be read
// ("events[3].kind: expected a word of A-Z and _").
struct PeerStory {
    std::string error;
    boost::json::object story;   // {run: {...}, events: [...], omitted}
};
// run: the run asked for (the story must be of it).
PeerStory parse_peer_story(const HttpResponse &r, const std::string &run);

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
    ~OnwardViews() { pool_.join(); }
    // The run's onward view: {broker, attempt, job, status, as_of, error?,
    // run?, events?, omitted?} (events: the newest few only, unless full).
    // status: "ok" (as the peer told it at as_of), "unreachable" / "bad
    // answer" (with the last story read, if any), or "asking" (nothing read
    // yet). Never waits: a story older than max_age is asked for in the
    // background.
    boost::json::object view(const std::string &run, const MovedTo &moved, const PeerAddress &peer, double now, bool full);
    // Asks the peer now (blocks up to its timeout): what view()'s
    // background fetch runs; public for tests.
    void refresh(const std::string &run, const PeerAddress &peer, double now);

private:
    struct Entry {
        double at = 0, tried = 0, read = 0;   // last story read; last ask; last view of it
        std::shared_ptr<const std::string> story;   // the rebuilt story, serialized
        std::string status = "asking", error;
        bool asking = false;
    };
    static constexpr std::size_t kKeptBytes = 16 << 20;   // stories kept, in all
    static constexpr double kForgetAfter = 600;           // a story not viewed for this long goes
    static constexpr double kPeerBackoff = 10;            // a peer that failed is not asked again for this long
    void trim(double now);   // under mu_
    PeerLink &link_;
    const double max_age_;
    std::mutex mu_;
    std::map<std::string, Entry> kept_;           // by peer and run
    std::map<std::string, double> failed_until_;   // by peer
    std::size_t bytes_ = 0;
    boost::asio::thread_pool pool_{1};   // the fetches, one at a time
};

}  // namespace shardnet::broker
