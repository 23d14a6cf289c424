// --shardnet-spares and no-kill (spank/no_kill.hpp): what the plugin can vouch for.
#include <doctest/doctest.h>

#include "spank/no_kill.hpp"

using namespace shardnet;

TEST_CASE("spares are taken only where no-kill holds") {
    // The plugin cannot give the job no-kill: sbatch read its environment before.
    CHECK(no_kill_refusal({"-N3", "--shardnet-spares=1", "job.sh"}, false, "sbatch").find("add --no-kill") != std::string::npos);
    CHECK(no_kill_refusal({"-N3", "-k", "job.sh"}, false, "sbatch") == "");
    CHECK(no_kill_refusal({"-N3", "--no-kill", "job.sh"}, false, "sbatch") == "");
    CHECK(no_kill_refusal({"-N3", "--no-kill=set", "job.sh"}, false, "sbatch") == "");
    CHECK(no_kill_refusal({"-N3", "--no-kill=off", "job.sh"}, false, "sbatch") != "");   // kill, spelled out
    CHECK(no_kill_refusal({"-k", "--no-kill=no", "job.sh"}, false, "sbatch") != "");     // the last word counts
    CHECK(no_kill_value(""));
    CHECK(no_kill_value("SET"));
    CHECK_FALSE(no_kill_value("1"));      // sbatch: "Invalid --no-kill specification"
    CHECK_FALSE(no_kill_value("off"));
    CHECK_FALSE(no_kill_value(nullptr));
    CHECK(no_kill_refusal({"-N3", "job.sh"}, true, "sbatch") == "");   // the user's SBATCH_NO_KILL
    // #SBATCH lines are not read.
    const std::string why = no_kill_refusal({"-N3", "job.sh"}, false, "sbatch");
    CHECK(why.find("add --no-kill (-k) to sbatch's command line (or set SBATCH_NO_KILL= empty or to 'set')") != std::string::npos);
    CHECK(no_kill_refusal({"-N3", "--", "--no-kill"}, false, "salloc").find("SALLOC_NO_KILL") != std::string::npos);
    CHECK(no_kill_refusal({"-N3", "--shardnet-spares=1", "cmd"}, false, "srun").find("srun's command line") != std::string::npos);
    CHECK(no_kill_refusal({"-N3", "-k", "--shardnet-spares=1", "cmd"}, false, "srun") == "");
    CHECK(std::string(no_kill_env("salloc")) == "SALLOC_NO_KILL");
    // The script's (or the command's) own arguments are not the client's.
    CHECK(no_kill_refusal({"-N3", "--shardnet-spares=1", "job.sh", "--no-kill"}, false, "sbatch") != "");
    CHECK(no_kill_refusal({"-N", "3", "-p", "gpu", "job.sh", "-k"}, false, "sbatch") != "");
    CHECK(no_kill_refusal({"--partition", "gpu", "--hold", "-k", "job.sh"}, false, "sbatch") == "");
    CHECK(no_kill_refusal({"-N", "3", "--shardnet-spares", "1", "--no-kill", "job.sh"}, false, "sbatch") == "");
    CHECK(no_kill_refusal({"-N3", "python3", "train.py", "--no-kill"}, false, "srun") != "");
    // --shardnet takes its value attached only; --hint takes the next word.
    CHECK(no_kill_refusal({"-N3", "--shardnet", "-k", "--shardnet-spares=1", "job.sh"}, false, "sbatch") == "");
    CHECK(no_kill_refusal({"--hint", "nomultithread", "-k", "job.sh"}, false, "sbatch") == "");
    CHECK(no_kill_refusal({"-E", "-k", "-N2", "cmd"}, false, "srun") == "");
}
