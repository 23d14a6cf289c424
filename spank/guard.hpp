// The one way into the plugin from Slurm: every extern "C" entry point and
// every callback Slurm holds (the option callbacks) runs its body through
// guarded(), so no C++ exception ever unwinds into Slurm's C frames.
#pragma once
#include <exception>
#include <new>

extern "C" {
#include <slurm/spank.h>
}

namespace shardnet {

template <typename F>
int guarded(const char *where, F &&fn) noexcept {
    try {
        return fn();
    } catch (const std::bad_alloc &) {
        slurm_error("shardnet: %s: out of memory", where);
    } catch (const std::exception &e) {
        slurm_error("shardnet: %s: %s", where, e.what());
    } catch (...) {
        slurm_error("shardnet: %s: unexpected error", where);
    }
    return -1;
}

}  // namespace shardnet
