// Who may act for a run (refusals.cpp): a derived worker token's job against
// the run's record, and the run ids that are a job's own.
#pragma once
#include <string>

#include "broker/config/config.hpp"
#include "broker/runs/registry.hpp"
#include "broker/trust/auth.hpp"

namespace shardnet::broker {

// Why a derived worker token (who) may not report for attempt of a run
// (info: null when the run is new), or "". See doc/trust-model.md.
std::string refuse_worker(const RunInfo *info, const std::string &run, const TokenEntry &who, long long attempt,
                          const BrokerConfig &cfg);
// "" or why a client may not create run id (a job's default id on one of
// cfg's clusters).
std::string reserved_run_id(const std::string &id, const BrokerConfig &cfg);

// Whether who may see run (its record info, or null when there is none):
// an admin, the run's owner, or the run's own job while it is its user's.
bool may_see(const TokenEntry &who, const std::string &run, const RunInfo *info);

namespace detail {
// The account name of uid on this host ("uid:N" when it has none).
std::string user_name(long long uid);
// The home directory of uid on this host ("" when it has none).
std::string home_of(long long uid);
// The uid of an account on this host, or -1.
long long user_uid(const std::string &name, long long *gid = nullptr);
}  // namespace detail

}  // namespace shardnet::broker
