// A run's story across brokers (federation/onward_module.hpp).
#include "broker/federation/onward_module.hpp"

#include <algorithm>
#include <boost/json.hpp>

#include "broker/core/api_util.hpp"
#include "broker/store/store.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void Onward::story(const std::string &id, const TokenEntry &who, const Reply &reply) {
    json::object run;
    bool exists = false;
    {
        auto runs = runs_.read();
        if (auto it = runs.find(id); it != runs.end()) {
            exists = true;
            const RunInfo &info = it->second;
            auto job = info.jobs.find(info.attempt);
            json::array attempts;
            for (const auto &[n, j] : info.jobs)
                attempts.push_back(json::object{{"attempt", n}, {"cluster", j.cluster}, {"job", j.job}, {"world", j.world}});
            run = json::object{{"id", id}, {"state", state_name(info.state)}, {"attempt", info.attempt},
                               {"cluster", job != info.jobs.end() ? json::value(job->second.cluster) : json::value(nullptr)},
                               {"job", job != info.jobs.end() ? json::value(job->second.job) : json::value(nullptr)},
                               {"attempts", std::move(attempts)}};
        }
    }
    // A peer reads only runs it took from this broker or handed to it; a
    // run that is missing takes the same path to the same 404.
    on_store(reply, [this, id, exists, run = std::move(run), peer = who.scope == Scope::peer ? who.name : std::string()](const Reply &reply) mutable {
        const bool may = peer.empty() || store_->decisions().story_peer(id, peer);
        if (!may || !exists) return reply(error_response(404, "no_run", "no run " + id));
        // The first events (the recovery that brought the run) and the newest.
        const long long all = store_->count_events(id);
        std::vector<EventRow> rows = store_->list_events(id, 0, int(all > (long long)kStoryEventsMax ? kStoryFirstEvents : kStoryEventsMax));
        long long omitted = 0;
        if (all > (long long)kStoryEventsMax) {
            const auto last = store_->last_events(id, int(kStoryLastEvents));
            omitted = all - (long long)rows.size() - (long long)last.size();
            rows.insert(rows.end(), last.begin(), last.end());
        }
        json::array events;
        for (const auto &e : rows) {
            json::object o = event_object(e);
            if (!o.at("evidence").is_object()) o["evidence"] = json::object{};
            events.push_back(std::move(o));
        }
        const std::string sealed = store_->seals().last_checkpoint(id);
        run["last_sealed"] = sealed.empty() ? json::value(nullptr) : json::value(sealed);
        const auto t = store_->run_times(id);
        run["updated"] = t ? json::value(t->second) : json::value(nullptr);
        reply(ok_json(200, json::object{{"broker", cfg_.broker_name}, {"run", std::move(run)}, {"events", std::move(events)},
                                        {"omitted", omitted}}));
    });
}

void Onward::reply_with(const std::string &id, json::object answer, const char *key, const Reply &reply, bool full) {
    auto *run = *key ? answer.if_contains(key) : nullptr;
    const json::object &r = run && run->is_object() ? run->get_object() : answer;
    const json::value *state = r.if_contains("state");
    if (!state || !state->is_string() || state->get_string() != state_name(RunState::moved))
        return reply(ok_json(200, answer));
    // Where it went is the store's; what became of it, the peer's as last
    // read (never waited for: onward.hpp).
    on_store(reply, [this, id, answer = std::move(answer), key, full](const Reply &reply) mutable {
        auto moved = store_->decisions().moved_to(id);
        if (!moved) return reply(ok_json(200, answer));
        post_answering(query_pool_, "onward", reply, [this, id, answer = std::move(answer), key, full, moved = *moved](const Reply &reply) mutable {
            auto p = std::find_if(cfg_.peers.begin(), cfg_.peers.end(), [&](const auto &x) { return x.name == moved.peer; });
            json::object onward;
            if (p == cfg_.peers.end())
                onward = json::object{{"broker", moved.peer}, {"attempt", moved.attempt}, {"job", moved.job}, {"status", "unreachable"},
                                      {"as_of", nullptr}, {"error", "broker " + moved.peer + " is no longer one of this broker's peers"}};
            else
                onward = views_->view(id, MovedTo{moved.peer, moved.attempt, moved.job}, PeerAddress{p->name, p->url, p->token, p->ca_file},
                                       wall_now(), full);
            json::object &target = *key ? answer[key].as_object() : answer;
            target["onward"] = std::move(onward);
            reply(ok_json(200, answer));
        });
    });
}

}  // namespace shardnet::broker
