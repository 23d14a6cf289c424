// The checkpoints module: the ranks' commits and where a checkpoint is
// sealed (every rank of the attempt's world committed; its receipt is
// written in the seal's transaction), the run's checkpoints, and a sealed
// checkpoint's files (a few lists kept, list requests per token gated).
#pragma once
#include <boost/json/object.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "broker/core/module.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/seals/list_cache.hpp"
#include "broker/util/token_gate.hpp"

namespace shardnet::broker {

class Checkpoints : Module {
public:
    Checkpoints(Core &core, Receipts &receipts)
        : Module(core), receipts_(receipts), list_gate_(std::make_shared<TokenGate>(core.cfg_.list_requests_per_token)) {}

    // POST /v1/runs/{id}/checkpoints/{name}/commit (checkpoints/commit.cpp).
    void commit(const std::string &id, const std::string &name, const ApiRequest &req, const TokenEntry &who,
                const Reply &reply, double now);
    // GET /v1/runs/{id}/checkpoints[?after=SEQ][&limit=N | ?newest=N]: a
    // page of the run's seals in seal order, with the next page's after.
    void list_checkpoints(const std::string &id, const std::string &query, const TokenEntry &who, const Reply &reply);
    // A sealed checkpoint's files of one rank, as committed (checkpoints/sealed_files.cpp).
    void sealed_files(const std::string &id, const std::string &name, const std::string &query, const TokenEntry &who, const Reply &reply);

private:
    // Where a seal's list comes from (store thread): the answer's head, the
    // cache key and how to build it.
    struct SealedListSource {
        boost::json::object head;
        std::optional<Store::SealedListRow> recorded;
        long long ranks = 0;
        std::string key;
        std::function<std::shared_ptr<const sealed_list::Built>()> build;
    };
    bool find_sealed_list(const std::string &id, const std::string &name, SealedListSource &src, const Reply &reply);
    std::shared_ptr<const sealed_list::Built> sealed_list_of(const std::string &id, const std::string &name, const SealedListSource &src);

    Receipts &receipts_;
    // Sealed lists as served, a few kept (a seal never changes); list
    // requests in flight per token.
    std::unique_ptr<sealed_list::Cache> lists_ = std::make_unique<sealed_list::Cache>(8, 250000);
    std::shared_ptr<TokenGate> list_gate_;
};

}  // namespace shardnet::broker
