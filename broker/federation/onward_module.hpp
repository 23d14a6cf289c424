// A run's story across brokers (federation/onward_api.cpp). GET
// /v1/runs/{id}/story answers the peer a run came from (or an admin): its
// state, attempts and events here, so that the broker it left tells where
// it went. And this broker's own answers about a run it moved (GET
// /v1/runs/{id}, the dashboard's view) carry "onward": the peer's story as
// OnwardViews (onward.hpp) keeps it, never waited for.
#pragma once
#include <boost/json/object.hpp>
#include <memory>
#include <string>

#include "broker/core/module.hpp"
#include "broker/federation/onward.hpp"

namespace shardnet::broker {

class Onward : Module {
public:
    explicit Onward(Core &core) : Module(core), views_(std::make_unique<OnwardViews>(*peers_)) {}
    // GET /v1/runs/{id}/story.
    void story(const std::string &id, const TokenEntry &who, const Reply &reply);
    // answer (at key of it, or answer itself when key is empty) with its
    // "onward" when the run moved. full: every event of the peer's story
    // (the dashboard's view), else the newest few.
    void reply_with(const std::string &id, boost::json::object answer, const char *key, const Reply &reply, bool full = false);

private:
    std::unique_ptr<OnwardViews> views_;   // moved runs' stories, as their peers tell them
};

}  // namespace shardnet::broker
