#include "common/find_program.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace shardnet {

bool executable_file(const std::string &file) {
    struct stat st;
    return ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(file.c_str(), X_OK) == 0;
}

std::string find_program(const std::string &name, const std::string &path) {
    if (name.empty() || name.find('/') != std::string::npos) return "";
    for (size_t start = 0; start <= path.size();) {
        size_t end = path.find(':', start);
        if (end == std::string::npos) end = path.size();
        const std::string file = (end > start ? path.substr(start, end - start) : ".") + "/" + name;
        if (executable_file(file)) return file;
        start = end + 1;
    }
    return "";
}

}  // namespace shardnet
