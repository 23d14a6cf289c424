#include "hwloc-probe/node_name.hpp"

#include <cstdio>

namespace shardnet::probe {

namespace {

bool alnum(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

}  // namespace

std::string check_node_name(const std::string &name, const std::string &field) {
    if (name.empty()) return field + " is empty";
    if (name.size() > 64)
        return field + " is " + std::to_string(name.size()) + " bytes long; a node name has at most 64";
    for (size_t i = 0; i < name.size(); ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (alnum(c) || (i > 0 && (c == '-' || c == '_' || c == '.'))) continue;
        char what[48];
        if (c > 0x20 && c < 0x7f)
            std::snprintf(what, sizeof what, "'%c'", c);
        else
            std::snprintf(what, sizeof what, "byte 0x%02x", c);
        return field + " is not a valid Slurm node name: " + what + " at offset " + std::to_string(i) +
               " (allowed: letters, digits, '-', '_', '.', starting with a letter or digit)";
    }
    return "";
}

}  // namespace shardnet::probe
