// The format version a saved hwloc XML declares, read before or after hwloc
// refuses it, so that a newer format is named as such, not as corruption.
#pragma once
#include <optional>
#include <string>

namespace shardnet::probe {

struct XmlVersion { unsigned major = 0, minor = 0; };

// From the root element's version attribute (<topology version="2.0">, as
// hwloc's XML export writes it) within the first 4 KiB of PATH; nothing
// when there is no such attribute.
std::optional<XmlVersion> xml_format_version(const std::string &path);

// hwloc 2.x reads formats 1.x and 2.x only (topology-xml.c refuses a major
// version above 2).
inline constexpr unsigned kMaxXmlMajor = 2;

}  // namespace shardnet::probe
