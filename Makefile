# attograd -- one Makefile, no CMake. `make help` lists the targets.
#
# Sources are found by wildcard: adding src/tensor/ops/<op>.c or tests/test_<op>.c needs no
# change here. Every library source is built twice: build/f32 (float, the real thing) and
# build/f64 (-DAG_DOUBLE, where the gradient checks are tight).

CC      ?= cc
# -O3 so the row kernels vectorize. Never -ffast-math or -Ofast (they break GELU and softmax edge
# cases). Not -march=native: GCC 12 with it miscompiled a constant vector store on this CPU
# (tests/test_attention_ops.c's three-token example caught it).
# -fno-math-errno: sqrt becomes one instruction (we never read errno), unlike -ffast-math it
# changes no result.
CFLAGS  ?= -O3 -fno-math-errno -g
# OpenMP is the one thread pool (src/tensor/parallel.h); OpenBLAS is kept single-threaded
OMP      = -fopenmp
WARN     = -Wall -Wextra
STD      = -std=c11 -D_DEFAULT_SOURCE
DEPS_PKGS = libopenblas-dev check pkg-config gnuplot-nox libjansson-dev libopenmpi-dev openmpi-bin python3 libmicrohttpd-dev graphviz
# recursive (=) so pkg-config only runs once `make deps` has installed it, and then once:
# $(call once,NAME,COMMAND) runs COMMAND the first time NAME is read and keeps its output (each
# compile read ALL_CFLAGS: 314 pkg-config runs, 4 s of CPU, in make test's build)
once = $(eval $(1) := $(shell $(2)))$($(1))
PKG_CFLAGS = $(call once,PKG_CFLAGS,pkg-config --cflags openblas jansson 2>/dev/null)
PKG_LIBS   = $(call once,PKG_LIBS,pkg-config --libs openblas jansson 2>/dev/null || echo -lopenblas -ljansson)
CHECK_LIBS = $(call once,CHECK_LIBS,pkg-config --libs check 2>/dev/null || echo -lcheck)
ALL_CFLAGS = $(STD) $(WARN) $(OMP) $(CFLAGS) $(DEFS) $(EXTRA_CFLAGS) $(PKG_CFLAGS) -Isrc
# libmvec: glibc's vector expf, called by the fast kernels (see src/tensor/fast/fast.h), on
# x86-64 glibc only: the machine the compiler builds for, not the one it runs on (build/arm64)
TARGET    := $(shell $(CC) -dumpmachine 2>/dev/null)
MVEC       = $(if $(filter x86_64-linux-gnu x86_64-%-linux-gnu,$(TARGET)),-lmvec)
LIBS       = $(OMP) $(PKG_LIBS) $(MVEC) -lm
# GCC 12 for arm64 crashes (an internal compiler error in vect_transform_reduction) at -O3 on a
# loop such as `for (...) worst = fmax(worst, fabs(x[i]))` with float x: as plain calls, fmax and
# fmin are not vectorized there. The library has none; tests and examples do.
ALL_CFLAGS += $(if $(filter aarch64-%,$(TARGET)),-fno-builtin-fmax -fno-builtin-fmin)

