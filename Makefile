# rfpipe: plain GNU make; no configure, no recursion.
# The version is the one in debian/changelog's top entry, the record of
# every release: each program prints it, and tests/version.bats checks.
VERSION := $(shell head -n 1 debian/changelog | tr -d '()' | cut -d ' ' -f 2)
ifeq ($(VERSION),)
$(error debian/changelog: no version in its first line)
endif
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
COMPDIR ?= $(PREFIX)/share/bash-completion/completions

empty :=
space := $(empty) $(empty)

CC ?= cc
CFLAGS ?= -O2 -g
override CFLAGS += -std=c11 -Wall -Wextra -Werror -Wshadow -Wpointer-arith \
	-Wstrict-prototypes -Wmissing-prototypes
override CPPFLAGS += -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
	-DRFP_VERSION=\"$(VERSION)\" -I. -MMD -MP

# Each dependency: pkg-config name and the Debian package that provides it.
DEPS = libcurl:libcurl4-openssl-dev jansson:libjansson-dev \
	yaml-0.1:libyaml-dev libcrypto:libssl-dev libpq:libpq-dev
MOCKDEPS = libmicrohttpd:libmicrohttpd-dev

ifeq ($(shell command -v pkg-config),)
$(error pkg-config not found: install the Debian package pkg-config)
endif
ifeq ($(filter clean lint,$(MAKECMDGOALS)),)
$(foreach d,$(DEPS) $(MOCKDEPS),$(if $(shell pkg-config --exists \
	$(firstword $(subst :, ,$d)) && echo y),,$(error \
	$(firstword $(subst :, ,$d)) not found: install the Debian package \
	$(lastword $(subst :, ,$d)))))
endif

PKGS = $(foreach d,$(DEPS),$(firstword $(subst :, ,$d)))
override CFLAGS += $(shell pkg-config --cflags $(PKGS))
# libpq is loaded at run time (lib/state/pg.c), only for a postgresql://
# state; libcurl is linked into rfp-fetch, and loaded by the others only
# to read an origin (lib/record/hdr.c): it costs each start 13 ms.
LDLIBS = $(shell pkg-config --libs $(filter-out libpq libcurl,$(PKGS))) \
	-lm -pthread -ldl
CURLLIBS = $(shell pkg-config --libs libcurl)
MOCKLIBS = $(shell pkg-config --libs libmicrohttpd) -lpthread

