# Fuzzing with libFuzzer (included by the top-level Makefile).
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="rec ydoc"]  fuzz each target
#   make fuzz-check                                        2 s each, for check
#                                                          (seed 1: a gate, not
#                                                          a search)
#   make fuzz FUZZ_ARGS="-fork=2 -ignore_crashes=1"        more libFuzzer flags
#
# Each target is tests/fuzz/<name>.c, linked with lib/*/*.c and cmd/*.c
# compiled again by
# clang with the sanitizers into build/fuzz/ (never obj/).  Runs work on a
# copy of tests/fuzz/corpus/<name> in build/fuzz/corpus/<name>, so what the
# fuzzer finds never lands in the repository; crashes are written to
# build/fuzz/artifacts/.  Inputs kept under tests/fuzz/crashes/<name>/ are
# replayed first, as regression tests.  Needs the Debian packages clang and
# libclang-rt-14-dev (the libFuzzer runtime; its version follows clang's).

FUZZ_CC = clang
FUZZ_SECONDS ?= 60
FUZZ_DIR = build/fuzz
FUZZ_ALL = conf hdr id ledger num rec scan ydoc \
	wire
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_SAN = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -g -O1
FUZZ_CFLAGS = $(FUZZ_SAN) -std=c11 -Wall -Wextra -Werror -Wshadow \
	-Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes \
	$(shell pkg-config --cflags $(PKGS))
FUZZ_LIBOBJ = $(LIBSRC:%.c=$(FUZZ_DIR)/%.o) $(CMDSRC:%.c=$(FUZZ_DIR)/%.o)
FUZZ_LIBA = $(FUZZ_DIR)/librfp.a
# The rec target serves one fd from memory in short reads (see rec.c).
FUZZ_LDFLAGS_rec = -Wl,--wrap=read

# Say which Debian package is missing rather than fail in the compiler.
fuzz-toolchain:
	@command -v $(FUZZ_CC) >/dev/null || { echo "fuzz: $(FUZZ_CC) not" \
		"found: install the Debian packages clang and" \
		"libclang-rt-14-dev" >&2; exit 1; }
	@mkdir -p $(FUZZ_DIR)
	@echo 'int LLVMFuzzerTestOneInput(void) { return 0; }' | \
		$(FUZZ_CC) -x c $(FUZZ_SAN) -o $(FUZZ_DIR)/probe - \
		2>/dev/null || { v=$$($(FUZZ_CC) -dumpversion | \
		cut -d. -f1); echo "fuzz:" \
		"$(FUZZ_CC) cannot link -fsanitize=fuzzer,address,undefined:" \
		"install the Debian package libclang-rt-$$v-dev" >&2; exit 1; }
	@rm -f $(FUZZ_DIR)/probe

$(FUZZ_DIR)/%.o: %.c | fuzz-toolchain
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_LIBA): $(FUZZ_LIBOBJ)
	rm -f $@
	$(AR) rcs $@ $(FUZZ_LIBOBJ)

$(FUZZ_DIR)/bin/fuzz-%: $(FUZZ_DIR)/tests/fuzz/%.o $(FUZZ_LIBA)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_SAN) $(FUZZ_LDFLAGS_$*) -o $@ $^ $(LDLIBS)

fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/bin/fuzz-%)

fuzz: fuzz-build
	FUZZ_ARGS="$(FUZZ_ARGS)" tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) \
		$(FUZZ_TARGETS)

# check replays the saved crashes and then walks the same inputs each
# time (seed 1, as far as 2 s reach): it gates, and does not fail one run
# in a hundred on what a search found that day.  Searching is make fuzz.
# One rule a target, so that make -j runs them side by side.
fuzz-check: $(FUZZ_TARGETS:%=fuzz-check-%)
$(FUZZ_TARGETS:%=fuzz-check-%): fuzz-check-%: $(FUZZ_DIR)/bin/fuzz-%
	@FUZZ_ARGS="-seed=1 $(FUZZ_ARGS)" tests/fuzz/run.sh $(FUZZ_DIR) 2 $*
.PHONY: fuzz fuzz-check fuzz-build fuzz-toolchain \
	$(FUZZ_TARGETS:%=fuzz-check-%)
.PRECIOUS: $(FUZZ_DIR)/%.o
-include $(shell find $(FUZZ_DIR) -name '*.d' 2>/dev/null)
