// Fuzz target: the job spec parser of `shard run` (sbatch-wrappers/spec.cpp,
// yaml-cpp). Any text: a spec, or "LABEL:LINE:COL: what is wrong".
#include <cstdint>
#include <string>

#include "sbatch-wrappers/spec.hpp"
#include "tests/fuzz/fuzz_assert.hpp"

using namespace shardnet::cli;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    JobSpec spec;
    const std::string err = parse_spec(text, "fuzz.yaml", spec);
    if (!err.empty()) {
        FUZZ_CHECK(err.rfind("fuzz.yaml:", 0) == 0, "a spec error names the file");
        return 0;
    }
    FUZZ_CHECK(!spec.command.empty(), "an accepted spec has a command");
    (void)resolve_shape(spec);
    (void)accelerator_class(spec.accelerator);
    return 0;
}
