# ShardNet top-level entry. `make check` and `make demo` set up a fresh
# Debian 12 machine (as root), build out of tree in build/ with autotools,
# and run the tests or the demo. Everything else goes to build/'s Makefile.
BUILD ?= build
CONFIGURE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps configured check unit integration demo bench install clean distclean
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
	$(MAKE) -C $(BUILD) check
	./tests/run-integration.sh $(BUILD)

unit: all
	$(MAKE) -C $(BUILD) check

integration: all
	./tests/run-integration.sh $(BUILD)

demo: all
	./scripts/demo.sh $(BUILD)

bench: all
	./tests/bench/srun-overhead.sh $(BUILD)
	./tests/bench/probe-speed.sh $(BUILD)
	./tests/bench/broker-vs-nginx.sh $(BUILD)
	$(MAKE) -C $(BUILD)/tests bench/placement-bench && $(BUILD)/tests/bench/placement-bench
	./tests/bench/requeue-vs-slurm.sh $(BUILD)

install: all
	$(MAKE) -C $(BUILD) install

clean:
	[ ! -f $(BUILD)/Makefile ] || $(MAKE) -C $(BUILD) clean

distclean:
	rm -rf $(BUILD) autom4te.cache build-aux configure config.h.in aclocal.m4
	find . -name Makefile.in -delete
