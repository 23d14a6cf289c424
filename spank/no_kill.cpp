#include "spank/no_kill.hpp"

#include <cstring>
#include <fstream>
#include <string_view>
#include <strings.h>
#include <iterator>

namespace shardnet {

const char *no_kill_env(const std::string &program) {
    if (program == "sbatch") return "SBATCH_NO_KILL";
    if (program == "salloc") return "SALLOC_NO_KILL";
    return "SLURM_NO_KILL";
}

bool no_kill_value(const char *v) {
    // Slurm's own reading: no value or "set" is no-kill; "off" and "no"
    // are kill, anything else an error sbatch reports itself.
    return v && (!*v || strcasecmp(v, "set") == 0);
}

namespace {

// Short options of sbatch, salloc and srun that take no value (Slurm's
// getopt strings); every other one takes the next word when none is
// attached ("-N 3", "-N3").
bool short_flag(char c) { return std::strchr("EhHIkKlOQsuvVWXZ", c) != nullptr; }

// Long options that never take the next word as their value (no or only
// an attached "=value"). Another long option written without "=" takes
// the next word ("--partition gpu").
bool long_flag(std::string_view name) {
    static constexpr std::string_view flags[] = {
        "contiguous", "exclusive", "get-user-env", "help", "hold", "ignore-pbs", "kill-on-invalid-dep", "no-kill", "no-requeue",
        "nice", "oversubscribe", "overcommit", "parsable", "propagate", "quiet", "reboot", "requeue", "spread-job", "test-only",
        "usage", "use-min-nodes", "verbose", "version", "wait", "overlap", "exact", "whole", "unbuffered", "label",
        "no-allocate", "pty", "x11", "kill-on-bad-exit", "disable-status", "bcast", "immediate", "no-shell", "preserve-env",
        // ShardNet's own option with an optional value (attached only).
        "shardnet"};
    for (auto f : flags)
        if (name == f) return true;
    return false;
}

}  // namespace

std::string no_kill_refusal(const std::vector<std::string> &args, bool env_had, const std::string &program) {
    if (env_had) return "";
    bool on = false;
    // Slurm's own reading stops at the first word that is not an option
    // or an option's value: the script (sbatch) or the command (srun,
    // salloc), whose own arguments are not the client's.
    bool value_next = false;
    for (const auto &a : args) {
        if (value_next) { value_next = false; continue; }
        if (a == "--" || a.size() < 2 || a[0] != '-') break;
        if (a[1] == '-') {
            if (a.find('=') == std::string::npos && !long_flag(std::string_view(a).substr(2))) value_next = true;
        } else if (a.size() == 2 && !short_flag(a[1])) {
            value_next = true;
        }
        // (-k among other short flags is not looked for: "-Nk" is -N k.)
        // The last word counts, as in Slurm's own reading.
        if (a == "-k" || a == "--no-kill") on = true;
        else if (a.rfind("--no-kill=", 0) == 0) on = no_kill_value(a.c_str() + 10);
    }
    if (on) return "";
    return std::string("--shardnet-spares needs a job that survives a node's death: add --no-kill (-k) to ") + program +
           "'s command line (or set " + no_kill_env(program) +
           "= empty or to 'set'); in #SBATCH lines, ShardNet cannot tell whether the job has it";
}

std::vector<std::string> own_args() {
    std::ifstream f("/proc/self/cmdline", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < all.size()) {
        std::size_t z = all.find('\0', i);
        if (z == std::string::npos) z = all.size();
        out.push_back(all.substr(i, z - i));
        i = z + 1;
    }
    if (!out.empty()) out.erase(out.begin());
    return out;
}

}  // namespace shardnet
