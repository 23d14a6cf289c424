#include "spank/no_kill.hpp"

#include <fstream>
#include <iterator>

namespace shardnet {

const char *no_kill_env(const std::string &program) {
    if (program == "sbatch") return "SBATCH_NO_KILL";
    if (program == "salloc") return "SALLOC_NO_KILL";
    return "SLURM_NO_KILL";
}

std::string no_kill_refusal(const std::vector<std::string> &args, bool env_had, const std::string &program) {
    if (env_had) return "";
    for (const auto &a : args) {
        if (a == "--") break;
        // (-k among other short flags is not looked for: "-Nk" is -N k.)
        if (a == "-k" || a == "--no-kill" || a.rfind("--no-kill=", 0) == 0) return "";
    }
    return std::string("--shardnet-spares needs a job that survives a node's death: add --no-kill (-k) to ") + program +
           "'s command line (or set " + no_kill_env(program) +
           "=1); in #SBATCH lines, ShardNet cannot tell whether the job has it";
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
