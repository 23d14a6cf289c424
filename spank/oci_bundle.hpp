// The task's own OCI bundle config (shardnet-oci-run, doc/containers.md):
// pure functions over the argv of oci.conf's RunTimeRun and the step's
// config.json that Slurm generated.
#pragma once
#include <string>
#include <vector>

namespace shardnet::oci {

// The bundle directory in a runtime's argv ("--bundle DIR", "--bundle=DIR",
// "-b DIR"); "" when none. AT: the index of the element that holds it.
std::string bundle_arg(const std::vector<std::string> &args, size_t &at);
void set_bundle_arg(std::vector<std::string> &args, size_t at, const std::string &dir);

// NUL-separated NAME=VALUE entries (what the plugin wrote) as a list; an
// entry without '=' is dropped.
std::vector<std::string> split_env(const std::string &text);

// A bundle config's process.env (the image's, in an unpacked bundle's
// config.json); none when CONFIG is no such config.
std::vector<std::string> config_env(const std::string &config);

// CONFIG (the step's config.json, in BUNDLE) made the task's: process.env
// is IMAGE_ENV (the user's bundle's own, which Slurm 22.05's generated
// config may lack), then CONFIG's, then ENV's, merged by name (the later
// value wins; less SHARDNET_OCI_ENV), process.cwd is ENV's PWD, root.path is absolute and
// root.readonly true (the unpacked rootfs is shared by every job of the
// digest), /tmp and /var/tmp are tmpfs mounts (first, unless the bundle
// mounts there), and the task's working dir, checkpoint dir and progress dir
// (PWD, SHARDNET_CKPT_DIR, SHARDNET_PROGRESS's dir) are bind-mounted (rbind,
// rw) at the same paths unless the bundle mounts something there already.
// "" and ERR when CONFIG is no bundle config.
std::string task_config(const std::string &config, const std::string &bundle, const std::vector<std::string> &env, std::string &err,
                        const std::vector<std::string> &image_env = {});

// The image manifest digest ("sha256:HEX") a bundle was unpacked from, as
// umoci records it in the bundle's umoci.json; "" when it says none.
std::string umoci_digest(const std::string &umoci_json);

// SHARDNET_IMAGE_DIGEST for a task that has none (a user's own
// --container=BUNDLE, not shard run's): from the bundle SLURM_CONTAINER
// names, through READ (path -> its text, "" when unreadable). ENV unchanged
// when it has a digest already or the bundle says none.
void add_bundle_digest(std::vector<std::string> &env, std::string (*read)(const std::string &path));

}  // namespace shardnet::oci
