#!/usr/bin/env bash
# tools/select.sh: which shipped kernels a "N or N/dsl" list names (the GPU
# scripts gpu_judge.sh, noise_study.sh and gpu_batch.sh all choose with it).
. "$(dirname "$0")/../lib.sh"
mkdir -p "$TMP/sol/03_gqa/cutedsl" "$TMP/sol/03_gqa/tirx" "$TMP/sol/28_add/tirx" "$TMP/sol/36_norm/cutedsl" "$TMP/sol/40_none/tirx"
touch "$TMP/sol/03_gqa/cutedsl/kernel.py" "$TMP/sol/03_gqa/tirx/kernel.py" "$TMP/sol/28_add/tirx/kernel.py" \
	"$TMP/sol/36_norm/cutedsl/kernel.py"
pick() { bash -c '. "$1/tools/select.sh"; solutions "$2" "$3"' _ "$TOP" "$1" "$TMP/sol" | tr '\n' ' '; }

expect 'an empty list names every kernel with a kernel.py, both DSLs, in problem order' '
	[ "$(pick "")" = "03_gqa cutedsl 03_gqa tirx 28_add tirx 36_norm cutedsl " ]'
expect 'N names both DSLs of problem N, with or without a leading zero' '
	[ "$(pick 3)" = "03_gqa cutedsl 03_gqa tirx " ] && [ "$(pick 03)" = "$(pick 3)" ]'
expect 'N/dsl names one DSL; lists mix both forms' '
	[ "$(pick 3/tirx,36)" = "03_gqa tirx 36_norm cutedsl " ]'
expect 'a problem or DSL without a kernel names nothing' '
	[ "$(pick 40,28/cutedsl,99)" = "" ]'
finish
