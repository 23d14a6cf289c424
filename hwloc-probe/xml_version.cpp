#include "hwloc-probe/xml_version.hpp"

#include <cstdio>
#include <fstream>

namespace shardnet::probe {

std::optional<XmlVersion> xml_format_version(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::string head(4096, '\0');
    f.read(head.data(), std::streamsize(head.size()));
    head.resize(size_t(f.gcount()));
    const size_t root = head.find("<topology");
    if (root == std::string::npos) return std::nullopt;
    const size_t end = head.find('>', root);
    const size_t at = head.find("version=\"", root);
    if (at == std::string::npos || (end != std::string::npos && at > end)) return std::nullopt;
    XmlVersion v;
    if (std::sscanf(head.c_str() + at + 9, "%u.%u", &v.major, &v.minor) != 2) return std::nullopt;
    return v;
}

}  // namespace shardnet::probe
