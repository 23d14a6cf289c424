#include <doctest/doctest.h>

#include "hwloc-probe/node_name.hpp"
#include "hwloc-probe/utf8.hpp"

using namespace shardnet::probe;

TEST_CASE("node names Slurm can take") {
    CHECK(check_node_name("node01", "--host").empty());
    CHECK(check_node_name("gpu-a100_3.cluster", "--host").empty());
    CHECK(check_node_name(std::string(64, 'n'), "--host").empty());
}

TEST_CASE("node names that would split or extend a Slurm line are refused, naming the field") {
    CHECK(check_node_name("evil\nNodeName=evil", "the topology's HostName") ==
          "the topology's HostName is not a valid Slurm node name: byte 0x0a at offset 4 "
          "(allowed: letters, digits, '-', '_', '.', starting with a letter or digit)");
    CHECK(check_node_name("node 01", "--host").find("byte 0x20 at offset 4") != std::string::npos);
    CHECK(check_node_name("a=b", "--host").find("'=' at offset 1") != std::string::npos);
    CHECK(check_node_name("a,b", "--host").find("','") != std::string::npos);
    CHECK(check_node_name("n[1-2]", "--host").find("'['") != std::string::npos);
    CHECK(check_node_name("-n", "--host").find("'-' at offset 0") != std::string::npos);
    CHECK(check_node_name("", "--host") == "--host is empty");
    CHECK(check_node_name(std::string(65, 'n'), "--host").find("65 bytes") != std::string::npos);
    CHECK(check_node_name("n\xc3\xa9", "--host").find("byte 0xc3") != std::string::npos);
}

TEST_CASE("valid UTF-8 passes unchanged; each invalid byte becomes U+FFFD") {
    const std::string fffd = "\xEF\xBF\xBD";
    CHECK(valid_utf8("Tesla V100") == "Tesla V100");
    CHECK(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
    CHECK(valid_utf8("a\xFF" "b") == "a" + fffd + "b");
    CHECK(valid_utf8("\xC0\xAF") == fffd + fffd);             // overlong '/'
    CHECK(valid_utf8("\xED\xA0\x80") == fffd + fffd + fffd);  // a surrogate
    CHECK(valid_utf8("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // above U+10FFFF
    CHECK(valid_utf8("x\xE2\x82") == "x" + fffd + fffd);      // truncated at the end
    CHECK(valid_utf8(std::string("a\0b", 3)) == std::string("a\0b", 3));
}

TEST_CASE("printable: one line, valid UTF-8") {
    CHECK(printable("a\nb\tc\x7f") == "a?b?c?");
    CHECK(printable("\xFF") == "\xEF\xBF\xBD");
}
