#include "common/checkpoint_layout.hpp"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shardnet {

std::string latest_sealed_checkpoint(const std::string &dir) {
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return "";
    DIR *d = ::fdopendir(dfd);
    if (!d) { ::close(dfd); return ""; }
    std::string best;
    while (dirent *e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name.rfind("checkpoint-", 0) != 0 || name <= best) continue;
        struct stat st;
        if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
        std::string marker = name + "/" + kSealedMarker;
        if (::fstatat(dfd, marker.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        best = name;
    }
    ::closedir(d);
    return best.empty() ? "" : dir + "/" + best;
}

std::string mark_sealed(const std::string &dir, const std::string &name, const std::string &content) {
    if (name.rfind("checkpoint-", 0) != 0 || name.find('/') != std::string::npos || name.size() > 255)
        return "not a checkpoint name: " + name.substr(0, 80);
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return dir + ": " + std::strerror(errno);
    int cfd = ::openat(dfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(dfd);
    if (cfd < 0) return errno == ENOENT ? "" : name + ": " + std::strerror(errno);   // not on this node: nothing to mark
    int m = ::openat(cfd, kSealedMarker, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    const int err = errno;
    ::close(cfd);
    if (m < 0) return err == EEXIST ? "" : name + "/" + kSealedMarker + ": " + std::strerror(err);
    const bool ok = ::write(m, content.data(), content.size()) == ssize_t(content.size());
    ::close(m);
    return ok ? "" : name + "/" + kSealedMarker + ": short write";
}

std::string resolve_resume(const std::string &resume, const std::string &ckpt_dir) {
    if (resume.empty()) return "";
    if (resume == "latest") return latest_sealed_checkpoint(ckpt_dir);
    if (resume[0] == '/') return resume;
    return ckpt_dir + "/" + resume;
}

}  // namespace shardnet
