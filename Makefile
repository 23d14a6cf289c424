# ShardNet top-level entry. `make check` and `make demo` set up a fresh
# Debian 12 or 13 machine (as root), build out of tree in build/ with
# autotools, and run the tests or the demo. Everything else goes to build/'s
# Makefile. `make deb` makes Debian packages into dist/RELEASE/.
#
# DIST=RELEASE (bookworm, trixie) other than this machine's own: all, check,
# unit, integration and deb run in a clean chroot of that release, made
# once with mmdebstrap and cached (scripts/chroot.sh, scripts/in-chroot.sh).
BUILD ?= build
CONFIGURE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
HOST_DIST := $(shell . /etc/os-release 2>/dev/null && echo $$VERSION_CODENAME)
DIST ?= $(HOST_DIST)

ifneq ($(DIST),$(HOST_DIST))
.PHONY: all check unit integration deb install-test
all check unit integration deb:
	./scripts/in-chroot.sh $(DIST) $@ $(if $(TESTS),TESTS="$(TESTS)")
# The packages of dist/DIST installed into a clean chroot of DIST.
install-test:
	./tests/packages/t-install.sh $(DIST)
else

# A failed unit suite prints its failed tests' logs (automake keeps them in
# test-suite.log), so that a CI log says why, not only which.
SHOW_FAILED = { tail -n 200 $(BUILD)/tests/test-suite.log; exit 1; }

.PHONY: all deps configured check unit integration soak demo bench fuzz install clean distclean deb install-test
all: configured
	$(MAKE) -C $(BUILD) -j$(JOBS)

deps:
	./scripts/install-deps.sh

configured: deps $(BUILD)/Makefile

configure: configure.ac $(wildcard */Makefile.am) Makefile.am
	autoreconf -fi

$(BUILD)/Makefile: configure
	mkdir -p $(BUILD)
	cd $(BUILD) && ../configure $(CONFIGURE_FLAGS)

# Unit tests, then the integration tests on real local Slurm clusters.
check: all
	if [ "$$(id -u)" = 0 ]; then export SHARDNET_NO_SKIP=1; fi; $(MAKE) -C $(BUILD) check || $(SHOW_FAILED)
	./tests/run-integration.sh $(BUILD)

unit: all
	$(MAKE) -C $(BUILD) check || $(SHOW_FAILED)

# TESTS="tests/integration/tXXXX.sh ...": only those.
integration: all
	./tests/run-integration.sh $(BUILD) $(TESTS)

# The soak (tests/soak/soak.sh, not part of check): healthy jobs on two real
# clusters for SOAK_SECONDS (default 3600) with jittered heartbeats, broker
# restarts, peer link drops and one SOAK_BROKER_DOWN_SECONDS (default 600)
# outage; a table of counts, non-zero on any false FAULT or recovery.
SOAK_SECONDS ?= 3600
SOAK_BROKER_DOWN_SECONDS ?= 600
soak: all
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_BROKER_DOWN_SECONDS=$(SOAK_BROKER_DOWN_SECONDS) ./tests/soak/soak.sh $(BUILD)

demo: all
	./scripts/demo.sh $(BUILD)

bench: all
	./tests/bench/srun-overhead.sh $(BUILD)
	./tests/bench/probe-speed.sh $(BUILD)
	./tests/bench/broker-vs-nginx.sh $(BUILD)
	./tests/bench/streams-vs-heartbeats.sh $(BUILD)
	./tests/bench/broker-instructions.sh $(BUILD)
	$(MAKE) -C $(BUILD)/tests bench/placement-bench && $(BUILD)/tests/bench/placement-bench
	$(MAKE) -C $(BUILD)/tests bench/straggler-bench && $(BUILD)/tests/bench/straggler-bench
	./tests/bench/requeue-vs-slurm.sh $(BUILD)
	./tests/bench/recovery-tiers.sh $(BUILD)
	./tests/bench/pylib-save.sh
	./tests/bench/seal-receipt-size.sh $(BUILD)
	./tests/bench/ckpt-grid.sh $(BUILD)

# libFuzzer with ASan and UBSan on every parser of untrusted input
# (tests/fuzz/README.md): a tree of its own in build-fuzz/, then each target
# for FUZZ_SECONDS, with its executions per target at the end.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= http_request heartbeat_body routes job_spec plugstack agent_protocol probe_descriptor
FUZZ_CXXFLAGS = -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
FUZZ_JOBS ?= $(JOBS)
fuzz: configure
	./scripts/install-deps.sh fuzz
	[ -f $(FUZZ_BUILD)/Makefile ] || { mkdir -p $(FUZZ_BUILD) && cd $(FUZZ_BUILD) && ../configure --enable-fuzzing \
		CC=clang-15 CXX=clang++-15 CXXFLAGS="$(FUZZ_CXXFLAGS)" LDFLAGS="-fsanitize=address,undefined"; }
	$(MAKE) -C $(FUZZ_BUILD)/common -j$(FUZZ_JOBS) libshardnet_common.a
	$(MAKE) -C $(FUZZ_BUILD)/broker -j$(FUZZ_JOBS) libbroker.a
	$(MAKE) -C $(FUZZ_BUILD)/sbatch-wrappers -j$(FUZZ_JOBS) libshard.a
	$(MAKE) -C $(FUZZ_BUILD)/tests -j$(FUZZ_JOBS) fuzz-programs
	./tests/fuzz/run.sh $(FUZZ_BUILD)/tests/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

install: all
	$(MAKE) -C $(BUILD) install

# Debian packages (debian/, debhelper) of this tree as git sees it, built
# against this machine's Slurm, into dist/RELEASE/, checked with lintian.
deb:
	./scripts/install-deps.sh deb
	./scripts/make-deb.sh dist/$(DIST)

# The packages of dist/DIST installed into a clean chroot of DIST.
# It upgrades from the broker of PREVIOUS_REF (database schema 14), built
# once into dist/DIST/previous/ as package version PREVIOUS_VERSION.
PREVIOUS_REF ?= 4ddee8c
PREVIOUS_VERSION ?= 0.0.35
install-test:
	ls dist/$(DIST)/previous/shardnet-broker_*.deb >/dev/null 2>&1 || \
		./scripts/make-deb.sh dist/$(DIST)/previous --previous $(PREVIOUS_REF) $(PREVIOUS_VERSION)
	./tests/packages/t-install.sh $(DIST)

clean:
	[ ! -f $(BUILD)/Makefile ] || $(MAKE) -C $(BUILD) clean

distclean:
	rm -rf $(BUILD) $(FUZZ_BUILD) autom4te.cache build-aux configure config.h.in aclocal.m4
	find . -name Makefile.in -delete
endif
