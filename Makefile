# MetaKernelBench: `make` builds build/mkb; `make check` runs every test
# against an ASan/UBSan build; `make demo` runs the CPU demo.
CC ?= cc
# PG=0 builds without libpq (a postgres:// store is then refused): where the
# libpq headers are missing (the GPU machine, tools/device_setup.sh).
PG ?= 1
PKGS := jansson sqlite3 libcurl $(if $(filter 1,$(PG)),libpq)
# Overridable where pkg-config or the -dev packages are missing (the GPU machine).
# Expanded late (=, not :=): on a fresh machine the packages are installed by
# the $(DEBS_STAMP) prerequisite, after make has read this file.
PKG_CFLAGS ?= $(shell pkg-config --cflags $(PKGS))
PKG_LIBS ?= $(shell pkg-config --libs $(PKGS))
CFLAGS_BASE = -std=c17 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -Wshadow \
	-Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral -Wvla \
	$(if $(filter 1,$(PG)),,-DMKB_NO_POSTGRES) $(PKG_CFLAGS)
LDLIBS = $(PKG_LIBS) -lm -pthread
CFLAGS ?= -O2 -g
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

SRCS := $(wildcard src/*.c)
LIB_SRCS := $(filter-out src/main.c src/cmd_%.c,$(SRCS))
HDRS := $(wildcard src/*.h)
TEST_SRCS := $(wildcard tests/unit/*.c)
# Launch attribution's library (build/libmkb_launch.so, below): CUPTI from CUDA_DIR.
CUDA_DIR ?= /usr/local/cuda-13.0
CUPTI_INC ?= $(CUDA_DIR)/include
CUPTI_LIB ?= $(CUDA_DIR)/targets/x86_64-linux/lib
LAUNCH_PURE := src/launchlog/classify.c src/launchlog/jsonl.c
LAUNCH_HDRS := $(wildcard src/launchlog/*.h)

# The Debian packages the C build needs (tools/bootstrap.sh --debs); set
# DEBS_STAMP= where they cannot be installed and PKG_* point elsewhere.
DEBS_STAMP ?= build/.debs

# The agent's submit client: small, and never sanitized (it runs inside the
# sandbox's memory limit); each mkb copies the one beside it into an attempt.
SUBMIT_SRCS := src/submit_client/main.c src/submit.c src/util.c src/buf.c

all: build/mkb build/mkb-submit build/mkb-relay build/python build/docs/cutedsl/api-index.txt build/libmkb_zygote.so \
	$(if $(wildcard $(CUPTI_INC)/cupti.h),build/libmkb_launch.so)

build/.debs: tools/bootstrap.sh
	@mkdir -p build
	tools/bootstrap.sh --debs && touch $@

# One object per source, with the headers it includes as dependencies
# (-MMD -MP: build/obj/*.d), so an edit recompiles what it touches and `make
# -jN` compiles in parallel. build/obj/ is the release build, build/asan/obj/
# the sanitized one that mkb and the unit tests share. Each tree keeps the
# flags it was built with (.flags): changed flags (PG=0, CFLAGS=...) rebuild
# it whole.
OBJ := build/obj
AOBJ := build/asan/obj
OBJ_CFLAGS = $(CFLAGS_BASE) $(CFLAGS)
AOBJ_CFLAGS = $(CFLAGS_BASE) -O1 -g $(SAN)
TEST_CFLAGS = -Isrc -Itests/unit -I$(AOBJ) -DMKB_SOURCE_ROOT=\"$(CURDIR)\"
objs = $(patsubst %.c,$(1)/%.o,$(2))

# .flags is rewritten only when its text changes (FORCE runs the recipe
# every time; make then compares its time with the objects').
$(OBJ)/.flags $(AOBJ)/.flags: FORCE
	@mkdir -p $(@D)
	@want='$(CC) $(if $(findstring asan,$@),$(AOBJ_CFLAGS),$(OBJ_CFLAGS))'; \
	[ "$$(cat $@ 2>/dev/null)" = "$$want" ] || printf '%s\n' "$$want" > $@
FORCE:

$(OBJ)/%.o: %.c $(OBJ)/.flags Makefile | $(DEBS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(OBJ_CFLAGS) -MMD -MP -c -o $@ $<

# the unit tests' objects see src/ and the generated unit_suites.h
$(AOBJ)/tests/%.o: XCFLAGS = $(TEST_CFLAGS)
$(AOBJ)/%.o: %.c $(AOBJ)/.flags Makefile | $(DEBS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(AOBJ_CFLAGS) $(XCFLAGS) -MMD -MP -c -o $@ $<

-include $(wildcard $(OBJ)/src/*.d $(AOBJ)/src/*.d $(AOBJ)/src/launchlog/*.d $(AOBJ)/tests/unit/*.d)

build/mkb: $(call objs,$(OBJ),$(SRCS))
	$(CC) $(OBJ_CFLAGS) -o $@ $^ $(LDLIBS)

build/asan/mkb: $(call objs,$(AOBJ),$(SRCS))
	$(CC) $(AOBJ_CFLAGS) -o $@ $^ $(LDLIBS)

build/mkb-submit build/asan/mkb-submit: $(SUBMIT_SRCS) src/submit.h src/util.h src/buf.h src/mkb_limits.h Makefile | $(DEBS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -Isrc -O2 -o $@ $(SUBMIT_SRCS) $(LDLIBS)

# An external agent's way to its model (src/relay/main.c): never sanitized either.
build/mkb-relay build/asan/mkb-relay: src/relay/main.c Makefile | $(DEBS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -O2 -o $@ src/relay/main.c

build/asan/unit: $(call objs,$(AOBJ),$(LIB_SRCS) $(LAUNCH_PURE) $(TEST_SRCS))
	$(CC) $(AOBJ_CFLAGS) -o $@ $^ $(LDLIBS)

# The unit suites, found by name in the test files (tests/unit/unit.h): one
# UNIT_SUITE(foo) line per `const struct unit_test foo_tests[] =`.
$(AOBJ)/unit_suites.h: $(TEST_SRCS) Makefile
	@mkdir -p $(@D)
	sed -n 's/^const struct unit_test \([a-z_0-9]*\)_tests\[\] = .*/UNIT_SUITE(\1)/p' $(TEST_SRCS) >$@.tmp
	@[ -s $@.tmp ] || { echo "error: no unit suite found in tests/unit"; rm -f $@.tmp; exit 1; }
	mv $@.tmp $@
$(AOBJ)/tests/unit/main.o: $(AOBJ)/unit_suites.h

# Launch attribution (docs/launch-attribution.md): a CUDA injection library
# that records every kernel through CUPTI. Built by `all` only where CUPTI's
# headers are (CUDA_DIR). Linked against libcupti with a run path, so every
# CUPTI call is checked against the header's prototype at compile time.
# Never sanitized: it is loaded into a Python that is not (its pure parts,
# LAUNCH_PURE, are unit-tested under ASan/UBSan in build/asan/unit).
LAUNCH_CFLAGS = -std=c17 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wno-format-nonliteral -Wvla -O2 -g -fPIC -fvisibility=hidden
build/libmkb_launch.so: src/launchlog/launchlog.c $(LAUNCH_PURE) $(LAUNCH_HDRS) Makefile
	@mkdir -p build
	$(CC) $(LAUNCH_CFLAGS) -shared -isystem $(CUPTI_INC) -o $@ src/launchlog/launchlog.c $(LAUNCH_PURE) \
		-L$(CUPTI_LIB) -Wl,-rpath,$(CUPTI_LIB) -Wl,-z,defs -lcupti -ldl -pthread

# The zygote's child side (docs/judge.md, "Start-up: the zygote"): the
# sandbox and its text form, called through ctypes by grader/mkb_grader/zygote.py
# in each forked candidate. Not part of mkb (src/zygote/ is not src/*.c).
ZYGOTE_SRCS := src/zygote/child.c src/sandbox.c src/sandbox_spec.c src/buf.c src/util.c
build/libmkb_zygote.so: $(ZYGOTE_SRCS) src/sandbox.h src/sandbox_spec.h src/buf.h src/util.h Makefile
	@mkdir -p build
	$(CC) $(LAUNCH_CFLAGS) -D_POSIX_C_SOURCE=200809L -shared -o $@ $(ZYGOTE_SRCS) -Wl,-z,defs

# The grader's Python (a venv with torch, cached outside the clone). A
# wrapper script, not a link: a venv is recognised by the path it is run by.
build/python: grader/requirements.txt tools/bootstrap.sh | $(DEBS_STAMP)
	@mkdir -p build
	venv=$$(tools/bootstrap.sh) && printf '#!/bin/sh\nexec "%s/bin/python" "$$@"\n' "$$venv" > $@.tmp
	chmod +x $@.tmp && mv $@.tmp $@

# The statistics cross-check's Python (tests/python/test_stats_scipy.py):
# numpy and SciPy in a small venv of their own, keyed by the hash of
# tests/requirements-stats.txt as the grader's is by its file, so the
# grader's venv (torch, several GB) is not rebuilt for a test dependency.
build/python-stats: tests/requirements-stats.txt | $(DEBS_STAMP)
	@mkdir -p build
	req=tests/requirements-stats.txt; \
	venv=$${MKB_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/mkb}/stats-venv-$$(sha256sum $$req | cut -c1-16); \
	if [ ! -f "$$venv/.complete" ]; then \
		echo "creating $$venv (numpy, SciPy)" >&2; mkdir -p "$$(dirname "$$venv")" && rm -rf "$$venv.tmp" && \
		python3 -m venv "$$venv.tmp" && \
		"$$venv.tmp/bin/python" -m pip install -q --disable-pip-version-check -r $$req >&2 && \
		rm -rf "$$venv" && mv "$$venv.tmp" "$$venv" && touch "$$venv/.complete" || exit 1; \
	fi; \
	printf '#!/bin/sh\nexec "%s/bin/python" "$$@"\n' "$$venv" > $@.tmp
	chmod +x $@.tmp && mv $@.tmp $@

demo: all
	tools/demo.sh

# The agents' API index of each DSL, from the installed packages (a DSL that
# no Python here can import is skipped): build/docs/<dsl>/api-index.txt.
api-index:
	tools/gen_api_index.sh

# Built with the grader's Python, which has both DSLs (grader/requirements.txt).
build/docs/cutedsl/api-index.txt: build/python tools/gen_api_index.py tools/gen_api_index.sh
	MKB_PYTHON=$(CURDIR)/build/python tools/gen_api_index.sh
	@test -f build/docs/cutedsl/api-index.txt && test -f build/docs/tirx/api-index.txt || \
		{ echo "error: the DSLs' API indexes were not generated (see above)"; exit 1; }

# Functions that invite overflows (git's banned.h list): none may be called.
BANNED_RE := \b(strcpy|strcat|strncpy|sprintf|vsprintf|strtok|gets)[[:space:]]*\(
banned:
	@if grep -nE '$(BANNED_RE)' $(SRCS) $(HDRS) $(TEST_SRCS) $(SUBMIT_SRCS) src/launchlog/*.[ch] src/zygote/*.c; then \
		echo "error: banned function used (see above)"; exit 1; fi

check: all banned build/asan/mkb build/asan/mkb-submit build/asan/mkb-relay build/asan/unit build/python-stats
	tests/run.sh

# Two real attempts (as published, and with --response-format json-object)
# against llama-cpp-python serving a small instruct model from PyPI on
# loopback (tests/model/attempt_real.sh; tools/model_server.sh builds its
# venv once). Slow the first time (the llama.cpp build), so not part of check.
check-model: all
	tests/model/attempt_real.sh

# mkb run killed with SIGKILL at 20 random moments and resumed (about 6 minutes)
check-crash: all build/asan/mkb build/asan/mkb-submit
	MKB=build/asan/mkb tests/slow/run_crash.sh

clean:
	rm -rf build

.PHONY: all api-index banned demo check check-model check-crash clean FORCE
