// The fuzz targets' check: a broken invariant aborts with what broke, in
// every build (the replay in `make check` is built with NDEBUG-free flags,
// but assert() is not relied on).
#pragma once
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, what)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s (%s)\n", __FILE__, __LINE__, \
                         what, #cond);                                                             \
            std::abort();                                                                          \
        }                                                                                          \
    } while (0)
