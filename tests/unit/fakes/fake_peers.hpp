// Peer brokers in memory, behind the broker's PeerLink interface
// (broker/peers/peer_link.hpp): each request is kept, each answer is
// what the test scripted for that URL (status 0: the peer is silent).
#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "broker/peers/peer_link.hpp"

namespace shardnet::broker::testing {

class FakePeers final : public PeerLink {
public:
    // url -> how that peer answers a request (default: silent).
    void on(const std::string &url, std::function<HttpResponse(const HttpRequest &)> fn) {
        std::lock_guard<std::mutex> lock(mu_);
        handlers_[url] = std::move(fn);
    }
    std::vector<HttpRequest> requests(const std::string &url = "") {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<HttpRequest> out;
        for (const auto &r : seen_)
            if (url.empty() || r.url == url) out.push_back(r);
        return out;
    }
    HttpResponse send(const HttpRequest &req) override {
        std::function<HttpResponse(const HttpRequest &)> fn;
        {
            std::lock_guard<std::mutex> lock(mu_);
            seen_.push_back(req);
            if (auto it = handlers_.find(req.url); it != handlers_.end()) fn = it->second;
        }
        if (fn) return fn(req);
        HttpResponse silent;
        silent.error = "Connection refused (fake peer)";
        return silent;
    }

private:
    std::mutex mu_;
    std::map<std::string, std::function<HttpResponse(const HttpRequest &)>> handlers_;
    std::vector<HttpRequest> seen_;
};

}  // namespace shardnet::broker::testing
