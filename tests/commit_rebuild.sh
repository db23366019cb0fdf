#!/bin/sh
# tests/commit_rebuild.sh BUILD_DIR: the commit a run's report card names is compiled into main.o
# (-DLM_COMMIT, the Makefile); a new HEAD must recompile it, or a commit that leaves main.c and the
# headers alone keeps the old string. Builds main.o in a scratch tree under BUILD_DIR at commit
# aaaaaaa, again at aaaaaaa (left as it is), then at bbbbbbb (recompiled, holding bbbbbbb).
# COMMIT is the Makefile's `git rev-parse --short HEAD`, given here so that no commit is made.
set -eu
mkdir -p "$1"
dir=$(mktemp -d "$1/commit-test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
obj=$dir/f32/examples/char_lm/main.o
at() { make -s --no-print-directory B="$dir" COMMIT="$1" "$obj"; }
fail() { echo "commit_rebuild: FAIL: $*"; exit 1; }
at aaaaaaa
grep -q aaaaaaa "$obj" || fail "main.o does not hold its commit aaaaaaa"
t0=$(stat -c %.9Y "$obj")
sleep 0.05
at aaaaaaa
[ "$(stat -c %.9Y "$obj")" = "$t0" ] || fail "main.o was compiled again at the same commit"
at bbbbbbb
[ "$(stat -c %.9Y "$obj")" != "$t0" ] || fail "at a new commit main.o was not recompiled (its card would name aaaaaaa)"
grep -q bbbbbbb "$obj" || fail "main.o does not hold the new commit bbbbbbb"
echo "commit_rebuild: main.o follows the commit (kept at the same one, recompiled at a new one)"
