// One new worker at a time is counted against its job's cap (detector's
// admission): held from the count until the worker is in the table.
#pragma once
#include <mutex>

namespace shardnet::broker {

class AdmissionLock {
public:
    std::unique_lock<std::mutex> hold() { return std::unique_lock<std::mutex>(admit_mu_); }

private:
    std::mutex admit_mu_;
};

}  // namespace shardnet::broker
