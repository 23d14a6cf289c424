// The forwarder thread's wake-up: a decision written for a peer wakes it
// (else it looks every 200 ms), the broker's stop ends its loop.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace shardnet::broker {

class ForwardSignal {
public:
    // Waits until woken, stopped or `most` passed: true once stopped.
    bool wait(std::chrono::milliseconds most) {
        std::unique_lock<std::mutex> lock(forward_mu_);
        forward_cv_.wait_for(lock, most, [this] { return stopping_; });
        return stopping_;
    }
    void wake() { forward_cv_.notify_all(); }
    void stop() {
        {
            std::lock_guard<std::mutex> lock(forward_mu_);
            stopping_ = true;
        }
        forward_cv_.notify_all();
    }

private:
    std::mutex forward_mu_;
    std::condition_variable forward_cv_;
    bool stopping_ = false;
};

}  // namespace shardnet::broker