B ?= .
STAGES = fetch parse classify backoff sink queue
# The stages, and rfp-report, which reads a run directory and writes nothing there.
PROGS = $(STAGES) report
BINS = $(PROGS:%=$(B)/bin/rfp-%)
DRIVER = $(B)/bin/rfpipe
MOCK = $(B)/bin/rfp-mockportal
LIBSRC = $(wildcard lib/*/*.c)
LIBOBJ = $(LIBSRC:%.c=$(B)/obj/%.o)
LIBA = $(B)/obj/lib/librfp.a
# What acts for a stage's main (messages, options, the stage loop): it
# prints and exits, which nothing in lib/ does; linked before librfp.a.
CMDSRC = $(wildcard cmd/*.c)
CMDOBJ = $(CMDSRC:%.c=$(B)/obj/%.o)
CMDA = $(B)/obj/cmd/librfpcmd.a
UNITSRC = $(wildcard tests/unit/*.c)
UNITS = $(UNITSRC:tests/unit/%.c=$(B)/bin/unit-%)
MOCKSRC = $(wildcard tests/mockportal/*.c)
MANS = $(wildcard man/*.1 man/*.7)
# The mock portal is a test tool: documented, built, never installed.
INSTMANS = $(filter-out man/rfp-mockportal.1,$(MANS))

all: programs $(MOCK)

# What is installed: the stages and rfpipe.
programs: $(BINS) $(DRIVER)

$(B)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# What prints the version (--version, the user agent) is rebuilt with it.
$(B)/obj/cmd/opt.o $(B)/obj/fetch/xfer.o: debian/changelog

# rfpipe is pipeline.sh with the version filled in; the copy in the source
# tree reads it from debian/changelog when asked.
$(DRIVER): pipeline.sh debian/changelog
	@mkdir -p $(@D)
	sed 's/@VERSION@/$(VERSION)/' pipeline.sh >$@.tmp
	chmod 755 $@.tmp
	mv $@.tmp $@

$(LIBA): $(LIBOBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $(LIBOBJ)

$(CMDA): $(CMDOBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $(CMDOBJ)

objs = $(patsubst %.c,$(B)/obj/%.o,$(wildcard $(1)/*.c))
.SECONDEXPANSION:
$(B)/bin/rfp-%: $$(call objs,$$*) $(CMDA) $(LIBA)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/bin/rfp-fetch: LDLIBS += $(CURLLIBS)

$(MOCK): $(MOCKSRC:%.c=$(B)/obj/%.o) $(CMDA) $(LIBA)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(MOCKLIBS)

$(B)/bin/unit-%: $(B)/obj/tests/unit/%.o $(CMDA) $(LIBA)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Unit tests, then the bats suites with this build's bin/ first in PATH;
# a test that hangs fails after RFP_TEST_TIMEOUT seconds (that of
# BATS_TEST_TIMEOUT, or 240, unless set), even when the hung command runs
# inside "run", and what it left running is killed
# (tests/test_helper.bash: hang_guard, strays; tests/harness.bats).
# Five files at once on two cores: a file alone waits a third of its time
# (scaled sleeps, the mock's delays); at four, the cores were busy for
# 85 % of the pass: all 681 tests (make test) took 355 s, at five 316 s.
# Every test held at seven (tests/chaos.bats: its timeouts, its kill).
units: $(UNITS)

# The files longest first: a file's tests run one after another, and
# started among the last, resume.bats (110 s alone) had set the length of
# the whole pass, with the other jobs done; its twelve seeds are now two
# files of six (resume, resume-more), run at once.  truth.bats (71 s
# alone, most of it waiting) had started last, by name.  Timed at four
# jobs (bats --timing, 2 cores): limiters 154 s, pg 108, pg-hosts 107,
# pipeline 105, operator 100, fetch 67, resume 49, bench 46, pace 39,
# mockportal 37, chaos 34, resume-more 31, truth 27; in that order the
# pass is 303 s of tests at the least, 312 in the order before.  parse
# (42 s) and submit (38) came after them by name; in the sanitizer pass,
# three files at once, they are its longest after pg and fetch (52 and
# 47 s of tests), and submit started about two minutes into a pass of
# three (3 min 12 s, 3 min 2 s after).
SLOW_SUITES = limiters pg pg-hosts pipeline operator fetch parse resume \
	submit bench pace mockportal chaos resume-more truth
# memcheck.bats runs alone, after the others: valgrind keeps a core busy
# for its minute, and beside it the limiters' counts of refusals, which
# hold on a machine no busier than five suites make it, were crossed
# twice in two runs of .ci/run (7 refused of 67 against 3; a quota of 30
# spent on 29).
MEMCHECK = tests/memcheck.bats
SUITES = $(SLOW_SUITES:%=tests/%.bats) \
	$(filter-out $(SLOW_SUITES:%=tests/%.bats) $(MEMCHECK),$(sort $(wildcard tests/*.bats)))

BATS_RUN = PATH="$(abspath $(B))/bin:$$PATH" RFPIPE_ROOT="$(CURDIR)" \
	bats --jobs $${BATS_JOBS:-5} --no-parallelize-within-files $(SUITES)

# The suites after the units, never beside them, even under make -j.
test: all run-units
	$(BATS_RUN)
	$(MAKE) SUITES=$(MEMCHECK) suites

# test's two halves: the units' programs, one after another; the suites.
run-units: $(UNITS)
	@for u in $(UNITS); do echo "# $$u"; $$u || exit 1; done

suites: all
	$(BATS_RUN)

ASAN = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all
ASAN_MAKE = $(MAKE) B=build/asan CFLAGS="$(ASAN)" \
	LDFLAGS="-fsanitize=address,undefined"
NPROC := $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
# One step after another, each build on every core first: the tests,
# timing-bound, never run beside a compiler or the fuzzers.  The fuzzers
# run one a core, as far as 2 s reach.
# The sanitizer pass runs three files at once: every process is two to
# three times slower under it, and its suites are the busiest.  Two had
# been the most once, when the timing-bound tests (a stop within seconds
# of a signal, the pace's counts) failed at three; the pace's suite is
# skipped here since.  Its 357 tests, on a 2-core machine: 212 s at two
# at once, 176 s at three, 183 s at four, none failing.
# The sanitizer pass runs every suite but these: those of whole runs and
# of the driver, whose stages take the paths the other suites take, with
# more processes (pipeline, operator, chaos, the crash-and-resume seeds,
# the limiters, pipelines standing in for hosts); the pace's timed counts
# (its code is its unit tests', run in this pass); and what is not the
# stages' code (the mock, the bench's harness, the examples, the demo,
# the man pages, the version, the package, the test harness).  With them
# the pass took eight of the suite's sixteen minutes on a 2-core machine;
# without, four.  truth.bats stays: it alone runs the claims of another
# pipeline and the rewrite of results by another sink.  A new suite runs
# under the sanitizers until it is named here.  The mock portal it starts (a
# test tool, its own suite left out) is the plain build's: under the
# sanitizers each of its starts and exits took 60 ms (40 of them the leak
# check), and it served every request of the pass two to three times
# slower (fetch.bats and submit.bats: 65 CPU-seconds, then 52).  Nor
# does it run options.bats and files.bats (52 s of the pass's wall time
# between them, at two at once 26): each stage's refusal of a bad option,
# configuration or run directory before it reads a line (the option and
# configuration parsers are fuzz-check's num, conf and ydoc, under the
# same sanitizers); the whole suite had grown to 10 min 33 s on a 2-core
# machine.  Nor memcheck.bats, which runs the plain build's stages under
# valgrind (memcheck finds what the sanitizers do not: a value read
# before it was written, and what only -O2 does).
#
# check runs each suite once: those named here in the plain build, the
# others under the sanitizers only.  So the stages' own suites do not run
# against the -O2 build that is installed: make test runs every suite
# there, and is worth a run before a release.  Run in both, the suite
# took 9 min 48 s to 10 min 18 s of .ci/run on a 2-core machine, where
# the plain pass spent about 190 of its 540 CPU-seconds on the suites
# the sanitizer pass runs again; once, 8 min 29 s.
ASAN_SKIP = pipeline operator chaos resume resume-more limiters pg-hosts \
	pace mockportal bench examples demo man version deb harness options \
	files memcheck
check:
	$(MAKE) -j$(NPROC) all units fuzz-build
	$(MAKE) run-units
	$(MAKE) SUITES="$(filter $(ASAN_SKIP:%=tests/%.bats),$(SUITES))" suites
	$(MAKE) SUITES=$(MEMCHECK) suites
	$(ASAN_MAKE) -j$(NPROC) all units
	$(MAKE) -j$(NPROC) --output-sync=target fuzz-check asan-run-units
	BATS_JOBS=$${BATS_JOBS:-3} $(ASAN_MAKE) \
		SUITES="$(filter-out $(ASAN_SKIP:%=tests/%.bats),$(SUITES))" \
		RFP_MOCKPORTAL="$(CURDIR)/bin/rfp-mockportal" \
		ASAN_OPTIONS=$(ASAN_RUN) suites

# The sanitizer build's units run beside the fuzzers, which run for a
# time, not a count: the units need no quiet machine (their clocks are
# simulated), and unit-pace alone took 14 s of the sanitizer pass.
ASAN_RUN = detect_leaks=1:abort_on_error=1
asan-run-units:
	$(ASAN_MAKE) ASAN_OPTIONS=$(ASAN_RUN) run-units

install: programs
	$(if $(findstring $(space),$(DESTDIR)$(PREFIX)),$(error \
		DESTDIR and PREFIX may not hold a space))
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man7
	install -m 755 $(BINS) $(DESTDIR)$(BINDIR)/
	install -m 755 $(DRIVER) $(DESTDIR)$(BINDIR)/rfpipe
	install -m 644 $(filter %.1,$(INSTMANS)) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(filter %.7,$(INSTMANS)) $(DESTDIR)$(MANDIR)/man7/
	install -d $(DESTDIR)$(COMPDIR)
	install -m 644 completion/rfpipe.bash $(DESTDIR)$(COMPDIR)/rfpipe

uninstall:
	$(if $(findstring $(space),$(DESTDIR)$(PREFIX)),$(error \
		DESTDIR and PREFIX may not hold a space))
	rm -f $(PROGS:%=$(DESTDIR)$(BINDIR)/rfp-%) $(DESTDIR)$(BINDIR)/rfpipe
	rm -f $(patsubst man/%,$(DESTDIR)$(MANDIR)/man1/%,$(filter %.1,$(INSTMANS)))
	rm -f $(patsubst man/%,$(DESTDIR)$(MANDIR)/man7/%,$(filter %.7,$(INSTMANS)))
	rm -f $(DESTDIR)$(COMPDIR)/rfpipe

# The bench's scripts and every part they source: each named (shellcheck
# reports only on the files it is given; -x reads what they source, from
# bench/, where the source directives start).
lint:
	mandoc -Tlint -W warning $(MANS)
	shellcheck pipeline.sh demo.sh completion/rfpipe.bash scripts/*.sh tests/run tests/*.sh \
		tests/*.bash .ci/run
	cd bench && shellcheck -x *.sh lib/*.sh pg/run.sh

demo: all
	./demo.sh

bench: all
	bench/run.sh

# A small night's HTML report and a screenshot of it, in bench/out/report/.
report-shot: all
	bench/report-shot.sh

# The README's two commands in a minimal Debian 12 root (needs root).
fresh-check:
	scripts/fresh-check.sh

# The Debian package, built from debian/ with objects of its own
# (debian/build), into dist/ with its .buildinfo and .changes; nothing is
# written outside the tree.  Then lintian, which fails it on an error.
# Needs scripts/deps.sh deb.
DEB_ARCH = $(shell dpkg --print-architecture)
DEB_CHANGES = dist/rfpipe_$(VERSION)_$(DEB_ARCH).changes
deb:
	@mkdir -p dist
	dpkg-buildpackage -us -uc -b \
	    --buildinfo-option=-udist --changes-option=-udist \
	    --buildinfo-file=dist/rfpipe_$(VERSION)_$(DEB_ARCH).buildinfo \
	    --changes-file=$(DEB_CHANGES)
	lintian -I --fail-on error $(DEB_CHANGES)
	@echo "make deb: dist/rfpipe_$(VERSION)_$(DEB_ARCH).deb"

# The chaos suite at full size (make check runs it with 500 documents).
chaos: all
	PATH="$(abspath $(B))/bin:$$PATH" RFPIPE_ROOT="$(CURDIR)" \
		CHAOS_N=$${CHAOS_N:-5000} bats tests/chaos.bats

clean:
	rm -rf bin obj build

.PHONY: all programs units test run-units suites asan-run-units check \
	install uninstall lint demo bench \
	chaos clean fresh-check deb report-shot
# Objects are kept, never removed as intermediates: removed at the end of
# one make, they were all compiled again by the next (check's builds and
# its test runs are separate makes).
.SECONDARY:
-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
include tests/fuzz/fuzz.mk
