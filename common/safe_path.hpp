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

// Per-step directories that root makes for a user below a node-local root
// (progress files). Nobody but root can create anything in a good root, so
// no other user can squat a step's name; and the step's name is made fresh
// (exclusively, with a random part) even where the root is shared, like
// /tmp.
struct StepDir {
    dev_t root_dev = 0;
    ino_t root_ino = 0;
    dev_t dev = 0;
    ino_t ino = 0;
    std::string name;          // below the root
};

// Opens the root (O_PATH, never through a symlink at its last component),
// first making it (mode 0755) when missing and create is set. Refused when
// it is not a directory, not owned by owner (root), writable by group or
// others without the sticky bit, or not searchable by others (the job users
// could not reach their dirs). "" and *fd_out on success.
std::string open_step_root(const std::string &root, uid_t owner, bool create, int *fd_out);

// Makes root_fd/PREFIX.RANDOM with mode 0700, never an existing one, and
// hands it to uid:gid. "" and out filled on success.
std::string make_step_dir(int root_fd, const std::string &prefix, uid_t uid, gid_t gid, StepDir &out);

// Removes what make_step_dir made, with what the user put in it, if root
// and the dir are still the same inodes; never follows a symlink. "" or why
// it was left.
std::string remove_step_dir(const std::string &root, const StepDir &dir);

// Reads a regular file of at most max_bytes into out, without following a
// symlink at its last component and without blocking on a FIFO or device.
// "" on success; else why not, naming the path. st_out, when given, gets
// the file's status as it was read (owner, mode).
std::string read_small_file(const std::string &path, std::size_t max_bytes, std::string &out, struct stat *st_out = nullptr);

}  // namespace shardnet
