// Where checkpoints live inside a run's checkpoint directory. A checkpoint
// is a directory; it is sealed when it holds a SEALED marker, written only
// after every rank of the attempt committed.
#pragma once
#include <string>

namespace shardnet {

inline constexpr const char *kSealedMarker = "SEALED";

// The greatest-named sealed "checkpoint-*" directory in dir, as a full
// path, or "" when there is none. Symlinks are never followed.
std::string latest_sealed_checkpoint(const std::string &dir);

// --shardnet-resume's value to SHARDNET_RESUME_FROM: "" stays "", "latest"
// is looked up, a name is taken inside ckpt_dir, an absolute path is kept.
std::string resolve_resume(const std::string &resume, const std::string &ckpt_dir);

}  // namespace shardnet
