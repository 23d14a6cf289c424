#include "spank/no_kill.hpp"

#include <fstream>
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

std::string no_kill_refusal(const std::vector<std::string> &args, bool env_had, const std::string &program) {
    if (env_had) return "";
    bool on = false;
    for (const auto &a : args) {
        if (a == "--") break;
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
