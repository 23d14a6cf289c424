// Decisions from peer brokers (POST /v1/decisions, federation/inbox.cpp): a
// peer's decision is checked whole, then applied on the Slurm thread at most
// once per id: the local account, the placement, the kept environment, the
// job (recovery's Attempts), then the store and memory. A peer may start a
// run this broker does not know, or hand back one this broker moved to it;
// never take a run that lives here.
#pragma once
#include <optional>
#include <string>

#include "broker/core/hooks.hpp"
#include "broker/core/module.hpp"
#include "broker/inventory/inventory_module.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/recovery/attempts.hpp"

namespace shardnet::broker {

class Inbox : Module {
public:
    Inbox(Core &core, const ServiceHooks &hooks, Inventory &inventory, Receipts &receipts, Attempts &attempts)
        : Module(core), hooks_(hooks), inventory_(inventory), receipts_(receipts), attempts_(attempts) {}
    // POST /v1/decisions.
    void receive_decision(const ApiRequest &req, const TokenEntry &who, const Reply &reply);

private:
    struct IncomingDecision;   // a peer decision's body, checked
    struct Arrival;            // one applied, step by step
    // "" when a peer's decision may start or take back run at attempt to
    // for uid, else why not.
    std::string peer_may_take(const std::string &run, long long to, long long uid, const std::string &sender,
                              const std::optional<Store::MovedRow> &moved) const;

    const ServiceHooks &hooks_;
    Inventory &inventory_;
    Receipts &receipts_;
    Attempts &attempts_;
};

}  // namespace shardnet::broker
