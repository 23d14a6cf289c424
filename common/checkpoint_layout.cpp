#include "common/checkpoint_layout.hpp"

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

std::string resolve_resume(const std::string &resume, const std::string &ckpt_dir) {
    if (resume.empty()) return "";
    if (resume == "latest") return latest_sealed_checkpoint(ckpt_dir);
    if (resume[0] == '/') return resume;
    return ckpt_dir + "/" + resume;
}

}  // namespace shardnet
