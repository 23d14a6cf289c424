// The broker's API v1 behind one signature: handle(request, reply). It does
// not know about sockets; the HTTP server feeds it and writes what it
// replies. Blocking work (SQLite) runs on the store's thread; reply() may
// be called from there.
#pragma once
#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "auth.hpp"
#include "config.hpp"
#include "store.hpp"
#include "workers.hpp"

namespace shardnet::broker {

struct ApiRequest {
    std::string method;   // "GET", "POST", ...
    std::string target;   // path and query
    std::string bearer;
    std::string body;
};

struct ApiResponse {
    unsigned status = 200;
    std::string body;
    std::string content_type = "application/json";
};

using Reply = std::function<void(ApiResponse)>;

class Service {
public:
    Service(const BrokerConfig &cfg, std::unique_ptr<Store> store);
    ~Service();

    void handle(ApiRequest req, const Reply &reply);
    // Detector: FAULT events for workers past their deadline. Called often.
    void tick(double now);
    // Soft state to the store (summaries), every summary_seconds.
    void summarise();
    // New tokens and limits from a reloaded config (listen address stays).
    void reload(const BrokerConfig &cfg);
    // Waits for the store's queue to empty (drain on SIGTERM).
    void drain();
    std::string metrics() const;

private:
    struct RunInfo {
        std::string owner, state;
        long long attempt = 1, world_size = 0;
    };
    using Json = std::string;

    void heartbeats(const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now);
    void create_run(const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now);
    void list_runs(const TokenEntry &who, const Reply &reply);
    void get_run(const std::string &id, const TokenEntry &who, const Reply &reply);
    void cancel_run(const std::string &id, const TokenEntry &who, const Reply &reply, double now);
    void list_events(const std::string &id, const std::string &query, const TokenEntry &who, const Reply &reply);
    void commit(const std::string &id, const std::string &name, const ApiRequest &req, const TokenEntry &who,
                const Reply &reply, double now);
    void list_checkpoints(const std::string &id, const TokenEntry &who, const Reply &reply);
    void put_node(const ApiRequest &req, const Reply &reply, double now);

    bool may_see(const TokenEntry &who, const std::string &run, const RunInfo *info) const;
    void on_store(std::function<void()> job);
    void event(const std::string &run, const std::string &kind, const std::string &cause, const Json &evidence,
               double now);

    BrokerConfig cfg_;
    std::unique_ptr<Store> store_;
    boost::asio::thread_pool store_thread_{1};
    std::shared_ptr<Auth> auth_;
    mutable std::shared_mutex auth_mu_;
    mutable std::shared_mutex runs_mu_;
    std::unordered_map<std::string, RunInfo> runs_;
    WorkerTable workers_;
    std::atomic<unsigned long long> n_requests_{0}, n_heartbeats_{0}, n_errors_{0}, n_faults_{0}, n_events_{0},
        n_seals_{0}, n_rate_limited_{0}, n_auth_failures_{0};
};

ApiResponse error_response(unsigned status, const std::string &code, const std::string &message,
                           const std::string &field = "");
double wall_now();

}  // namespace shardnet::broker
