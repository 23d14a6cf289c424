#include "spank/signal_caught.hpp"

#include <fstream>
#include <sstream>

namespace shardnet {

bool status_catches(const std::string &status, int sig) {
    if (sig < 1 || sig > 64) return false;
    std::istringstream in(status);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("SigCgt:", 0) != 0) continue;
        const std::string hex = line.substr(line.find_first_not_of(" \t", 7));
        unsigned long long mask = 0;
        try {
            std::size_t used = 0;
            mask = std::stoull(hex, &used, 16);
            if (used == 0) return false;
        } catch (...) {
            return false;
        }
        return (mask >> (sig - 1)) & 1ULL;
    }
    return false;
}

bool catches_signal(pid_t pid, int sig) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    if (!f) return false;
    std::ostringstream text;
    text << f.rdbuf();
    return status_catches(text.str(), sig);
}

}  // namespace shardnet
