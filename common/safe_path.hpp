// Paths that users hand to a plugin running as root. Every check here is
// about one thing: a user may only make ShardNet touch their own files.
#pragma once
#include <string>
#include <sys/stat.h>
#include <sys/types.h>
#include <vector>

namespace shardnet {

// "" when p is absolute, has no "." or ".." component, no control
// characters and fits PATH_MAX; else why not.
std::string check_path_syntax(const std::string &p);

// The components of an absolute path ("/a//b/" -> {"a","b"}).
std::vector<std::string> path_components(const std::string &p);

// Lexically: is path equal to or below anchor?
bool path_is_under(const std::string &path, const std::string &anchor);

// Opens (and with create, makes with mode) every component of path below
// anchor without following a symlink, as the calling process's effective
// ids. Components below the anchor must be directories owned by uid. On
// success returns "" and, when fd_out is given, an O_PATH fd of the leaf.
// Without create, a missing component ends the walk successfully.
std::string open_dir_below(const std::string &anchor, const std::string &path, uid_t uid,
                           bool create, mode_t mode, int *fd_out = nullptr);

// The checkpoint-dir rule: inside ckpt_root (when set) or home; made as the
// caller (the job user) with mode 0700 when missing and create is set.
std::string make_user_dir(const std::string &path, const std::string &ckpt_root,
                          const std::string &home, uid_t uid, bool create);

// Reads a regular file of at most max_bytes into out, without following a
// symlink at its last component and without blocking on a FIFO or device.
// "" on success; else why not, naming the path. st_out, when given, gets
// the file's status as it was read (owner, mode).
std::string read_small_file(const std::string &path, std::size_t max_bytes, std::string &out, struct stat *st_out = nullptr);

}  // namespace shardnet
