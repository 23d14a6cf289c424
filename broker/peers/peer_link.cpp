#include "broker/peers/peer_link.hpp"

#include <exception>

namespace shardnet::broker {

HttpResponse CurlPeerLink::send(const HttpRequest &req) {
    HttpResponse res;
    try {
        // The forwarder's thread keeps its connection between decisions;
        // a capacity search's short-lived threads each make one.
        thread_local HttpClient client;
        res = client.send(req);
    } catch (const std::exception &e) {
        res = HttpResponse{};
        res.error = std::string("the request failed: ") + e.what();
    } catch (...) {
        res = HttpResponse{};
        res.error = "the request failed";
    }
    return res;
}

}  // namespace shardnet::broker
