// Checkpoints (store/seal_store.cpp): Store::seals(). The ranks' commits,
// the seals, each seal's file list as its receipt commits to it, and the
// seals a peer's decision carried with a run.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/store/store_part.hpp"

namespace shardnet::broker {

struct CheckpointRow {
    std::string run, name;
    long long attempt = 0, ranks = 0;
    std::string parent;
    double sealed_at = 0;
    double write_seconds = -1;   // the slowest rank's write, -1: not measured
    long long seq = 0;           // its place in the run's seal order (read back only)
};

class SealStore : StorePart {
public:
    explicit SealStore(Store &store) : StorePart(store) {}

    // Returns how many ranks of (run, attempt, name) have committed now.
    // write_seconds: the rank's "checkpointing" to "committed" (-1: not measured).
    long long insert_commit(const std::string &run, long long attempt, const std::string &name, long long rank,
                            const std::string &files, double now, double write_seconds = -1);
    // The slowest write of the ranks' commits of a checkpoint (-1: none measured).
    double commit_write_seconds(const std::string &run, long long attempt, const std::string &name);
    // The ranks' commits of a checkpoint: rank and its files (JSON text).
    std::vector<std::pair<long long, std::string>> commit_files(const std::string &run, long long attempt, const std::string &name);
    bool checkpoint_sealed(const std::string &run, const std::string &name);
    void seal_checkpoint(const CheckpointRow &c);
    std::vector<CheckpointRow> list_checkpoints(const std::string &run);
    // A page of the run's seals in seal order: those after seq `after`, at
    // most limit; or its newest n (in seal order); or the one named.
    std::vector<CheckpointRow> checkpoints_page(const std::string &run, long long after, int limit);
    std::vector<CheckpointRow> newest_checkpoints(const std::string &run, int n);
    std::optional<CheckpointRow> checkpoint(const std::string &run, const std::string &name);
    // The run's newest sealed checkpoint's name ("" when none).
    std::string last_checkpoint(const std::string &run);
    // A seal's file list as its receipt commits to it (file_list.hpp): the
    // root (hex), count, bytes and the receipt (seq 0: none signed).
    struct SealedListRow { std::string root; long long count = 0, bytes = 0, receipt_seq = 0; std::string receipt_digest; };
    void put_sealed_list(const std::string &run, const std::string &name, const SealedListRow &r);
    std::optional<SealedListRow> sealed_list(const std::string &run, const std::string &name);
    // A seal a peer's decision carried with the run (seals/carried.hpp):
    // files is the JSON array [{path, sha256, bytes, rank}], checked on arrival.
    struct CarriedSealRow {
        std::string run, name;
        long long attempt = 0, ranks = 0;
        std::string parent, sealed_by;
        SealedListRow list;
        std::string files;
        double received = 0;
    };
    void put_carried_seal(const CarriedSealRow &r);
    std::optional<CarriedSealRow> carried_seal(const std::string &run, const std::string &name);
    // The run's carried seals, the newest (by received, then name) first.
    std::vector<CarriedSealRow> carried_seals(const std::string &run, int limit);
    // Drops all but the run's newest keep carried seals (as carried_seals
    // orders them): what a sender carries is its newest two.
    void keep_newest_carried(const std::string &run, int keep);
    // Drops the carried seals of runs that ended (SUCCEEDED, FAILED,
    // CANCELLED) before finished_before; how many went.
    long long forget_carried_seals(double finished_before);

private:
    std::vector<CheckpointRow> checkpoint_rows(const char *which, const std::string &run, long long after, int limit);
};

}  // namespace shardnet::broker
