# SPDX-License-Identifier: GPL-2.0
#
# oxrdma: top-level entry points. `make help` lists them.
#
# By default everything builds against the project's test kernel (Linux 6.12, built once and
# cached outside the clone by scripts/build-kernel.sh). To build the module for another kernel
# tree: make modules KDIR=/lib/modules/$(uname -r)/build

SHELL := /bin/bash
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
# `make bench` measures on the bench kernel (regular SLUB, accelerated CRC drivers).
VARIANT := $(if $(filter 1 y yes,$(DEBUG)),debug,$(if $(filter bench insn-count,$(MAKECMDGOALS)),bench,test))
TEST_KDIR = $(shell bash -c '. $(ROOT)/scripts/lib/env.sh && kernel_dir $(VARIANT)')/build
KDIR ?= $(TEST_KDIR)
KMAKE_VARS = $(shell bash -c '. $(ROOT)/scripts/lib/env.sh && echo "$${KMAKE_VARS[@]}"')

.PHONY: all help setup kernel modules provider lint demo check bench insn-count fuzz soak faults vm-run install \
	clean

all: modules provider

help:
	@echo "make demo            set up, build, boot the test VM and show oxrdma working"
	@echo "make check           the whole test suite (host, KUnit, VM); ends in 'N passed, N failed'"
	@echo "make check DEBUG=1   the same on the debug kernel (KASAN, lockdep, kmemleak)"
	@echo "make bench           oxroce, rxe, oxiwarp, siw, TCP and UDP side by side (ratios), in"
	@echo "                     one VM and in two, on the bench kernel (configs/bench.config)"
	@echo "make insn-count      instructions and memory accesses per message, oxiwarp and siw,"
	@echo "                     counted in QEMU (scripts/insn-count), on the bench kernel"
	@echo "make fuzz            a million hostile RoCE packets at live QPs (FUZZ_PACKETS=N)"
	@echo "make soak            30 minutes of verified mixed traffic under netem (SOAK_MINUTES=N)"
	@echo "make faults          every allocation of each verb made to fail, one at a time"
	@echo "                     (these three on the debug kernel: DEBUG=1)"
	@echo "make setup           install the Debian packages and tools the build needs"
	@echo "make kernel          build (or find cached) the test kernel (DEBUG=1: the debug one)"
	@echo "make modules         build oxrdma.ko (KDIR=<kernel build dir> for another kernel)"
	@echo "make provider        build userspace-provider/out/liboxrdma-rdmav34.so"
	@echo "make lint            CLIPPY=1 module build, rustfmt, checkpatch, cargo clippy, the"
	@echo "                     fuzz manifest; warnings are errors"
	@echo "make vm-run SCRIPT=f run a script (or CMD='...') as root in the test VM"
	@echo "make install         install module, userspace provider and driver file"
	@echo "make clean           remove the module build, generated bindings and cargo's target/"

setup:
	@$(ROOT)/scripts/setup.sh

kernel: setup
	@$(ROOT)/scripts/build-kernel.sh $(VARIANT)

# The kernel build is a prerequisite only for the project's own test kernel.
# Kbuild does not notice that the kernel tree changed (test, debug and bench kernels): the
# objects of another tree are removed first (the tree last built for is in .oxrdma-kdir).
modules: $(if $(filter $(TEST_KDIR),$(KDIR)),kernel)
	@if [ "$$(cat $(ROOT)/.oxrdma-kdir 2>/dev/null)" != "$(KDIR)" ]; then \
		$(MAKE) -s -C $(KDIR) M=$(ROOT) $(KMAKE_VARS) clean; \
		echo "$(KDIR)" >$(ROOT)/.oxrdma-kdir; \
	fi
	$(MAKE) -C $(KDIR) M=$(ROOT) $(KMAKE_VARS) modules

provider: setup
	@$(ROOT)/userspace-provider/build.sh

lint: kernel
	@$(ROOT)/scripts/lint.sh $(KDIR)

demo: modules provider
	@$(ROOT)/scripts/demo.sh $(VARIANT)

check: kernel
	@$(ROOT)/scripts/check.sh $(VARIANT)

bench: kernel modules provider
	@$(ROOT)/scripts/bench.sh $(VARIANT)

insn-count: kernel modules provider
	@$(ROOT)/scripts/insn-count --variant $(VARIANT)

fuzz soak faults: kernel modules provider
	@$(ROOT)/scripts/hardening.sh $(VARIANT) $@

vm-run: modules provider
	@$(ROOT)/scripts/vm-run --variant $(VARIANT) $(if $(SCRIPT),$(abspath $(SCRIPT)),-- bash -c '$(CMD)')

# With DESTDIR (packaging), depmod is left to the target system: the staging tree has no
# kernel modules to resolve against.
install: modules provider
	$(MAKE) -C $(KDIR) M=$(ROOT) $(KMAKE_VARS) $(if $(DESTDIR),INSTALL_MOD_PATH=$(DESTDIR) DEPMOD=true) modules_install
	$(ROOT)/userspace-provider/build.sh install $(DESTDIR)

clean:
	-$(MAKE) -C $(KDIR) M=$(ROOT) $(KMAKE_VARS) clean
	rm -rf $(ROOT)/generated
	cargo clean
