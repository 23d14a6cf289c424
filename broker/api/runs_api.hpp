// The runs resource (api/runs.cpp, views.cpp, environment_api.cpp): a run
// created, listed, read, cancelled; its events, one page or a stream (with
// the streams' budget it owns); the submitter's environment kept for later
// attempts; the dashboard's read-only joins. Handlers parse, ask the
// registry, the store or a module, and render.
#pragma once
#include <unordered_map>
#include <memory>
#include <string>

#include "broker/api/stream_budget.hpp"
#include "broker/goodput/goodput_json.hpp"
#include "broker/util/lru_map.hpp"
#include "broker/core/hooks.hpp"
#include "broker/core/module.hpp"
#include "broker/recovery/job_environment.hpp"

namespace shardnet::broker {

class Receipts;
class Onward;

class RunsApi : Module {
public:
    RunsApi(Core &core, Receipts &receipts, Onward &onward, const ServiceHooks &hooks)
        : Module(core), receipts_(receipts), onward_(onward), hooks_(hooks) {}

    // POST /v1/runs, GET /v1/runs, GET /v1/runs/{id}, POST /v1/runs/{id}/cancel.
    void create(const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now);
    void list(const TokenEntry &who, const Reply &reply);
    void get(const std::string &id, const TokenEntry &who, const Reply &reply);
    void cancel(const std::string &id, const TokenEntry &who, const Reply &reply, double now);
    // GET /v1/runs/{id}/events: one page (after, limit).
    void events(const std::string &id, const std::string &query, const TokenEntry &who, const Reply &reply);
    // GET /v1/runs/{id}/events?follow=1: a stream (ApiResponse::stream) of
    // the run's events after `after` (or Last-Event-ID), then every new one.
    void follow(const std::string &id, const std::string &query, const std::string &last_event_id, const TokenEntry &who,
                const Reply &reply);
    // POST /v1/runs/{id}/environment: the submitter's environment, kept
    // root-only for the run's later attempts (environment_api.cpp).
    void keep_environment(const std::string &id, const ApiRequest &req, const TokenEntry &who, const Reply &reply);
    // GET /v1/views/runs[/{id}]: read-only joins for the dashboard (views.cpp).
    void view(const std::string &id, const TokenEntry &who, const Reply &reply);
    // Event streams open now (the drain's log line, the metrics).
    int open_streams() const { return streams_->open(); }

private:
    // A stream's backlog after event id `after`, one page; the last page
    // registers it for live events (store thread: no gap, no repeat).
    void backlog_page(const std::string &run, long long after, const std::shared_ptr<EventSink> &sink);

    Receipts &receipts_;
    Onward &onward_;
    const ServiceHooks &hooks_;
    std::shared_ptr<StreamBudget> streams_ = std::make_shared<StreamBudget>();
    // Each run's goodput marks read so far (goodput/goodput_json.hpp), so
    // that a run's page reads only its new events. Touched on the store
    // thread only (one thread: no lock); at most kGoodputRuns runs kept,
    // the one read longest ago dropped first.
    static constexpr std::size_t kGoodputRuns = 1024;
    LruMap<goodput::MarkLog> goodput_marks_{kGoodputRuns};
};

}  // namespace shardnet::broker
