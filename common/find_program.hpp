// Where a program named without a '/' is: the first directory of a
// PATH-style list holding an executable regular file of that name.
#pragma once
#include <string>

namespace shardnet {

// An executable regular file (as the caller), symlinks followed.
bool executable_file(const std::string &file);

// "" when no directory of PATH (':'-separated; an empty entry is ".") has it.
std::string find_program(const std::string &name, const std::string &path);

}  // namespace shardnet
