// A spec's `image:` (shard-spec(5), doc/containers.md): the reference as
// written, resolved at submit to one manifest digest that every attempt
// runs, and the OCI bundle a job unpacks from that digest (`shard bundle`).
//
//   oci:DIR[:TAG]           an OCI image layout (DIR absolute, or relative
//                           to where shard runs); no TAG: its one image
//   oci:DIR@sha256:HEX      pinned: that manifest of the layout
//   docker://REF            copied into the image cache with skopeo at
//                           submit, then as oci: from there
#pragma once
#include <string>

namespace shardnet::cli::image {

struct Ref {
    std::string transport;   // "oci" or "docker"
    std::string dir;         // oci: the layout
    std::string tag;         // oci: "" (the layout's one image) or a tag
    std::string digest;      // oci: "sha256:HEX" when pinned
    std::string remote;      // docker: the reference after docker://
};

// "" and R, or why TEXT is no image reference.
std::string parse(const std::string &text, Ref &r);

// The manifest digest ("sha256:HEX") that R names in its layout: from
// DIR/index.json, its blob present. "" and DIGEST, or why not.
std::string resolve_layout(const Ref &r, std::string &digest);

// "oci:DIR@DIGEST".
std::string pinned(const std::string &dir, const std::string &digest);
// DIR of a pinned reference; "" when PINNED is none.
std::string layout_of(const std::string &pinned_ref);

// The image cache (docker:// copies) and the bundle cache (unpacked
// digests): $SHARDNET_IMAGE_CACHE / $SHARDNET_BUNDLE_CACHE, else
// ~/.shardnet/images and ~/.shardnet/bundles.
std::string image_cache();
std::string bundle_cache();

// What `shard run` does with a spec's image: TEXT resolved (a docker://
// reference copied into the image cache first) to PINNED and DIGEST; "" or
// why not (the reference named).
std::string resolve(const std::string &text, std::string &pinned_ref, std::string &digest);

// `shard bundle PINNED`: the bundle dir of the pinned image in the bundle
// cache, unpacked there (umoci unpack --rootless, as the caller) when it is
// not there yet. "" and DIR, or why not.
std::string bundle(const std::string &pinned_ref, std::string &dir);

}  // namespace shardnet::cli::image
