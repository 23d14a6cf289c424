// Where checkpoints live inside a run's checkpoint directory. A checkpoint
// is a directory. Whether it is sealed is the broker's to say (every rank
// of the attempt committed); the SEALED marker beside its shards is the
// agent's copy of that word, for --shardnet-resume=latest: written only
// for a checkpoint the broker lists as sealed, on every node that holds it.
#pragma once
#include <cstddef>
#include <string>

namespace shardnet {

inline constexpr const char *kSealedMarker = "SEALED";
// A rank's manifest (NAME/rank-R.manifest: its files and their hashes) is
// read up to this size; a larger one is not committed, and the log says so.
inline constexpr std::size_t kMaxManifestBytes = 1 << 20;

// The greatest-named sealed "checkpoint-*" directory in dir, as a full
// path, or "" when there is none. Symlinks are never followed.
std::string latest_sealed_checkpoint(const std::string &dir);

// Writes NAME/SEALED in dir (content: what the broker said of it) unless it
// is there. name must be a "checkpoint-*" directory of dir; symlinks are
// never followed. "" or why not.
std::string mark_sealed(const std::string &dir, const std::string &name, const std::string &content);

// --shardnet-resume's value to SHARDNET_RESUME_FROM: "" stays "", "latest"
// is looked up, a name is taken inside ckpt_dir, an absolute path is kept.
std::string resolve_resume(const std::string &resume, const std::string &ckpt_dir);

}  // namespace shardnet