# REFERENCE=1: the library with the reference kernels only (ops/<op>.c), without src/tensor/fast/,
# built under build/ref (src/tensor/kernel.h explains the two paths)
ifeq ($(REFERENCE),1)
FAST_SRC :=
DEFS     += -DAG_REFERENCE
else
FAST_SRC := $(wildcard src/tensor/fast/*.c src/optim/fast/*.c)
endif
LIB_SRC  := $(wildcard src/tensor/*.c src/tensor/ops/*.c src/params/*.c src/io/*.c src/data/*.c src/nn/*.c src/optim/*.c src/check/*.c src/train/*.c src/lm/*.c src/serve/*.c) $(FAST_SRC) \
            src/dist/dist_none.c
TEST_SRC := $(wildcard tests/*.c)
LM_SRC   := $(wildcard examples/char_lm/*.c)
# char_lm's own tests, beside it: its binaries (test_lm_f32, test_lm_f64) link them with the
# shared test helpers (tests/*.c but the test files) and char_lm's objects; test_f32/f64 link the
# library alone
LM_TEST_SRC := $(wildcard examples/char_lm/tests/*.c)
# everything of char_lm but main() (and serve.c, its model for the library's serve, which would
# pull in the HTTP side: `# --- serve ---`) is also linked into char_lm's tests
LM_LIB_SRC := $(filter-out examples/char_lm/main.c examples/char_lm/serve.c,$(LM_SRC))
HEADERS  := $(wildcard src/*.h src/*/*.h src/*/*/*.h tests/*.h examples/char_lm/*.h examples/char_lm/tests/*.h examples/one_step/*.h)
# src/dist (dist.h): the transport of data-parallel training. libattograd.a holds dist_none.o
# (one process), so any program links without MPI; an MPI program (char_lm_mpi, reverse_mpi)
# links dist_mpi.o, built with mpicc, before the archive: the linker then never takes
# dist_none.o out of it (an archive member is taken only for a symbol still undefined).
MPICC   ?= mpicc
HAVE_MPI := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)

B = build
ifeq ($(REFERENCE),1)
B = build/ref
endif
LIB32 = $(B)/f32/libattograd.a
LIB64 = $(B)/f64/libattograd.a

# Parallel by default: -j from the core count, set once at the top make (sub-makes share its job
# slots); `make -j1 ...` still runs one job at a time. Every build rule names all it reads (the
# generated suites.inc included), so no order of jobs races; `clean` beside other goals runs serially.
NPROC := $(shell nproc 2>/dev/null || echo 1)
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(NPROC)
endif
ifneq ($(filter clean,$(MAKECMDGOALS)),)
.NOTPARALLEL:
endif

# `all` is the first rule, so a plain `make` builds it
.PHONY: all deps test test-op check run clean help asan bench FORCE
all: $(LIB32) $(B)/char_lm $(B)/attention_demo $(B)/reverse $(if $(HAVE_MPI),$(B)/char_lm_mpi $(B)/reverse_mpi) ## the library, build/char_lm, build/attention_demo, build/reverse (and their _mpi builds with MPI)
FORCE:

help:                                             ## this list
	@grep -E '^[a-z-]+:.*##' Makefile | sed 's/:.*##/\t/'

# --- dependencies: install what is missing (as root), or print the exact command ---
# (installed for this machine's architecture: with arm64 packages beside, `dpkg -s check` is
# "ambiguous" and every package looked missing, so each `make test` ran apt-get;
# a name with its architecture, libc6:arm64, is looked for in that one: against this machine's,
# the arm64 packages looked missing and each make check ran apt-get again)
deps:                                             ## install missing Debian packages
	@command -v dpkg >/dev/null || { echo "deps: no dpkg here (not Debian/Ubuntu): install the packages yourself (README: macOS)"; exit 0; }; \
	arch=$$(dpkg --print-architecture); missing=""; for p in $(DEPS_PKGS); do \
	  a=$$arch; case $$p in *:*) a=$${p##*:};; esac; \
	  dpkg-query -W -f='$${db:Status-Abbrev}$${Architecture}\n' $$p 2>/dev/null | grep -qE "^ii ($$a|all)$$" || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "deps: all present ($(DEPS_PKGS))"; \
	elif [ "$$(id -u)" = 0 ]; then echo "deps: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	elif command -v sudo >/dev/null 2>&1; then sudo apt-get update -qq && sudo apt-get install -y$$missing || exit 1; \
	else echo "deps: missing$$missing; run as root: apt-get update && apt-get install -y$$missing"; exit 1; fi

# --- the library, float and double ---
$(B)/f32/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@
$(B)/f64/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DAG_DOUBLE -c $< -o $@

$(LIB32): $(LIB_SRC:%.c=$(B)/f32/%.o)
	@rm -f $@; ar rcs $@ $^
$(LIB64): $(LIB_SRC:%.c=$(B)/f64/%.o)
	@rm -f $@; ar rcs $@ $^

# --- tests: the same test sources against both builds ---
# one SUITE(name) line per `Suite *name_suite(void)` in tests/*.c, and in examples/char_lm/tests/*.c
# (see tests/run_tests.c)
# (rebuilt every time, replaced only when it changes: a deleted test file drops its suite)
# Every tests/test_*.c (and examples/char_lm/tests/test_*.c) must define its suite spelled
# exactly so: a file whose suite the grep below would miss (`Suite* x_suite(void)`, or none) fails
# the build, naming the file, instead of being silently left out of the run.
TEST_FILES = $(foreach f,$(TEST_SRC),$(if $(findstring /test_,/$(f)),$(f)))
LM_TEST_FILES = $(foreach f,$(LM_TEST_SRC),$(if $(findstring /test_,/$(f)),$(f)))
# one awk over the files (a grep or two per file was 200 processes, 1.3 s of CPU, each time a make
# needed the test binaries: twice in make test): SUITE lines of every file, and for a test file
# the first misspelled suite line, or none at all, is an error
SUITE_AWK = function fail(m) { print m > "/dev/stderr"; exit 1 } \
  BEGIN { n = split(files, f, " "); for (i = 1; i <= n; i++) want[f[i]] = 1 } \
  /^Suite \*[a-z0-9_]*_suite\(void\)$$/ { ok[FILENAME] = 1; s = $$0; sub(/^Suite \*/, "", s); sub(/_suite\(void\)$$/, "", s); \
    print "SUITE(" s ")"; next } \
  want[FILENAME] && !(FILENAME in mis) && /^[[:space:]]*Suite[[:space:]]*\*[[:space:]]*[A-Za-z0-9_]+_suite[[:space:]]*\(/ { \
    mis[FILENAME] = FNR ":" $$0 } \
  END { for (i = 1; i <= n; i++) { \
    if (!(f[i] in ok)) fail(f[i] ": no line \047Suite *<name>_suite(void)\047 (spelled exactly so, at the start of a line): its tests would never run"); \
    if (f[i] in mis) { l = mis[f[i]]; fail(f[i] ":" substr(l, 1, index(l, ":") - 1) ": a suite spelled \047" substr(l, index(l, ":") + 1) "\047 is not registered; write \047Suite *<name>_suite(void)\047") } } }
# (the library's in gen/suites.inc, char_lm's in gen/lm/suites.inc: each binary's run_tests.o
# includes its own)
$(B)/gen/suites.inc: SUITE_FILES = $(TEST_FILES)
$(B)/gen/suites.inc: SUITE_SRC = $(TEST_SRC)
$(B)/gen/lm/suites.inc: SUITE_FILES = $(LM_TEST_FILES)
$(B)/gen/lm/suites.inc: SUITE_SRC = $(LM_TEST_SRC)
# (Written beside it in a file of this make's own, $@.PID: make test's jobs run sub-makes side by
# side, and with one shared name a make could read another's half-written file, find it changed
# and relink a binary that a job was running.)
$(B)/gen/suites.inc $(B)/gen/lm/suites.inc: FORCE
	@mkdir -p $(dir $@)
	@t=$@.$$$$; \
	  awk -v files="$(SUITE_FILES)" '$(SUITE_AWK)' $(SUITE_SRC) < /dev/null > $$t.all || { rm -f $$t.all; exit 1; }; \
	  sort $$t.all > $$t; rm -f $$t.all; cmp -s $$t $@ || mv $$t $@; rm -f $$t
$(B)/f32/tests/run_tests.o $(B)/f64/tests/run_tests.o: $(B)/gen/suites.inc
$(B)/f32/tests/%.o $(B)/f64/tests/%.o: EXTRA_CFLAGS += -Itests -I$(B)/gen $(TEST_OPT)
$(B)/f32/examples/char_lm/tests/%.o $(B)/f64/examples/char_lm/tests/%.o: \
  EXTRA_CFLAGS += -Itests -Iexamples/char_lm -Iexamples/char_lm/tests $(TEST_OPT)
# char_lm's --help texts: examples/char_lm/help/<command>.txt, written as they print, each line
# quoted into a C string literal ("...\n") that cli.c includes (sed: no tool beyond the build's)
LM_HELP := $(patsubst examples/char_lm/help/%.txt,$(B)/gen/lm/help/%.inc,$(wildcard examples/char_lm/help/*.txt))
$(B)/gen/lm/help/%.inc: examples/char_lm/help/%.txt
	@mkdir -p $(dir $@)
	@sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@.tmp && mv $@.tmp $@
$(B)/f32/examples/char_lm/cli.o $(B)/f64/examples/char_lm/cli.o: $(LM_HELP)
$(B)/f32/examples/char_lm/cli.o $(B)/f64/examples/char_lm/cli.o: EXTRA_CFLAGS += -I$(B)/gen/lm
# char_lm's runner: tests/run_tests.c with char_lm's suites
$(B)/f32/lm/run_tests.o: tests/run_tests.c $(B)/gen/lm/suites.inc
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -I$(B)/gen/lm $(TEST_OPT) -c $< -o $@
$(B)/f64/lm/run_tests.o: tests/run_tests.c $(B)/gen/lm/suites.inc
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DAG_DOUBLE -I$(B)/gen/lm $(TEST_OPT) -c $< -o $@
# the tests' own code (not the library or char_lm's files they link, built as CFLAGS says) at
# -O1: it mostly calls the library, and compiles in 64% of -O3's CPU (tests/*.c, 14 s against
# 22 s, each level twice in turn; make test compiles them twice, f32 and f64). No -ffast-math
# either way: the same results. TEST_OPT= for CFLAGS' level.
TEST_OPT ?= -O1

# the heap is counted through these wrappers (tests/alloc_count.h: the corpus loader's peak);
# check's write for each passing assertion is left out (tests/check_quiet.c: test_f64 took 44.8 s,
# 10.7 of them in the kernel, against 52.3 and 13.8 with it, one run each)
TEST_WRAP = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=_mark_point
$(B)/test_f32: $(TEST_SRC:%.c=$(B)/f32/%.o) $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) $(TEST_WRAP) -o $@ $^ $(CHECK_LIBS) $(LIBS) $(SERVE_LIBS)
$(B)/test_f64: $(TEST_SRC:%.c=$(B)/f64/%.o) $(LIB64)
	$(CC) $(LDFLAGS_EXTRA) $(TEST_WRAP) -o $@ $^ $(CHECK_LIBS) $(LIBS) $(SERVE_LIBS)
# char_lm's tests: its test files, the shared helpers (tests/*.c but the test files and the
# library's runner), its runner, char_lm's objects, the library
LM_TEST_HELPERS = $(filter-out $(TEST_FILES) tests/run_tests.c,$(TEST_SRC))
$(B)/test_lm_f32: $(LM_TEST_SRC:%.c=$(B)/f32/%.o) $(LM_TEST_HELPERS:%.c=$(B)/f32/%.o) $(B)/f32/lm/run_tests.o \
                  $(LM_LIB_SRC:%.c=$(B)/f32/%.o) $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) $(TEST_WRAP) -o $@ $^ $(CHECK_LIBS) $(LIBS) $(SERVE_LIBS)
$(B)/test_lm_f64: $(LM_TEST_SRC:%.c=$(B)/f64/%.o) $(LM_TEST_HELPERS:%.c=$(B)/f64/%.o) $(B)/f64/lm/run_tests.o \
                  $(LM_LIB_SRC:%.c=$(B)/f64/%.o) $(LIB64)
	$(CC) $(LDFLAGS_EXTRA) $(TEST_WRAP) -o $@ $^ $(CHECK_LIBS) $(LIBS) $(SERVE_LIBS)
# the four test binaries of a build tree
test_bins = $(1)/test_f64 $(1)/test_f32 $(1)/test_lm_f64 $(1)/test_lm_f32

# one OpenBLAS thread in tests: results must not depend on the thread count
# (check kills a test after CK_DEFAULT_TIMEOUT seconds; gradchecks of whole blocks need more than 4)
# passive OpenMP waits: on a shared machine, spinning threads make tests 50x slower
TEST_ENV = OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive CK_DEFAULT_TIMEOUT=600

# --- the runner (tests/run_suites.sh): jobs side by side, NPROC at once, the slow ones first; a
# line per job (its checks passed, its seconds and CPU seconds, a failure's lines), the CPU of
# all, and a closing "N passed, N failed". Its
# lines start with `+`: a job's own make (test-step, ...) shares this make's job slots.
# $(call job,LABEL,COMMAND): one line of the list the runner reads
job = echo '$(1) $(2)';
# $(call suite_job,LABEL,BINARY,SUITE[,ENV]): one check suite of one test binary (DIR/test_f32 or
# DIR/test_f64; a suite of char_lm's runs in DIR/test_lm_f32 or DIR/test_lm_f64)
LM_SUITES := $(shell sed -n 's/^Suite \*\([a-z0-9_]*\)_suite(void)$$/\1/p' $(LM_TEST_SRC))
suite_bin = $(if $(filter $(2),$(LM_SUITES)),$(dir $(1))test_lm_$(patsubst test_%,%,$(notdir $(1))),$(1))
suite_job = $(call job,$(1)/$(3),$(TEST_ENV) $(4) CK_RUN_SUITE=$(3) ./$(call suite_bin,$(2),$(3)))
# $(call run_jobs,LIST,NAME[,SLOTS]): runs them, SLOTS (NPROC) at once, logs in build/runs/NAME/
run_jobs = { $(1) } | tests/run_suites.sh $(B)/runs/$(2) $(or $(3),$(NPROC))
SUB_MAKE = $(MAKE) -s --no-print-directory
# the suites of a build tree, read when a recipe runs (after its suites.inc is made)
suites_of = $(shell sed -n 's/^SUITE(\(.*\))$$/\1/p' $(1)/gen/suites.inc $(1)/gen/lm/suites.inc)
# Where each suite runs. Numeric suites (ops, layers, gradients, fast == reference, the trainer's
# arithmetic, checkpoints' tensors) run on both builds: float and double round differently. The
# suites below test the program and its run machinery (the time budget, the corpus loader, the
# Makefile's suite discovery, dynamics and trace logging, run directories, errors and signals
# of the char_lm process): `make test` runs them once, on the float build (char_lm's own;
# rundir's process cases are float-only), `make check` on double as well.
ONCE_SUITES = budget corpus discovery dynamics errors reverse rundir signals trace
# ... and those of char_lm's process and a run's report card (serve, lessons_cli, report), and
# those that write and read the same bytes in either build (safetensors_limits: the size limits,
# the Python reader): their double runs, 7.4 s of CPU, are make check's
ONCE_SUITES += lessons_cli report safetensors_limits serve serve_lib
# the slow ones, slowest first (measured on 2 cores: make test's job lines), so that the short
# ones fill the gaps
SLOW_SUITES = rundir reverse budget safetensors_limits safetensors errors char_lm signals grad_accum dynamics trace \
              fast_ref_products fast_ref_rows rmsnorm corpus
slow_first = $(filter $(1),$(SLOW_SUITES)) $(filter-out $(SLOW_SUITES),$(1))

# `make test`: every suite (numeric ones on both builds, the program's once), lesson 13's step,
# the installed library and the lessons' exercises, MPI, the reader's promises. About 3 minutes
# from a fresh clone on 2 cores; the rest of the matrix is `make check`.
# (every program a job runs: built before the first job starts, in the one parallel make, not
# inside a job while the others wait for its slot)
TEST_BINS = $(call test_bins,$(B)) $(B)/char_lm $(B)/one_step $(B)/reverse $(B)/bench $(B)/attention_demo \
            $(if $(HAVE_MPI),$(B)/dist_check $(B)/test_mpi $(B)/char_lm_mpi $(B)/char_lm_mpi_other $(B)/reverse_mpi $(B)/reverse_mpi_other)
# MPI's job mostly waits (its tests side by side: 30 s of CPU in 46 s, measured at load 7-9):
# '~', beside the JOB_SLOTS. The lessons' job is the slowest of the rest (82 s in make test on a
# quiet machine): first. (The page in headless chromium, 8 s of CPU and 25 s in make test, is
# make check's: it tests serve's page, not what a learner's change to an op or a layer breaks.)
TEST_JOBS = $(if $(HAVE_MPI),$(call job,~mpi,$(SUB_MAKE) test-mpi)) $(call job,lessons,$(SUB_MAKE) test-lessons) \
            $(foreach s,$(call slow_first,$(call suites_of,$(B))),$(call suite_job,f32,$(B)/test_f32,$(s)) \
              $(if $(filter $(s),$(ONCE_SUITES)),,$(call suite_job,f64,$(B)/test_f64,$(s)))) \
            $(call job,step,$(SUB_MAKE) test-step) \
            $(call job,install,$(SUB_MAKE) test-install) $(call job,readable,$(SUB_MAKE) test-readable)
# one job more than the cores: some jobs hold their slot while they wait (rundir's locks and
# timeouts: 64 s for 27 s of CPU in make test; the lessons' processes; budget's wall clock,
# signals, the error table's processes, safetensors_limits' 100 MB file). In a run of make check
# at load 8-12, f64/errors took 20 s for 2 s of CPU, f64/budget 24 s for 4 s, while the arm64 job
# beside them took 2.3 s for each second of its CPU. A third job uses the core they leave: make
# test's jobs on 2 cores, built, took 128, 133 and 123 s with 3 slots, 143 and 147 s with 2.
JOB_SLOTS = $(shell echo $$(($(NPROC) + 1)))
# the last `make test` that passed, for `make check`: newer than every binary and tracked file.
# Compared by find, not `make -q`: suites.inc hangs on FORCE, so make -q called every binary
# stale and make check ran all of make test's jobs again.
# python3 found once for all the jobs, its own folder first in PATH: a version manager's shim
# (pyenv's, a bash script that looks the version up again) costs 0.45 s of CPU a start, and the
# jobs start python ~15 times (the lessons' figures and blocks, the safetensors checker, the
# reading path's tools)
PY_PATH = py=$$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))' 2>/dev/null) && \
          [ -n "$$py" ] && PATH="$$py:$$PATH" && export PATH
TEST_STAMP = $(B)/runs/test.passed
# (the tracked files listed by the shell when the recipe runs, not written into it: 764 paths,
# 33 KB, made check-jobs' script longer than one argument may be, 128 KB: "Argument list too long")
test_passed = [ -e $(TEST_STAMP) ] && [ -z "$$(find $(TEST_BINS) $$(git ls-files 2>/dev/null) -newer $(TEST_STAMP) 2>/dev/null | head -n 1)" ]
test: deps                                        ## every suite (numeric ones on float and double), step, install, MPI: ~3 min
	@$(MAKE) --no-print-directory test-jobs
.PHONY: test-jobs
test-jobs: $(TEST_BINS)
	+@$(PY_PATH); $(call run_jobs,$(TEST_JOBS),test,$(JOB_SLOTS))
	@touch $(TEST_STAMP)

# `make test-op OP=gelu`, after editing one op: rebuilds the test binaries (the op's object and
# two links), then runs on double and float the test cases tagged with its name
# (tcase_set_tags(tc, "gelu ..."): its gradient check, on both kernel tables, its fast ==
# reference check, the layers built on it) and the suite of that name, if there is one. A failing
# gradient check prints its line: the op, the table, the worst element, the relative error.
# A name that is neither a suite nor a tag stops make at once, in one line (read from the test
# files themselves: `Suite *<name>_suite(void)`, tcase_set_tags(x, "...") and fast_ref_rows'
# ADD_OP(s, "<op>", ...)).
ifneq ($(filter test-op,$(MAKECMDGOALS)),)
OP_SUITES := $(shell sed -n 's/^Suite \*\([a-z0-9_]*\)_suite(void)$$/\1/p' $(TEST_SRC) $(LM_TEST_SRC))
OP_TAGS := $(sort $(shell sed -n 's/.*tcase_set_tags[(][a-z_]*, "\([^"]*\)"[)].*/\1/p; s/.*ADD_OP.s, "\([^"]*\)".*/\1/p' $(TEST_SRC)))
ifneq ($(words $(OP)),1)
$(error test-op: name one op, e.g. make test-op OP=gelu)
else ifeq ($(filter $(OP),$(OP_SUITES) $(OP_TAGS)),)
$(error test-op: no suite or tag named '$(OP)'; the ops and layers: $(OP_TAGS); the suites: $(OP_SUITES))
endif
endif
.PHONY: test-op
test-op:                                          ## OP=gelu: one op's tests (gradcheck on both tables, fast == reference, layers), double and float: ~15 s
	@$(MAKE) --no-print-directory $(B)/test_f64 $(B)/test_f32 $(if $(filter $(OP),$(LM_SUITES)),$(B)/test_lm_f64 $(B)/test_lm_f32)
	+@$(call run_jobs,$(foreach b,f64 f32,$(if $(filter $(OP),$(OP_SUITES)),$(call suite_job,$(b),$(B)/test_$(b),$(OP))) \
	  $(call job,?$(b)/tagged:$(OP),$(TEST_ENV) CK_INCLUDE_TAGS=$(OP) ./$(B)/test_$(b))),op)

# `make check`: the full matrix, what .ci/run runs after `make test`: make test's jobs (again
# only when something changed since it passed), the program's suites on double too, the kernel
# suites on the reference table and a REFERENCE=1 library's step, the sanitizers, valgrind, the
# fuzzers, serve's page in headless chromium, the clang build's suites and the arm64 stage. All is built first, in one parallel make
# (each tree its own, the arm64 one too), then run side by side. Nothing runs twice the same way: the clang build
# runs the suites as make test does (the program's once, on float), ASan likewise; valgrind
# runs char_lm's train, resume, sample and eval, the error table's leaks are ASan's (VG_RUNS_JOB).
# The jobs in the order that keeps both cores busy to the end: the longest first (ASan's rundir,
# then its reverse and budget, the arm64 products, the fuzzers' fixed seconds), the short ones
# last (the reference table's, the single checks).
CHECK_BUILDS = ref-build asan-build vg-build fuzz-build clang-build cov-build arm64-build
CHECK_JOBS = $(ASAN_JOBS) $(ARM64_JOBS) $(call fuzz_jobs,$(CHECK_FUZZ_SECONDS)) $(VG_RUNS_JOB) \
             $(foreach s,$(call slow_first,$(filter $(ONCE_SUITES),$(call suites_of,$(B)))),$(call suite_job,f64,$(B)/test_f64,$(s))) \
             $(CLANG_JOBS) $(REF_JOBS) $(call job,path-coverage,$(PATH_COVERAGE)) $(call job,browser,$(SUB_MAKE) browser-run) \
             $(call job,commit,$(SUB_MAKE) test-commit) $(call job,mutate-check,python3 tools/mutate.py --check)
check: deps                                       ## the full matrix: program suites on double, the reference table, ASan, valgrind, fuzz, clang, arm64
	@$(MAKE) --no-print-directory deps-valgrind && $(MAKE) --no-print-directory deps-fuzz && \
	  $(MAKE) --no-print-directory deps-browser && $(MAKE) --no-print-directory deps-arm64   # apt-get, one at a time
	@$(MAKE) --no-print-directory check-jobs
.PHONY: check-jobs $(CHECK_BUILDS)
check-jobs: $(TEST_BINS) $(CHECK_BUILDS)
	+@$(PY_PATH); again=1; if $(test_passed); then again=; \
	  echo "check: make test passed on these very files ($(TEST_STAMP)): its jobs are not run again"; fi; \
	$(call run_jobs,if [ -n "$$again" ]; then $(TEST_JOBS) fi; $(CHECK_JOBS),check,$(JOB_SLOTS)) && \
	  { [ -z "$$again" ] || touch $(TEST_STAMP); }

# what a reader is promised (issue 17): no function over 60 lines, and docs/reading-order.md's
# path (en and zh) true of the tree, line count by line count, and 2,000 lines or fewer; and
# the layers (issue 31): src/train names no model, nothing below src/lm includes it
.PHONY: test-readable
test-readable:                                    ## functions of 60 lines or fewer; the afternoon read's counts; layers
	python3 tools/funclen.py --max 60
	python3 tools/reading_path.py --check --quiet --max 2000
	python3 tools/layers.py

# what the afternoon read promises, run (issue 30): a default char_lm train on the reference
# table, built with gcov in build/cov (-O0 --coverage, its own tree), executes every function of
# docs/reading-order.md's path, or tools/path_coverage.py names the ones it did not and fails
COV = $(B)/cov
PATH_COVERAGE = python3 tools/path_coverage.py --build $(COV) --kernels reference --iters 20
.PHONY: cov-build check-path-coverage
cov-build:
	@$(MAKE) --no-print-directory B=$(COV) CFLAGS="-O0 -g --coverage" LDFLAGS_EXTRA=--coverage $(COV)/char_lm
check-path-coverage: cov-build                    ## a default char_lm train runs every function of the reading path (gcov; part of make check)
	$(PATH_COVERAGE)

# tools/mutate.py breaks each backward in turn and reports the test that caught it. It edits the
# tree it runs in, so it runs in a copy, build/mutate (copied afresh: an object a stopped run
# built from a mutated file is newer than the file's kept mtime, and would pass for up to date).
# make check runs `--check` (every mutation still applies to the code); this
# target the mutations themselves: MUT_ONLY="fast_ln_ ref_sm_" (id prefixes) for some,
# MUT_SUITES=all for the whole test binaries instead of each op's suites (auto); MUT_FLAGS=
# (empty) to run all of a mutation's suites, not stop at the first that fails (--first). Report:
# build/mutate/mutation_results.md.
MUT = $(B)/mutate
MUT_FLAGS ?= --first
.PHONY: mutate
mutate:                                           ## mutation testing of the backward passes in build/mutate (MUT_ONLY=id prefixes)
	rm -rf $(MUT)/Makefile $(MUT)/src $(MUT)/tests $(MUT)/tools $(MUT)/examples && mkdir -p $(MUT)/examples
	cp -r Makefile src tests tools $(MUT)/ && cp -r examples/char_lm $(MUT)/examples/
	python3 tools/mutate.py --root $(MUT) --suites $(or $(MUT_SUITES),auto) $(MUT_FLAGS) $(MUT_ONLY)

# The suites that check ops and layers (every op's gradient check, fast == reference, the layers,
# the model, the optimizers): make check runs them on the reference table too, and the arm64
# stage those that check ops (ARM64_SUITES). Add a suite here when it checks an op.
KERNEL_SUITES = gradcheck grad_gaps attention_ops elementwise matmul norm_loss rmsnorm swiglu nn gpt padding \
                optim muon softmax fast_ref_rows fast_ref_products fast_targets fused parallel
# make check on the reference table: the kernel suites (and the model's other numeric ones) of the
# default binaries with AG_KERNELS=reference, every ctx on the plain kernels the lessons teach
# (the kernel switch made a second library for that redundant), and the one thing only a library
# built without src/tensor/fast/ shows: that it builds, and replays char_lm's step (test-step),
# built at -O1 in build/ref. `make test-reference` runs the whole suite on a REFERENCE=1 library.
REF = $(B)/ref
REF_SUITES = $(KERNEL_SUITES) grad_accum shards switches switch_values tape torch_ref
REF_JOBS = $(foreach s,$(call slow_first,$(REF_SUITES)),$(foreach b,f32 f64,\
             $(call suite_job,ref-$(b),$(B)/test_$(b),$(s),AG_KERNELS=reference))) \
           $(call job,ref-step,$(SUB_MAKE) REFERENCE=1 B=$(REF) CFLAGS="-O1 -g" test-step)
ref-build:
	@$(MAKE) --no-print-directory REFERENCE=1 B=$(REF) CFLAGS="-O1 -g" $(REF)/char_lm $(REF)/one_step
.PHONY: test-reference
test-reference:                                   ## the whole suite on a REFERENCE=1 library, in build/ref-full (not in make check)
	@$(MAKE) --no-print-directory REFERENCE=1 B=$(B)/ref-full $(call test_bins,$(B)/ref-full) $(B)/ref-full/char_lm
	+@$(call run_jobs,$(foreach s,$(call slow_first,$(call suites_of,$(B)/ref-full)),$(foreach b,f32 f64,\
	  $(call suite_job,ref-$(b),$(B)/ref-full/test_$(b),$(s),CHAR_LM=./$(B)/ref-full/char_lm))),ref)

# lesson 13's program (examples/one_step) against char_lm's own next step: a run to iteration 12
# (dropout on, the clip active, the learning rate in its cosine), a copy of it resumed for one
# step more, and one_step from the first, compared with the copy: the same loss, and every
# weight and Adam moment bit for bit, or the target fails. Then the same without dropout, where
# both split the windows over the threads (char_lm's default flags either way), and with the
# linear decay and the embeddings not decayed (--lr-schedule linear --no-embedding-decay: one_step
# reads both from the config)
STEP_DIR = $(B)/test_step
STEP_RUN = $(TEST_ENV) ./$(B)/char_lm train --data $(STEP_DIR)/text.txt
STEP_FLAGS = --config tiny --max-iters 12 --warmup-iters 5 --lr-decay-iters 100 --eval-iters 2
.PHONY: test-step
test-step: $(B)/char_lm $(B)/one_step             ## examples/one_step replays char_lm's next step exactly
	rm -rf $(STEP_DIR) && mkdir -p $(STEP_DIR)
	head -c 20000 data/tinyshakespeare.txt > $(STEP_DIR)/text.txt
	set -e; for run in "a --dropout 0.1" "c" "l --lr-schedule linear --no-embedding-decay"; do set -- $$run; \
	  $(STEP_RUN) --out $(STEP_DIR)/$$1 $(STEP_FLAGS) $$2 $$3 $$4 > $(STEP_DIR)/$$1.log; \
	  cp -r $(STEP_DIR)/$$1 $(STEP_DIR)/$$1-next; \
	  $(STEP_RUN) --out $(STEP_DIR)/$$1-next --resume --max-iters 13 > $(STEP_DIR)/$$1-next.log; \
	  $(TEST_ENV) ./$(B)/one_step $(STEP_DIR)/$$1 $(STEP_DIR)/text.txt $(STEP_DIR)/$$1-next; done

# the installed library seen from outside: `make install` into a scratch prefix, then
# examples/out_of_tree copied away from the tree (so it cannot reach ../../src), built through
# pkg-config alone and run: an MLP on the float library, a custom op's gradient check on the
# double one (attograd-f64), a model of its own on the installed trainer (ag_train_run), resumed
# bit for bit, and that run served by the installed serve (pkg-config --static: libmicrohttpd)
# with a toy model. Any failing fails the target. (The lessons' solutions: test-lessons.)
OOT = $(abspath $(B)/out_of_tree)
.PHONY: test-install
test-install: $(LIB32) $(LIB64)                   ## install into build/out_of_tree, build and run examples/out_of_tree there
	rm -rf $(OOT) && mkdir -p $(OOT)/example
	@$(MAKE) --no-print-directory install PREFIX=$(OOT)/prefix DESTDIR=
	cp examples/out_of_tree/Makefile examples/out_of_tree/*.c $(OOT)/example/
	$(TEST_ENV) $(MAKE) --no-print-directory -C $(OOT)/example PKG_CONFIG_PATH=$(OOT)/prefix/lib/pkgconfig

# the lessons (docs/lessons, issue 33): their worked solutions (docs/lessons/solutions) built the
# way a learner builds them, against an installed copy of the library, away from the tree (the
# exercises' Makefile and lesson.h copied beside them); then every figure the lessons quote
# against what the programs print now (tools/lesson_figures.py: a stale one fails), and the
# solutions no lesson runs (--run-rest: each program runs once, lesson 17's takes seconds).
LESSONS = $(abspath $(B)/lessons)
.PHONY: test-lessons
test-lessons:                                     ## the lessons' solutions, and every figure the lessons quote
	@$(MAKE) --no-print-directory $(B)/char_lm $(B)/one_step $(B)/bench $(B)/attention_demo $(B)/test_f64
	rm -rf $(LESSONS) && mkdir -p $(LESSONS)/exercises $(LESSONS)/solutions
	@$(MAKE) --no-print-directory install PREFIX=$(LESSONS)/prefix DESTDIR= > /dev/null
	cp docs/lessons/exercises/Makefile docs/lessons/exercises/*.h $(LESSONS)/exercises/
	cp docs/lessons/solutions/*.c $(LESSONS)/solutions/
	$(MAKE) --no-print-directory -s -C $(LESSONS)/exercises PKG_CONFIG_PATH=$(LESSONS)/prefix/lib/pkgconfig all
	$(TEST_ENV) python3 tools/lesson_figures.py --solutions $(LESSONS)/exercises/build --run-rest

# --- the char_lm program ---
$(B)/char_lm: $(LM_SRC:%.c=$(B)/f32/%.o) $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS) $(SERVE_LIBS)

# the same program over MPI (docs/distributed.md): `mpirun -np N build/char_lm_mpi train ...`.
# Only dist_mpi.o sees mpi.h; every other object is char_lm's own.
$(B)/f32/src/dist/dist_mpi.o: src/dist/dist_mpi.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(ALL_CFLAGS) -c $< -o $@
$(B)/char_lm_mpi: $(LM_SRC:%.c=$(B)/f32/%.o) $(B)/f32/src/dist/dist_mpi.o $(LIB32)
	$(MPICC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS) $(SERVE_LIBS)
# the version the ranks show each other before anything else (train_agree.c's handshake)
$(B)/f32/examples/char_lm/train_agree.o $(B)/f64/examples/char_lm/train_agree.o: DEFS += -DLM_VERSION='"$(VERSION)"'
# the commit a run's report card names (DIR/report.md): HEAD when main.o was compiled (char_lm,
# reverse). $(B)/gen/commit holds it and is rewritten only when it changes (as suites.inc), so a
# new HEAD recompiles the two main.o and nothing else; before, a commit that left main.c and the
# headers alone kept the old string in the card. `make test-commit` checks it.
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null)
COMMIT_MAINS = $(B)/f32/examples/char_lm/main.o $(B)/f32/examples/reverse/main.o
$(B)/gen/commit: FORCE
	@mkdir -p $(dir $@)
	@t=$@.$$$$; echo '$(COMMIT)' > $$t; cmp -s $$t $@ || mv $$t $@; rm -f $$t
$(COMMIT_MAINS): $(B)/gen/commit
$(B)/f32/examples/char_lm/main.o: DEFS += $(if $(COMMIT),-DLM_COMMIT='"$(COMMIT)"')
$(B)/f32/examples/reverse/main.o: DEFS += $(if $(COMMIT),-DAG_COMMIT='"$(COMMIT)"')
.PHONY: test-commit
test-commit:                                      ## a new commit recompiles the report card's commit string (main.o)
	+tests/commit_rebuild.sh $(B)
# the same program as another version would be, for test-mpi's mixed job (train_agree.c alone
# compiled with another LM_VERSION)
$(B)/f32/examples/char_lm/train_agree_other.o: examples/char_lm/train_agree.c $(HEADERS)
	$(CC) $(ALL_CFLAGS) -DLM_VERSION='"0.0-other"' -c $< -o $@
$(B)/char_lm_mpi_other: $(filter-out %/train_agree.o,$(LM_SRC:%.c=$(B)/f32/%.o)) \
                        $(B)/f32/examples/char_lm/train_agree_other.o $(B)/f32/src/dist/dist_mpi.o $(LIB32)
	$(MPICC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS) $(SERVE_LIBS)

# --- MPI tests (tests/mpi/, char_lm's in examples/char_lm/tests/mpi/): dist.h's collectives
# across ranks, then char_lm_mpi against char_lm (equal runs for any ranks x micro-batches,
# evaluation, stop and resume, TCP only) and what must not happen (ranks that disagree, a
# stalled rank, signals, control bytes in a log).
# As root mpirun needs the two OMPI_ALLOW_RUN_AS_ROOT variables; without mpicc: skipped.
MPI_ENV = OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPIRUN  = mpirun --oversubscribe
$(B)/f32/tests/mpi/%.o: tests/mpi/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(ALL_CFLAGS) -Itests -c $< -o $@
$(B)/dist_check: $(B)/f32/tests/mpi/dist_check.o $(B)/f32/src/dist/dist_mpi.o $(LIB32)
	$(MPICC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)
# what one allreduce costs (docs/distributed.md): mpirun -np 2 build/allreduce_bench 110529 818241 10795841
$(B)/f32/bench/allreduce.o: bench/allreduce.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(ALL_CFLAGS) -c $< -o $@
$(B)/allreduce_bench: $(B)/f32/bench/allreduce.o $(B)/f32/src/dist/dist_mpi.o $(LIB32)
	$(MPICC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)
# (char_lm's MPI tests, beside it: examples/char_lm/tests/mpi/, built as its other tests)
$(B)/test_mpi: $(B)/f32/examples/char_lm/tests/mpi/test_mpi.o $(B)/f32/tests/proc.o $(LM_LIB_SRC:%.c=$(B)/f32/%.o) $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) -o $@ $^ $(CHECK_LIBS) $(LIBS)
.PHONY: test-mpi
test-mpi:                                         ## the MPI tests (needs mpicc and mpirun)
ifeq ($(HAVE_MPI),1)
	@$(MAKE) --no-print-directory $(B)/dist_check $(B)/test_mpi $(B)/char_lm $(B)/char_lm_mpi $(B)/char_lm_mpi_other \
	  $(B)/reverse $(B)/reverse_mpi $(B)/reverse_mpi_other
	$(MPI_ENV) $(MPIRUN) -np 3 ./$(B)/dist_check
	$(MPI_ENV) CHAR_LM=./$(B)/char_lm CHAR_LM_MPI=./$(B)/char_lm_mpi CHAR_LM_MPI_OTHER=./$(B)/char_lm_mpi_other \
	  REVERSE=./$(B)/reverse REVERSE_MPI=./$(B)/reverse_mpi REVERSE_MPI_OTHER=./$(B)/reverse_mpi_other \
	  ./$(B)/test_mpi
else
	@echo "test-mpi: skipped ($(MPICC) not found; make deps installs Open MPI)"
endif

# one minute on any machine: the budget picks the recipe from the speed it measures (issue 36);
# then the validation loss of the run's last evaluation, from its metrics.csv
run: deps                                         ## train the best GPT one minute holds on Tiny Shakespeare
	@$(MAKE) --no-print-directory $(B)/char_lm
	./$(B)/char_lm train --data data/tinyshakespeare.txt --out out/run --time-budget 60s --overwrite
	@awk -F, 'NR > 1 && $$5 != "" { it = $$1; v = $$5 } END { if (v != "") printf "\nval loss %s at iteration %s (the last evaluation of out/run)\n", v, it }' out/run/metrics.csv

# --- examples/one_step: one char_lm training step written out (lesson 13), on the library alone
# (it reads char_lm's checkpoints with the library's readers); test-step checks it against
# char_lm's next iteration ---
$(B)/one_step: $(B)/f32/examples/one_step/main.o $(B)/f32/examples/one_step/load.o $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)

# --- examples/reverse: a Transformer encoder reverses strings, on the library's trainer alone
# (ag_train_run, src/train/train.h), served by the library's serve; tests/test_reverse.c runs it
# as a child ---
$(B)/reverse: $(B)/f32/examples/reverse/main.o $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS) $(SERVE_LIBS)
# over MPI (docs/distributed.md): `mpirun -np N build/reverse_mpi train ...`, the same main.o
$(B)/reverse_mpi: $(B)/f32/examples/reverse/main.o $(B)/f32/src/dist/dist_mpi.o $(LIB32)
	$(MPICC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS) $(SERVE_LIBS)
# the same program as another commit would be, for test-mpi's mixed job (the library's handshake)
$(B)/f32/examples/reverse/main_other.o: examples/reverse/main.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DAG_COMMIT='"0.0-other"' -c $< -o $@
$(B)/reverse_mpi_other: $(B)/f32/examples/reverse/main_other.o $(B)/f32/src/dist/dist_mpi.o $(LIB32)
	$(MPICC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS) $(SERVE_LIBS)

# --- examples/attention_demo: attention step by step on a 4-token example (no arguments) ---
$(B)/attention_demo: $(B)/f32/examples/attention_demo/main.o $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)

# --- serve ---
# the library's serve (src/serve/serve.h, docs/serve.md): HTTP by libmicrohttpd, in the archive's
# http.o, which only a program that calls ag_serve_run pulls in (char_lm, reverse, the tests):
# they link SERVE_LIBS, the others need not (one_step, ...; the .pc file's Libs.private). The
# page (src/serve/web/) is embedded as C arrays by tools/embed_web.sh.
SERVE_LIBS = $(call once,SERVE_LIBS,pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
WEB_FILES := $(sort $(wildcard src/serve/web/*))
$(B)/gen/serve_web.inc: $(WEB_FILES) tools/embed_web.sh
	@mkdir -p $(dir $@)
	tools/embed_web.sh $(WEB_FILES) > $@.tmp && mv $@.tmp $@
$(B)/f32/src/serve/http.o $(B)/f64/src/serve/http.o: $(B)/gen/serve_web.inc
$(B)/f32/src/serve/http.o $(B)/f64/src/serve/http.o: EXTRA_CFLAGS += -I$(B)/gen $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
# The page in a real browser (tests/browser/test_serve_page.py): Debian's headless chromium
# through chromedriver and python3-selenium (Debian's, hence /usr/bin/python3). It trains a tiny
# run, serves it, types a prompt, checks the attention maps and the training chart, and leaves
# screenshots in BROWSER_SHOTS. Without chromium it says SKIPPED loudly and passes.
.PHONY: check-browser deps-browser
BROWSER_PKGS = chromium chromium-driver python3-selenium
BROWSER_SHOTS ?= $(B)/browser
deps-browser:                                     ## install chromium, chromium-driver, python3-selenium if missing
	@$(MAKE) --no-print-directory deps DEPS_PKGS="$(BROWSER_PKGS)"
check-browser: deps deps-browser                 ## serve's page in headless chromium; screenshots in build/browser
	@$(MAKE) --no-print-directory browser-run
# browser-run: the test alone, with what is installed (make check's job: SKIPPED without chromium)
.PHONY: browser-run
browser-run: $(B)/char_lm
	@rc=0; /usr/bin/python3 tests/browser/test_serve_page.py --char-lm ./$(B)/char_lm --shots $(BROWSER_SHOTS) || rc=$$?; \
	if [ $$rc = 77 ]; then echo "check-browser: SKIPPED (no chromium: the page was NOT tested in a browser)"; \
	elif [ $$rc != 0 ]; then echo "check-browser: FAILED"; exit 1; \
	else echo "check-browser: screenshots in $(BROWSER_SHOTS):"; ls $(BROWSER_SHOTS); fi

# --- install: the float and the double library, the public headers (their src/ layout kept
# under include/attograd/, since they include each other by relative path) and a .pc file for
# each, so a program elsewhere builds with `pkg-config --cflags --libs attograd` (float) or
# `attograd-f64` (double, Cflags -DAG_DOUBLE: for gradient checks at rtol 1e-6) and
# `#include <attograd/attograd.h>` (examples/out_of_tree). DESTDIR is honoured for packagers.
PREFIX  ?= /usr/local
VERSION  = 0.1.0
PUBLIC_HEADERS = src/attograd.h src/tensor/real.h src/tensor/tensor.h src/tensor/ops.h src/tensor/rng.h src/tensor/speed.h \
                 src/tensor/debug.h src/nn/nn.h src/nn/switches.h src/nn/trace.h src/nn/gpt_ckpt.h src/params/params.h \
                 src/io/safetensors.h src/optim/optim.h src/optim/muon.h src/check/gradcheck.h
# src/data: the corpus loader and the FNV-1a hash, for programs that train on text
PUBLIC_HEADERS += src/data/corpus.h src/data/hash.h
# src/train: the run machinery of any training program (the lock, whole files, loss.png, the
# time budget), and the split of a step over ranks (ddp.h) with its transport (dist.h)
PUBLIC_HEADERS += src/train/train.h src/train/budget.h src/train/ddp.h src/dist/dist.h src/train/plot_attn.h
# src/train/program.h: a program's error line, threads, launch and stop signals; recipe.h: the
# recipe a time budget picks from the measured step speed
PUBLIC_HEADERS += src/train/program.h src/train/recipe.h
# src/lm/lm.h: a GPT on the trainer's tools (its memory checked, its attention drawn) and over
# characters sampled, evaluated, traced (char_lm's tools); above src/train and src/nn
PUBLIC_HEADERS += src/lm/lm.h
# src/train/fields.h: a program's config as a table (flags, ranges, JSON, usage lines)
PUBLIC_HEADERS += src/train/fields.h
# src/serve: a page and a JSON API over a run, for any model (libmicrohttpd: the .pc's Libs.private)
PUBLIC_HEADERS += src/serve/serve.h
# $(call write_pc,NAME,LIB,DEFS,REAL): lib/pkgconfig/NAME.pc from attograd.pc.in
write_pc = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@DEP_CFLAGS@|$(strip $(PKG_CFLAGS))|' \
             -e 's|@DEP_LIBS@|$(strip $(LIBS))|' -e 's|@PC_NAME@|$(1)|g' -e 's|@PC_LIB@|$(2)|' -e 's|@PC_DEFS@|$(3)|' \
             -e 's|@PC_REAL@|$(4)|' -e 's|@SERVE_LIBS@|$(strip $(SERVE_LIBS))|' attograd.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$(1).pc
.PHONY: install uninstall
install: $(LIB32) $(LIB64) attograd.pc.in        ## install both libs, headers, attograd{,-f64}.pc under PREFIX (/usr/local)
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/attograd
	install -m 644 $(LIB32) $(DESTDIR)$(PREFIX)/lib/libattograd.a
	install -m 644 $(LIB64) $(DESTDIR)$(PREFIX)/lib/libattograd_f64.a
	for h in $(PUBLIC_HEADERS); do install -D -m 644 $$h $(DESTDIR)$(PREFIX)/include/attograd/$${h#src/} || exit 1; done
	$(call write_pc,attograd,attograd,,float)
	$(call write_pc,attograd-f64,attograd_f64,-DAG_DOUBLE,double)
	@echo "installed into $(DESTDIR)$(PREFIX); try: PKG_CONFIG_PATH=$(DESTDIR)$(PREFIX)/lib/pkgconfig pkg-config --cflags --libs attograd (or attograd-f64)"

uninstall:                                        ## remove what `make install PREFIX=...` installed
	rm -f $(DESTDIR)$(PREFIX)/lib/libattograd.a $(DESTDIR)$(PREFIX)/lib/pkgconfig/attograd.pc
	rm -f $(DESTDIR)$(PREFIX)/lib/libattograd_f64.a $(DESTDIR)$(PREFIX)/lib/pkgconfig/attograd-f64.pc
	rm -rf $(DESTDIR)$(PREFIX)/include/attograd

# --- benchmark: kept out of the test suite (tests check correctness, bench measures) ---
# malloc/calloc/realloc are wrapped so the bench can count our code's allocations per step
$(B)/bench: $(B)/f32/bench/bench.o $(LIB32)
	$(CC) -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc -o $@ $^ $(LIBS)

bench: deps                                       ## tokens/s, GFLOP/s, time per op, allocations, RSS
	@$(MAKE) --no-print-directory $(B)/bench
	./$(B)/bench $(BENCH_ARGS)

# --- sanitizers: the whole suite under ASan + UBSan, one malloc per arena block so ASan sees
# overflows a bump allocator would hide, each suite in one process (CK_FORK=no) so
# LeakSanitizer reports once per suite, the suites side by side
ASAN = $(B)/asan
ASAN_ENV = CK_FORK=no ASAN_OPTIONS=detect_leaks=1 CHAR_LM=./$(ASAN)/char_lm
# the program's suites (ONCE_SUITES) on float only, as in make test: they run the same char_lm,
# and the budget's wall-clock runs under ASan twice side by side missed their time (CI, 668 s)
ASAN_SUITE_JOBS = $(foreach s,$(call slow_first,$(call suites_of,$(ASAN))),$(foreach b,f64 f32,\
                    $(if $(and $(filter f64,$(b)),$(filter $(s),$(ONCE_SUITES))),,\
                      $(call suite_job,asan-$(b),$(ASAN)/test_$(b),$(s),$(ASAN_ENV)))))
ASAN_JOBS = $(ASAN_SUITE_JOBS) $(call job,asan-char_lm,$(SUB_MAKE) check-asan-runs)
asan-build:
	@$(MAKE) --no-print-directory B=$(ASAN) CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  DEFS=-DAG_ARENA_DEBUG LDFLAGS_EXTRA="-fsanitize=address,undefined" $(call test_bins,$(ASAN)) $(ASAN)/char_lm
asan: deps                                        ## the test suite under ASan and UBSan (part of make check)
	@$(MAKE) --no-print-directory asan-build
	+@$(call run_jobs,$(ASAN_SUITE_JOBS),asan)

# --- issue 5, the robustness proofs in make check ---
# check-asan: the suite above (the error table and the signal tests run the ASan build of
# char_lm), then a short train, resume, sample and eval of that build on real text.
SAN_DIR = $(B)/check-asan
SAN_RUN = ASAN_OPTIONS=detect_leaks=1 OPENBLAS_NUM_THREADS=1 ./$(ASAN)/char_lm
.PHONY: asan-build check-asan check-asan-runs check-valgrind check-valgrind-runs vg-build deps-valgrind
.PHONY: fuzz fuzz-build fuzz-runs deps-fuzz
check-asan: deps                                  ## asan, plus char_lm train/resume/sample/eval under ASan (part of make check)
	@$(MAKE) --no-print-directory asan-build
	+@$(call run_jobs,$(ASAN_JOBS),asan)
check-asan-runs:
	rm -rf $(SAN_DIR) && mkdir -p $(SAN_DIR)
	head -c 50000 data/tinyshakespeare.txt > $(SAN_DIR)/train.txt
	head -c 3000 data/tinyshakespeare.txt > $(SAN_DIR)/eval.txt
	$(SAN_RUN) train --data $(SAN_DIR)/train.txt --out $(SAN_DIR)/run --config tiny --max-iters 4 --eval-interval 2 --eval-iters 2
	$(SAN_RUN) train --data $(SAN_DIR)/train.txt --out $(SAN_DIR)/run --resume --max-iters 6
	$(SAN_RUN) sample --ckpt $(SAN_DIR)/run --prompt "ROMEO:" --max-new-tokens 100 --top-k 5 --temperature 0.8
	$(SAN_RUN) eval --ckpt $(SAN_DIR)/run --data $(SAN_DIR)/eval.txt

# check-valgrind: no leaked block (definite or indirect; libgomp's thread stacks stay reachable)
# after a short training run, a resume, a sample, an eval and every error path of
# examples/char_lm/tests/test_errors.c (two jobs). Its own -O2 build: valgrind cannot run code
# built for AVX-512.
VALGRIND = valgrind -q --vgdb=no --leak-check=full --show-leak-kinds=definite,indirect \
           --errors-for-leak-kinds=definite,indirect --error-exitcode=9
VG_DIR = $(B)/check-valgrind
# GOMP_SPINCOUNT given: char_lm then does not re-exec itself through /proc/self/exe
# (ag_omp_bounded_spin, src/train/program.h), which under valgrind is valgrind's own tool binary ("You cannot
# run ... directly")
VG_ENV = OPENBLAS_NUM_THREADS=1 GOMP_SPINCOUNT=10000
VG_RUN = $(VG_ENV) $(VALGRIND) ./$(B)/vg/char_lm
# the tiny preset, smaller: valgrind runs it about 50 times slower than native
VG_MODEL = --config tiny --n-layer 2 --n-embd 32 --block-size 16 --batch-size 4 --eval-iters 1
# make check runs vg-char_lm alone: the error table's leak check is ASan's there (asan-f32/errors
# runs every row with the ASan build of char_lm and LeakSanitizer on; a leak's report breaks the
# row's one stderr line: a leak added to main.c's fail() failed all 117 rows). make
# check-valgrind runs both.
VG_RUNS_JOB = $(call job,vg-char_lm,$(SUB_MAKE) check-valgrind-runs)
VG_JOBS = $(call suite_job,vg-f32,$(B)/test_f32,errors,$(VG_ENV) CHAR_LM=./$(B)/vg/char_lm CHAR_LM_WRAP="$(VALGRIND)") \
          $(VG_RUNS_JOB)
vg-build: $(B)/test_lm_f32
	@$(MAKE) --no-print-directory B=$(B)/vg CFLAGS="-O2 -g" $(B)/vg/char_lm
deps-valgrind:                                    ## install valgrind if missing
	@$(MAKE) --no-print-directory deps DEPS_PKGS=valgrind
check-valgrind: deps                              ## valgrind: no leaks in train/resume/sample/eval and every error path (make check: the first)
	@$(MAKE) --no-print-directory deps-valgrind
	@$(MAKE) --no-print-directory vg-build
	+@$(call run_jobs,$(VG_JOBS),valgrind)
check-valgrind-runs:
	rm -rf $(VG_DIR) && mkdir -p $(VG_DIR)
	head -c 20000 data/tinyshakespeare.txt > $(VG_DIR)/train.txt
	head -c 1000 data/tinyshakespeare.txt > $(VG_DIR)/eval.txt
	$(VG_RUN) train --data $(VG_DIR)/train.txt --out $(VG_DIR)/run $(VG_MODEL) --max-iters 5 --eval-interval 3
	$(VG_RUN) train --data $(VG_DIR)/train.txt --out $(VG_DIR)/run --resume --max-iters 7
	$(VG_RUN) sample --ckpt $(VG_DIR)/run --prompt "ROMEO:" --max-new-tokens 40 --top-k 5
	$(VG_RUN) eval --ckpt $(VG_DIR)/run --data $(VG_DIR)/eval.txt

# fuzz: libFuzzer (clang) on the checkpoint loader, the corpus reader and serve's parameters, each
# for FUZZ_SECONDS (side by side), starting from the committed inputs: the seeds in
# fuzz/seeds/<target>/ and fuzz/corpus/<target>/, what earlier runs found (each run replays all
# of them first; new inputs go to build/fuzz/corpus/, a crash to build/fuzz/crashes/<target>/,
# and fails the target). make check fuzzes CHECK_FUZZ_SECONDS (20) each; `make fuzz-merge` adds
# what build/fuzz/corpus/ found to fuzz/corpus/ (libFuzzer's -merge=1: only inputs that reach
# new coverage). Replay one: build/fuzz/fuzz_<t> FILE
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 60
CHECK_FUZZ_SECONDS ?= 20
FUZZ_PKGS = clang-14 libclang-rt-14-dev
FUZZ_FLAGS = $(STD) $(WARN) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
             -fsanitize-coverage-ignorelist=fuzz/coverage_ignore.txt -Isrc \
             $(shell pkg-config --cflags jansson 2>/dev/null)
FUZZ_LIBS = $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson)
FUZZ_TARGETS = safetensors corpus serve
fuzz_jobs = $(foreach t,$(FUZZ_TARGETS),$(call job,fuzz-$(t),$(SUB_MAKE) fuzz-runs FUZZ_TARGETS=$(t) FUZZ_SECONDS=$(1)))
FUZZ_JOBS = $(call fuzz_jobs,$(FUZZ_SECONDS))
$(B)/fuzz/fuzz_safetensors: fuzz/fuzz_safetensors.c src/io/safetensors.c src/tensor/tensor.c fuzz/coverage_ignore.txt $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_safetensors.c src/io/safetensors.c src/tensor/tensor.c $(FUZZ_LIBS)
$(B)/fuzz/fuzz_corpus: fuzz/fuzz_corpus.c src/data/corpus.c src/data/charset.c src/tensor/tensor.c fuzz/coverage_ignore.txt $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_corpus.c src/data/corpus.c src/data/charset.c src/tensor/tensor.c $(FUZZ_LIBS)
# serve's request parameters: src/serve/params.c alone (no HTTP, no model), against a fixed vocabulary
$(B)/fuzz/fuzz_serve: fuzz/fuzz_serve.c src/serve/params.c src/data/corpus.c src/data/charset.c src/tensor/tensor.c fuzz/coverage_ignore.txt $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_serve.c src/serve/params.c src/data/corpus.c src/data/charset.c src/tensor/tensor.c $(FUZZ_LIBS)
fuzz-build: $(FUZZ_TARGETS:%=$(B)/fuzz/fuzz_%)
deps-fuzz:                                        ## install clang and libFuzzer if missing
	@$(MAKE) --no-print-directory deps DEPS_PKGS="$(FUZZ_PKGS)"
fuzz: deps                                        ## run each fuzzer for FUZZ_SECONDS (60), side by side (make check: 20 s)
	@$(MAKE) --no-print-directory deps-fuzz
	@$(MAKE) --no-print-directory fuzz-build
	+@$(call run_jobs,$(FUZZ_JOBS),fuzz)
fuzz-runs: fuzz-build
	@failed=; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(B)/fuzz/corpus/$$t $(B)/fuzz/crashes/$$t; \
	  dict=; [ -f fuzz/$$t.dict ] && dict=-dict=fuzz/$$t.dict; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s (log: $(B)/fuzz/$$t.log)"; \
	  if ./$(B)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	       -artifact_prefix=$(B)/fuzz/crashes/$$t/ $$dict $(B)/fuzz/corpus/$$t fuzz/corpus/$$t fuzz/seeds/$$t > $(B)/fuzz/$$t.log 2>&1; then \
	    grep -E '^Done|stat::number_of_executed_units|stat::peak_rss_mb' $(B)/fuzz/$$t.log | sed "s/^/fuzz: $$t: /"; \
	  else \
	    tail -n 60 $(B)/fuzz/$$t.log; \
	    echo "fuzz: $$t FAILED; reproducer(s): $$(ls $(B)/fuzz/crashes/$$t/)"; \
	    echo "      replay: ./$(B)/fuzz/fuzz_$$t $(B)/fuzz/crashes/$$t/<file>"; failed="$$failed $$t"; \
	  fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: failed:$$failed"; exit 1; fi
.PHONY: fuzz-merge
fuzz-merge: fuzz-build                            ## add the inputs of build/fuzz/corpus/ that reach new coverage to fuzz/corpus/
	@for t in $(FUZZ_TARGETS); do mkdir -p $(B)/fuzz/corpus/$$t fuzz/corpus/$$t; \
	  ./$(B)/fuzz/fuzz_$$t -merge=1 -timeout=10 -rss_limit_mb=2048 fuzz/corpus/$$t $(B)/fuzz/corpus/$$t > $(B)/fuzz/$$t.merge.log 2>&1 || \
	    { tail -n 20 $(B)/fuzz/$$t.merge.log; exit 1; }; \
	  echo "fuzz-merge: $$t: $$(ls fuzz/corpus/$$t | wc -l) inputs in fuzz/corpus/$$t"; done

clean:                                            ## remove build/
	rm -rf $(B)

# --- portability: clang and arm64 (issue 32) ---
# check-clang: the library, char_lm and both suites built by clang (Debian's clang 14: LLVM's
# libomp, scalar expf since clang ignores the libmvec declaration in fast.h) into build/clang,
# every warning an error, and the suites run there as make test runs them: the numeric ones on
# double and float, the program's (ONCE_SUITES) on float, each a job of make check's runner.
CLANG ?= clang
CLANG_B = $(B)/clang
CLANG_JOBS = $(foreach s,$(call slow_first,$(call suites_of,$(CLANG_B))),$(call suite_job,clang-f32,$(CLANG_B)/test_f32,$(s),CHAR_LM=./$(CLANG_B)/char_lm) \
               $(if $(filter $(s),$(ONCE_SUITES)),,$(call suite_job,clang-f64,$(CLANG_B)/test_f64,$(s),CHAR_LM=./$(CLANG_B)/char_lm)))
.PHONY: check-clang clang-build deps-arm64 check-arm64
clang-build:
	@$(MAKE) --no-print-directory CC=$(CLANG) B=$(CLANG_B) WARN="$(WARN) -Werror" \
	  $(call test_bins,$(CLANG_B)) $(CLANG_B)/char_lm $(CLANG_B)/bench $(CLANG_B)/one_step $(CLANG_B)/attention_demo
check-clang: deps                                 ## clang build in build/clang (-Werror), its suites as make test runs them
	@$(MAKE) --no-print-directory clang-build
	+@$(call run_jobs,$(CLANG_JOBS),clang)

# check-arm64: cross-compiled by Debian's gcc-aarch64-linux-gnu against the arm64 packages of the
# dependencies (dpkg multiarch), run under qemu-user: no AVX2/AVX-512 targets and no libmvec
# there (fast.h), so the fast kernels' plain loops and scalar expf are what run. Emulation is
# ~10-50x slower, so not every suite runs: ARM64_SUITES, every op's gradient check and fast ==
# reference (with Adam's fast twin), in f64 and f32, then a short char_lm train -> resume ->
# sample (arm64-run). Left to x86: the program-level suites (errors, signals, rundir, ...: they
# test Linux) and ARM64_SKIP, the suites that check no op of their own: the gradient checker's
# self-test, the layers and the model composed of the ops (nn, gpt, padding), the thread splits
# (parallel) and the x86 targets (fast_targets: on arm64 all three names are the plain loop).
# In make check the build is one of CHECK_BUILDS and each run a job of the runner.
ARM64_CC  = aarch64-linux-gnu-gcc
ARM64_B   = $(B)/arm64
ARM64_PKGS = gcc-aarch64-linux-gnu qemu-user libc6:arm64 libgomp1:arm64 libopenblas-dev:arm64 check:arm64 \
             libjansson-dev:arm64 libmicrohttpd-dev:arm64
# pkg-config reads the arm64 .pc files (Debian's multiarch layout)
ARM64_PKG_CONFIG = PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
QEMU_ARM64 = qemu-aarch64
ARM64_SKIP = gradcheck nn gpt padding parallel fast_targets
ARM64_SUITES = $(filter-out $(ARM64_SKIP),$(KERNEL_SUITES))
# the tests start char_lm through CHAR_LM_WRAP (no binfmt_misc needed)
ARM64_ENV = CHAR_LM=./$(ARM64_B)/char_lm CHAR_LM_WRAP=$(QEMU_ARM64)
# char_lm's run: check-valgrind's VG_MODEL (the tiny preset made smaller)
ARM64_RUN = $(TEST_ENV) $(QEMU_ARM64) ./$(ARM64_B)/char_lm
ARM64_DIR = $(ARM64_B)/run
# one job per build and suite, arm64-f32/fused ..., the slow ones first, then char_lm's run
# (one alone, once arm64-build has built: make arm64-suite-f32.fused)
ARM64_JOBS = $(foreach s,$(call slow_first,$(ARM64_SUITES)),$(foreach p,f32 f64,\
               $(call job,arm64-$(p)/$(s),$(TEST_ENV) $(ARM64_ENV) CK_RUN_SUITE=$(s) $(QEMU_ARM64) ./$(ARM64_B)/test_$(p)))) \
             $(call job,arm64-char_lm,$(SUB_MAKE) arm64-run)
.PHONY: arm64-build arm64-run
arm64-suite-%:
	@echo "check-arm64: test_$(basename $*) $(subst .,,$(suffix $*))"
	@$(TEST_ENV) $(ARM64_ENV) CK_RUN_SUITE=$(subst .,,$(suffix $*)) $(QEMU_ARM64) ./$(ARM64_B)/test_$(basename $*) || { \
	  echo "check-arm64: FAILED: suite $(subst .,,$(suffix $*)) of test_$(basename $*) (alone: make $@)"; exit 1; }
deps-arm64:                                       ## gcc-aarch64-linux-gnu, qemu-user and the arm64 packages (dpkg multiarch)
	@dpkg --print-foreign-architectures | grep -qx arm64 || \
	  if [ "$$(id -u)" = 0 ]; then dpkg --add-architecture arm64; \
	  else echo "deps-arm64: run as root: dpkg --add-architecture arm64 && make deps-arm64"; exit 1; fi
	@$(MAKE) --no-print-directory deps DEPS_PKGS="$(ARM64_PKGS)"
arm64-build:
	@$(ARM64_PKG_CONFIG) $(MAKE) --no-print-directory CC=$(ARM64_CC) B=$(ARM64_B) WARN="$(WARN) -Werror" \
	  $(ARM64_B)/test_f64 $(ARM64_B)/test_f32 $(ARM64_B)/char_lm $(ARM64_B)/bench $(ARM64_B)/one_step $(ARM64_B)/attention_demo
check-arm64: deps-arm64                           ## arm64 build in build/arm64 (-Werror), ARM64_SUITES and char_lm under qemu
	@$(MAKE) --no-print-directory arm64-build
	+@$(call run_jobs,$(ARM64_JOBS),arm64)
arm64-run:
	rm -rf $(ARM64_DIR) && mkdir -p $(ARM64_DIR)
	head -c 20000 data/tinyshakespeare.txt > $(ARM64_DIR)/text.txt
	$(ARM64_RUN) train --data $(ARM64_DIR)/text.txt --out $(ARM64_DIR)/run $(VG_MODEL) --max-iters 20 --eval-interval 10
	$(ARM64_RUN) train --data $(ARM64_DIR)/text.txt --out $(ARM64_DIR)/run --resume --max-iters 24
	$(ARM64_RUN) sample --ckpt $(ARM64_DIR)/run --prompt "ROMEO:" --max-new-tokens 80 --top-k 5 > $(ARM64_DIR)/sample.txt
	@grep -q '^ROMEO:' $(ARM64_DIR)/sample.txt && cat $(ARM64_DIR)/sample.txt && echo
