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
DEPS_PKGS = libopenblas-dev check pkg-config gnuplot-nox libjansson-dev libopenmpi-dev openmpi-bin python3
# recursive (=) so pkg-config only runs once `make deps` has installed it
PKG_CFLAGS = $(shell pkg-config --cflags openblas jansson 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs openblas jansson 2>/dev/null || echo -lopenblas -ljansson)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)
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
LIB_SRC  := $(wildcard src/tensor/*.c src/tensor/ops/*.c src/params/*.c src/io/*.c src/data/*.c src/nn/*.c src/optim/*.c src/check/*.c) $(FAST_SRC)
TEST_SRC := $(wildcard tests/*.c)
LM_SRC   := $(wildcard examples/char_lm/*.c)
# everything of char_lm but main() is also linked into the tests
LM_LIB_SRC := $(filter-out examples/char_lm/main.c,$(LM_SRC))
HEADERS  := $(wildcard src/*.h src/*/*.h src/*/*/*.h tests/*.h examples/char_lm/*.h)
# src/dist (dist.h): the transport of data-parallel training, outside libattograd.a so that the
# library stays free of MPI. Programs link one of the two: dist_none.o (one process: char_lm,
# the tests, the bench) or dist_mpi.o, built with mpicc (char_lm_mpi, when mpicc is there).
MPICC   ?= mpicc
HAVE_MPI := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)

B = build
ifeq ($(REFERENCE),1)
B = build/ref
endif
LIB32 = $(B)/f32/libattograd.a
LIB64 = $(B)/f64/libattograd.a

# `all` is the first rule, so a plain `make` builds it
.PHONY: all deps test run clean help asan bench FORCE
all: $(LIB32) $(B)/char_lm $(B)/attention_demo $(if $(HAVE_MPI),$(B)/char_lm_mpi) ## the library, build/char_lm, build/attention_demo (and build/char_lm_mpi with MPI)
FORCE:

help:                                             ## this list
	@grep -E '^[a-z-]+:.*##' Makefile | sed 's/:.*##/\t/'

# --- dependencies: install what is missing (as root), or print the exact command ---
# (a package installed for two architectures, as make deps-arm64 does, needs its own
# architecture named: plain `dpkg -s libopenblas-dev` is then ambiguous and fails)
deps:                                             ## install missing Debian packages
	@command -v dpkg >/dev/null || { echo "deps: no dpkg here (not Debian/Ubuntu): install the packages yourself (README: macOS)"; exit 0; }; \
	missing=""; arch=$$(dpkg --print-architecture 2>/dev/null); for p in $(DEPS_PKGS); do \
	  { dpkg -s $$p || dpkg -s $$p:$$arch; } >/dev/null 2>&1 || missing="$$missing $$p"; done; \
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
# one SUITE(name) line per `Suite *name_suite(void)` in tests/*.c (see tests/run_tests.c)
# (rebuilt every time, replaced only when it changes: a deleted test file drops its suite)
# Every tests/test_*.c must define its suite spelled exactly so: a file whose suite the grep
# below would miss (`Suite* x_suite(void)`, or none) fails the build, naming the file, instead of
# being silently left out of the run.
TEST_FILES = $(foreach f,$(TEST_SRC),$(if $(findstring /test_,/$(f)),$(f)))
SUITE_LINE = ^Suite \*[a-z0-9_]*_suite(void)$$
$(B)/gen/suites.inc: FORCE
	@mkdir -p $(dir $@)
	@for f in $(TEST_FILES); do \
	  if ! grep -q '$(SUITE_LINE)' $$f; then \
	    echo "$$f: no line 'Suite *<name>_suite(void)' (spelled exactly so, at the start of a line): its tests would never run" >&2; exit 1; fi; \
	  bad=$$(grep -nE '^[[:space:]]*Suite[[:space:]]*\*[[:space:]]*[A-Za-z0-9_]+_suite[[:space:]]*\(' $$f | grep -v ':$(SUITE_LINE:^%=%)' | head -n 1); \
	  if [ -n "$$bad" ]; then \
	    echo "$$f:$${bad%%:*}: a suite spelled '$${bad#*:}' is not registered; write 'Suite *<name>_suite(void)'" >&2; exit 1; fi; \
	done
	@grep -ho '^Suite \*[a-z0-9_]*_suite(void)' $(TEST_SRC) | sed 's/^Suite \*\(.*\)_suite(void)/SUITE(\1)/' | sort > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
$(B)/f32/tests/run_tests.o $(B)/f64/tests/run_tests.o: $(B)/gen/suites.inc
$(B)/f32/tests/%.o $(B)/f64/tests/%.o: EXTRA_CFLAGS += -Itests -I$(B)/gen -Iexamples/char_lm

# the heap is counted through these wrappers (tests/alloc_count.h: the corpus loader's peak)
TEST_WRAP = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free
$(B)/test_f32: $(TEST_SRC:%.c=$(B)/f32/%.o) $(LM_LIB_SRC:%.c=$(B)/f32/%.o) $(B)/f32/src/dist/dist_none.o $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) $(TEST_WRAP) -o $@ $^ $(CHECK_LIBS) $(LIBS)
$(B)/test_f64: $(TEST_SRC:%.c=$(B)/f64/%.o) $(LM_LIB_SRC:%.c=$(B)/f64/%.o) $(B)/f64/src/dist/dist_none.o $(LIB64)
	$(CC) $(LDFLAGS_EXTRA) $(TEST_WRAP) -o $@ $^ $(CHECK_LIBS) $(LIBS)

# one OpenBLAS thread in tests: results must not depend on the thread count
# (check kills a test after CK_DEFAULT_TIMEOUT seconds; gradchecks of whole blocks need more than 4)
# passive OpenMP waits: on a shared machine, spinning threads make tests 50x slower
TEST_ENV = OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive CK_DEFAULT_TIMEOUT=600
test: deps                                        ## every test: double, float, both on the REFERENCE=1 library, the installed library, MPI
	@$(MAKE) --no-print-directory $(B)/test_f64 $(B)/test_f32 $(B)/char_lm
	$(TEST_ENV) ./$(B)/test_f64
	$(TEST_ENV) ./$(B)/test_f32
	@$(MAKE) --no-print-directory test-step
	@$(MAKE) --no-print-directory test-reference
	@$(MAKE) --no-print-directory test-install
	@$(MAKE) --no-print-directory test-mpi
	@$(MAKE) --no-print-directory test-readable

# what a reader is promised (issue 17): no function over 60 lines, and docs/reading-order.md's
# path (en and zh) true of the tree, line count by line count, and 2,000 lines or fewer
.PHONY: test-readable
test-readable:                                    ## functions of 60 lines or fewer; the afternoon read's counts
	python3 tools/funclen.py --max 60
	python3 tools/reading_path.py --check --quiet --max 2000

# the same suite on the library built with the reference kernels only (its own char_lm too:
# the program tests run the binary they find in CHAR_LM)
.PHONY: test-reference
test-reference:                                   ## the whole suite on the REFERENCE=1 library
	@$(MAKE) --no-print-directory REFERENCE=1 B=$(B)/ref $(B)/ref/test_f64 $(B)/ref/test_f32 $(B)/ref/char_lm
	$(TEST_ENV) CHAR_LM=./$(B)/ref/char_lm ./$(B)/ref/test_f64
	$(TEST_ENV) CHAR_LM=./$(B)/ref/char_lm ./$(B)/ref/test_f32
	@$(MAKE) --no-print-directory REFERENCE=1 B=$(B)/ref test-step

# lesson 13's program (examples/one_step) against char_lm's own next step: a run to iteration 12
# (dropout on, the clip active, the learning rate in its cosine), a copy of it resumed for one
# step more, and one_step from the first, compared with the copy: the same loss, and every
# weight and Adam moment bit for bit, or the target fails (char_lm with --shards 1: the plain step, which
# one_step takes; its default splits the windows over the threads, other bits)
STEP_DIR = $(B)/test_step
STEP_RUN = $(TEST_ENV) ./$(B)/char_lm train --shards 1 --data $(STEP_DIR)/text.txt
.PHONY: test-step
test-step:                                        ## examples/one_step replays char_lm's next step exactly
	@$(MAKE) --no-print-directory $(B)/char_lm $(B)/one_step
	rm -rf $(STEP_DIR) && mkdir -p $(STEP_DIR)
	head -c 20000 data/tinyshakespeare.txt > $(STEP_DIR)/text.txt
	$(STEP_RUN) --out $(STEP_DIR)/a --config tiny --max-iters 12 --warmup-iters 5 --lr-decay-iters 100 \
	  --dropout 0.1 --eval-iters 2 > $(STEP_DIR)/a.log
	cp -r $(STEP_DIR)/a $(STEP_DIR)/b
	$(STEP_RUN) --out $(STEP_DIR)/b --resume --max-iters 13 > $(STEP_DIR)/b.log
	$(TEST_ENV) ./$(B)/one_step $(STEP_DIR)/a $(STEP_DIR)/text.txt $(STEP_DIR)/b

# the installed library seen from outside: `make install` into a scratch prefix, then
# examples/out_of_tree copied away from the tree (so it cannot reach ../../src), built through
# pkg-config alone and run: an MLP on the float library, a custom op's gradient check on the
# double one (attograd-f64); then the lessons' exercises (docs/lessons/exercises), the same way.
# Any failing fails the target.
OOT = $(abspath $(B)/out_of_tree)
.PHONY: test-install
test-install:                                     ## install into build/out_of_tree, build and run examples/out_of_tree there
	rm -rf $(OOT) && mkdir -p $(OOT)/example
	@$(MAKE) --no-print-directory install PREFIX=$(OOT)/prefix DESTDIR=
	cp examples/out_of_tree/Makefile examples/out_of_tree/*.c $(OOT)/example/
	$(TEST_ENV) $(MAKE) --no-print-directory -C $(OOT)/example PKG_CONFIG_PATH=$(OOT)/prefix/lib/pkgconfig
	mkdir -p $(OOT)/lessons && cp docs/lessons/exercises/Makefile docs/lessons/exercises/*.[ch] $(OOT)/lessons/
	$(TEST_ENV) $(MAKE) --no-print-directory -s -C $(OOT)/lessons PKG_CONFIG_PATH=$(OOT)/prefix/lib/pkgconfig run

# --- the char_lm program ---
$(B)/char_lm: $(LM_SRC:%.c=$(B)/f32/%.o) $(B)/f32/src/dist/dist_none.o $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)

# the same program over MPI (docs/distributed.md): `mpirun -np N build/char_lm_mpi train ...`.
# Only dist_mpi.o sees mpi.h; every other object is char_lm's own.
$(B)/f32/src/dist/dist_mpi.o: src/dist/dist_mpi.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(ALL_CFLAGS) -c $< -o $@
$(B)/char_lm_mpi: $(LM_SRC:%.c=$(B)/f32/%.o) $(B)/f32/src/dist/dist_mpi.o $(LIB32)
	$(MPICC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)

# --- MPI tests (tests/mpi/): dist.h's collectives across ranks, then char_lm_mpi against
# char_lm (equal runs for any ranks x micro-batches, evaluation, stop and resume, TCP only) and
# what must not happen (ranks that disagree, a stalled rank, signals, control bytes in a log).
# As root mpirun needs the two OMPI_ALLOW_RUN_AS_ROOT variables; without mpicc: skipped.
MPI_ENV = OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPIRUN  = mpirun --oversubscribe
$(B)/f32/tests/mpi/%.o: tests/mpi/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(ALL_CFLAGS) -Itests -Iexamples/char_lm -c $< -o $@
$(B)/dist_check: $(B)/f32/tests/mpi/dist_check.o $(B)/f32/src/dist/dist_mpi.o $(LIB32)
	$(MPICC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)
# what one allreduce costs (docs/distributed.md): mpirun -np 2 build/allreduce_bench 109755 ...
$(B)/f32/bench/allreduce.o: bench/allreduce.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(ALL_CFLAGS) -c $< -o $@
$(B)/allreduce_bench: $(B)/f32/bench/allreduce.o $(B)/f32/src/dist/dist_mpi.o $(LIB32)
	$(MPICC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)
$(B)/test_mpi: $(B)/f32/tests/mpi/test_mpi.o $(B)/f32/tests/proc.o $(LM_LIB_SRC:%.c=$(B)/f32/%.o) \
               $(B)/f32/src/dist/dist_none.o $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) -o $@ $^ $(CHECK_LIBS) $(LIBS)
.PHONY: test-mpi
test-mpi:                                         ## the MPI tests (needs mpicc and mpirun)
ifeq ($(HAVE_MPI),1)
	@$(MAKE) --no-print-directory $(B)/dist_check $(B)/test_mpi $(B)/char_lm $(B)/char_lm_mpi
	$(MPI_ENV) $(MPIRUN) -np 3 ./$(B)/dist_check
	$(MPI_ENV) CHAR_LM=./$(B)/char_lm CHAR_LM_MPI=./$(B)/char_lm_mpi ./$(B)/test_mpi
else
	@echo "test-mpi: skipped ($(MPICC) not found; make deps installs Open MPI)"
endif

run: deps                                         ## train the baby model on Tiny Shakespeare
	@$(MAKE) --no-print-directory $(B)/char_lm
	./$(B)/char_lm train --data data/tinyshakespeare.txt --out out/baby --config baby --overwrite

# --- examples/one_step: one char_lm training step written out (lesson 13), linked with char_lm's
# own files but its main; test-step checks it against char_lm's next iteration ---
$(B)/f32/examples/one_step/%.o: EXTRA_CFLAGS += -Iexamples/char_lm
$(B)/one_step: $(B)/f32/examples/one_step/main.o $(LM_LIB_SRC:%.c=$(B)/f32/%.o) $(B)/f32/src/dist/dist_none.o $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)

# --- examples/attention_demo: attention step by step on a 4-token example (no arguments) ---
$(B)/attention_demo: $(B)/f32/examples/attention_demo/main.o $(LIB32)
	$(CC) $(LDFLAGS_EXTRA) -o $@ $^ $(LIBS)

# --- install: the float and the double library, the public headers (their src/ layout kept
# under include/attograd/, since they include each other by relative path) and a .pc file for
# each, so a program elsewhere builds with `pkg-config --cflags --libs attograd` (float) or
# `attograd-f64` (double, Cflags -DAG_DOUBLE: for gradient checks at rtol 1e-6) and
# `#include <attograd/attograd.h>` (examples/out_of_tree). DESTDIR is honoured for packagers.
PREFIX  ?= /usr/local
VERSION  = 0.1.0
PUBLIC_HEADERS = src/attograd.h src/tensor/real.h src/tensor/tensor.h src/tensor/ops.h src/tensor/rng.h src/tensor/speed.h \
                 src/tensor/debug.h src/nn/nn.h src/nn/switches.h src/params/params.h src/io/safetensors.h \
                 src/optim/optim.h src/check/gradcheck.h
# src/data: the corpus loader and the FNV-1a hash, for programs that train on text
PUBLIC_HEADERS += src/data/corpus.h src/data/hash.h
# $(call write_pc,NAME,LIB,DEFS,REAL): lib/pkgconfig/NAME.pc from attograd.pc.in
write_pc = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@DEP_CFLAGS@|$(strip $(PKG_CFLAGS))|' \
             -e 's|@DEP_LIBS@|$(strip $(LIBS))|' -e 's|@PC_NAME@|$(1)|g' -e 's|@PC_LIB@|$(2)|' -e 's|@PC_DEFS@|$(3)|' \
             -e 's|@PC_REAL@|$(4)|' attograd.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$(1).pc
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
# overflows a bump allocator would hide, all tests in one process so LeakSanitizer reports once
asan: deps                                        ## run the test suite under ASan and UBSan
	@$(MAKE) --no-print-directory B=$(B)/asan CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  DEFS=-DAG_ARENA_DEBUG LDFLAGS_EXTRA="-fsanitize=address,undefined" $(B)/asan/test_f64 $(B)/asan/test_f32 $(B)/asan/char_lm
	$(TEST_ENV) CK_FORK=no ASAN_OPTIONS=detect_leaks=1 CHAR_LM=./$(B)/asan/char_lm ./$(B)/asan/test_f64
	$(TEST_ENV) CK_FORK=no ASAN_OPTIONS=detect_leaks=1 CHAR_LM=./$(B)/asan/char_lm ./$(B)/asan/test_f32

# --- issue 5, the robustness proofs that .ci/run runs after `make test` ---
# check-asan: the suite above (the error table and the signal tests run the ASan build of
# char_lm), then a short train, resume, sample and eval of that build on real text.
SAN_DIR = $(B)/check-asan
SAN_RUN = ASAN_OPTIONS=detect_leaks=1 OPENBLAS_NUM_THREADS=1 ./$(B)/asan/char_lm
.PHONY: check-asan check-valgrind deps-valgrind fuzz deps-fuzz
check-asan: asan                                  ## asan, plus char_lm train/resume/sample/eval under ASan
	rm -rf $(SAN_DIR) && mkdir -p $(SAN_DIR)
	head -c 50000 data/tinyshakespeare.txt > $(SAN_DIR)/train.txt
	head -c 3000 data/tinyshakespeare.txt > $(SAN_DIR)/eval.txt
	$(SAN_RUN) train --data $(SAN_DIR)/train.txt --out $(SAN_DIR)/run --config tiny --max-iters 4 --eval-interval 2 --eval-iters 2
	$(SAN_RUN) train --data $(SAN_DIR)/train.txt --out $(SAN_DIR)/run --resume --max-iters 6
	$(SAN_RUN) sample --ckpt $(SAN_DIR)/run --prompt "ROMEO:" --max-new-tokens 100 --top-k 5 --temperature 0.8
	$(SAN_RUN) eval --ckpt $(SAN_DIR)/run --data $(SAN_DIR)/eval.txt

# check-valgrind: no leaked block (definite or indirect; libgomp's thread stacks stay reachable)
# after a short training run, a resume, a sample, an eval and every error path of
# tests/test_errors.c. Its own -O2 build: valgrind cannot run code built for AVX-512.
VALGRIND = valgrind -q --vgdb=no --leak-check=full --show-leak-kinds=definite,indirect \
           --errors-for-leak-kinds=definite,indirect --error-exitcode=9
VG_DIR = $(B)/check-valgrind
# GOMP_SPINCOUNT given: char_lm then does not re-exec itself through /proc/self/exe
# (examples/char_lm/omp_spin.h), which under valgrind is valgrind's own tool binary ("You cannot
# run ... directly")
VG_ENV = OPENBLAS_NUM_THREADS=1 GOMP_SPINCOUNT=10000
VG_RUN = $(VG_ENV) $(VALGRIND) ./$(B)/vg/char_lm
# the tiny preset, smaller: valgrind runs it about 50 times slower than native
VG_MODEL = --config tiny --n-layer 2 --n-embd 32 --block-size 16 --batch-size 4 --eval-iters 1
deps-valgrind:                                    ## install valgrind if missing
	@$(MAKE) --no-print-directory deps DEPS_PKGS=valgrind
check-valgrind: deps deps-valgrind               ## valgrind: no leaks in train/resume/sample/eval and every error path
	@$(MAKE) --no-print-directory B=$(B)/vg CFLAGS="-O2 -g" $(B)/vg/char_lm
	@$(MAKE) --no-print-directory $(B)/test_f32
	rm -rf $(VG_DIR) && mkdir -p $(VG_DIR)
	head -c 20000 data/tinyshakespeare.txt > $(VG_DIR)/train.txt
	head -c 1000 data/tinyshakespeare.txt > $(VG_DIR)/eval.txt
	$(VG_RUN) train --data $(VG_DIR)/train.txt --out $(VG_DIR)/run $(VG_MODEL) --max-iters 5 --eval-interval 3
	$(VG_RUN) train --data $(VG_DIR)/train.txt --out $(VG_DIR)/run --resume --max-iters 7
	$(VG_RUN) sample --ckpt $(VG_DIR)/run --prompt "ROMEO:" --max-new-tokens 40 --top-k 5
	$(VG_RUN) eval --ckpt $(VG_DIR)/run --data $(VG_DIR)/eval.txt
	$(TEST_ENV) $(VG_ENV) CK_RUN_SUITE=errors CHAR_LM=./$(B)/vg/char_lm CHAR_LM_WRAP="$(VALGRIND)" ./$(B)/test_f32

# fuzz: libFuzzer (clang) on the checkpoint loader and the corpus reader, each for FUZZ_SECONDS,
# starting from the seeds in fuzz/seeds/<target>/ (new inputs go to build/fuzz/corpus/, a crash
# to build/fuzz/crashes/<target>/, and fails the target). Replay one: build/fuzz/fuzz_<t> FILE
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_PKGS = clang-14 libclang-rt-14-dev
FUZZ_FLAGS = $(STD) $(WARN) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
             -fsanitize-coverage-ignorelist=fuzz/coverage_ignore.txt -Isrc \
             $(shell pkg-config --cflags jansson 2>/dev/null)
FUZZ_LIBS = $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson)
FUZZ_TARGETS = safetensors corpus
$(B)/fuzz/fuzz_safetensors: fuzz/fuzz_safetensors.c src/io/safetensors.c src/tensor/tensor.c fuzz/coverage_ignore.txt $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_safetensors.c src/io/safetensors.c src/tensor/tensor.c $(FUZZ_LIBS)
$(B)/fuzz/fuzz_corpus: fuzz/fuzz_corpus.c src/data/corpus.c src/data/charset.c src/tensor/tensor.c fuzz/coverage_ignore.txt $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_corpus.c src/data/corpus.c src/data/charset.c src/tensor/tensor.c $(FUZZ_LIBS)
deps-fuzz:                                        ## install clang and libFuzzer if missing
	@$(MAKE) --no-print-directory deps DEPS_PKGS="$(FUZZ_PKGS)"
fuzz: deps deps-fuzz                              ## run each fuzzer for FUZZ_SECONDS (60)
	@$(MAKE) --no-print-directory $(FUZZ_TARGETS:%=$(B)/fuzz/fuzz_%)
	@failed=; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(B)/fuzz/corpus/$$t $(B)/fuzz/crashes/$$t; \
	  dict=; [ -f fuzz/$$t.dict ] && dict=-dict=fuzz/$$t.dict; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s (log: $(B)/fuzz/$$t.log)"; \
	  if ./$(B)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	       -artifact_prefix=$(B)/fuzz/crashes/$$t/ $$dict $(B)/fuzz/corpus/$$t fuzz/seeds/$$t > $(B)/fuzz/$$t.log 2>&1; then \
	    grep -E '^Done|stat::number_of_executed_units|stat::peak_rss_mb' $(B)/fuzz/$$t.log | sed "s/^/fuzz: $$t: /"; \
	  else \
	    tail -n 60 $(B)/fuzz/$$t.log; \
	    echo "fuzz: $$t FAILED; reproducer(s): $$(ls $(B)/fuzz/crashes/$$t/)"; \
	    echo "      replay: ./$(B)/fuzz/fuzz_$$t $(B)/fuzz/crashes/$$t/<file>"; failed="$$failed $$t"; \
	  fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: failed:$$failed"; exit 1; fi

clean:                                            ## remove build/
	rm -rf $(B)

# --- portability: clang and arm64 (issue 32) ---
# check-clang: the library, char_lm and both suites built by clang (Debian's clang 14: LLVM's
# libomp, scalar expf since clang ignores the libmvec declaration in fast.h) into build/clang,
# every warning an error, and the f64 and f32 suites run there.
CLANG ?= clang
.PHONY: check-clang deps-arm64 check-arm64
check-clang: deps                                 ## clang build in build/clang (-Werror), the f64 and f32 suites
	@$(MAKE) --no-print-directory CC=$(CLANG) B=$(B)/clang WARN="$(WARN) -Werror" \
	  $(B)/clang/test_f64 $(B)/clang/test_f32 $(B)/clang/char_lm $(B)/clang/bench $(B)/clang/one_step $(B)/clang/attention_demo
	$(TEST_ENV) CHAR_LM=./$(B)/clang/char_lm ./$(B)/clang/test_f64
	$(TEST_ENV) CHAR_LM=./$(B)/clang/char_lm ./$(B)/clang/test_f32

# check-arm64: cross-compiled by Debian's gcc-aarch64-linux-gnu against the arm64 packages of the
# dependencies (dpkg multiarch), run under qemu-user: no AVX2/AVX-512 targets and no libmvec
# there (fast.h), so the fast kernels' plain loops and scalar expf are what run. Emulation is
# ~10-50x slower, so not every suite runs: ARM64_SUITES, every op's gradient check and
# fast == reference (add a suite here when it checks an op), in f64 and f32, then a short
# char_lm train -> resume -> sample. The program-level suites (errors, signals, rundir, ...)
# test Linux, which x86 already covers.
ARM64_CC  = aarch64-linux-gnu-gcc
ARM64_B   = $(B)/arm64
ARM64_PKGS = gcc-aarch64-linux-gnu qemu-user libc6:arm64 libgomp1:arm64 libopenblas-dev:arm64 check:arm64 \
             libjansson-dev:arm64
# pkg-config reads the arm64 .pc files (Debian's multiarch layout)
ARM64_PKG_CONFIG = PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
QEMU_ARM64 = qemu-aarch64
ARM64_SUITES = gradcheck grad_gaps attention_ops elementwise matmul norm_loss rmsnorm swiglu nn gpt padding \
               optim fast_ref fast_ref_rows fast_ref_products fast_targets fused parallel
# the tests start char_lm through CHAR_LM_WRAP (no binfmt_misc needed)
ARM64_ENV = $(TEST_ENV) CHAR_LM=./$(ARM64_B)/char_lm CHAR_LM_WRAP=$(QEMU_ARM64)
# char_lm's run: check-valgrind's VG_MODEL (the tiny preset made smaller)
ARM64_RUN = $(TEST_ENV) $(QEMU_ARM64) ./$(ARM64_B)/char_lm
ARM64_DIR = $(ARM64_B)/run
# one target per build and suite, arm64-suite-f64.gradcheck ...: side by side under make -j
# (one alone, once check-arm64 has built: make arm64-suite-f32.fused)
ARM64_RUNS = $(foreach p,f64 f32,$(ARM64_SUITES:%=arm64-suite-$(p).%))
arm64-suite-%:
	@echo "check-arm64: test_$(basename $*) $(subst .,,$(suffix $*))"
	@$(ARM64_ENV) CK_RUN_SUITE=$(subst .,,$(suffix $*)) $(QEMU_ARM64) ./$(ARM64_B)/test_$(basename $*) || { \
	  echo "check-arm64: FAILED: suite $(subst .,,$(suffix $*)) of test_$(basename $*) (alone: make $@)"; exit 1; }
deps-arm64:                                       ## gcc-aarch64-linux-gnu, qemu-user and the arm64 packages (dpkg multiarch)
	@dpkg --print-foreign-architectures | grep -qx arm64 || \
	  if [ "$$(id -u)" = 0 ]; then dpkg --add-architecture arm64; \
	  else echo "deps-arm64: run as root: dpkg --add-architecture arm64 && make deps-arm64"; exit 1; fi
	@$(MAKE) --no-print-directory deps DEPS_PKGS="$(ARM64_PKGS)"
check-arm64: deps-arm64                           ## arm64 build in build/arm64 (-Werror), ARM64_SUITES and char_lm under qemu
	@$(ARM64_PKG_CONFIG) $(MAKE) --no-print-directory CC=$(ARM64_CC) B=$(ARM64_B) WARN="$(WARN) -Werror" \
	  $(ARM64_B)/test_f64 $(ARM64_B)/test_f32 $(ARM64_B)/char_lm $(ARM64_B)/bench $(ARM64_B)/one_step $(ARM64_B)/attention_demo
	@$(MAKE) --no-print-directory -O $(ARM64_RUNS)
	rm -rf $(ARM64_DIR) && mkdir -p $(ARM64_DIR)
	head -c 20000 data/tinyshakespeare.txt > $(ARM64_DIR)/text.txt
	$(ARM64_RUN) train --data $(ARM64_DIR)/text.txt --out $(ARM64_DIR)/run $(VG_MODEL) --max-iters 20 --eval-interval 10
	$(ARM64_RUN) train --data $(ARM64_DIR)/text.txt --out $(ARM64_DIR)/run --resume --max-iters 24
	$(ARM64_RUN) sample --ckpt $(ARM64_DIR)/run --prompt "ROMEO:" --max-new-tokens 80 --top-k 5 > $(ARM64_DIR)/sample.txt
	@grep -q '^ROMEO:' $(ARM64_DIR)/sample.txt && cat $(ARM64_DIR)/sample.txt && echo
