// A peer broker on the wire, as one interface: one request, one answer,
// never an exception (a failure is an answer with status 0 and the reason).
// The service holds a PeerLink&, so that forwarding, the capacity fan-out
// and their retries are unit-tested against a fake
// (tests/unit/fake_peers.hpp); the real one is libcurl's (CurlPeerLink).
#pragma once
#include <string>

#include "common/http_client.hpp"

namespace shardnet::broker {

class PeerLink {
public:
    virtual ~PeerLink() = default;
    // Called from several threads at once.
    virtual HttpResponse send(const HttpRequest &req) = 0;
};

// libcurl: one connection kept alive per calling thread.
class CurlPeerLink final : public PeerLink {
public:
    HttpResponse send(const HttpRequest &req) override;
};

}  // namespace shardnet::broker
