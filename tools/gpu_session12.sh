#!/usr/bin/env bash
# One device call of session 12 (after tools/device_setup.sh): the device-arena
# judge checked and measured; results consolidated into few files under $OUT
# (the device tool returns a limited number of files per call).
#   tools/gpu_session12.sh judge     vmm check, smoke, old vs new (no probe), adversarial
#   tools/gpu_session12.sh kernels   the rewritten solutions 47 49 52 60 66, visible + held-out
set -uo pipefail
cd "$(dirname "$0")/.."
export MKB_PYTHON=${MKB_PYTHON:-/opt/torch/.venv/bin/python}
. tools/device_env.sh
out=$OUT
work=/tmp/s12-$1
rm -rf "$work" && mkdir -p "$work"
case "$1" in
judge)
	PYTHONPATH=grader:$PYTHONPATH "$MKB_PYTHON" tests/gpu/vmm_share.py >"$work/vmm.txt" 2>&1
	cat "$work/vmm.txt"
	OUT=$work tools/gpu_judge.sh smoke 2>/dev/null | tail -6
	PROBE_DSLS=" " OUT=$work tools/gpu_judge.sh gap 2>/dev/null | tail -8
	OUT=$work tools/gpu_judge.sh adversarial 2>/dev/null | tail -25
	;;
kernels)
	OUT=$work tools/gpu_judge.sh all 47,49,52,60,66 2>/dev/null | tail -24
	;;
esac
cat "$work"/*.jsonl >"$out/rows-$1.jsonl" 2>/dev/null
cat "$work"/*.md "$work"/machine-*.txt "$work/vmm.txt" >"$out/tables-$1.md" 2>/dev/null
tail -c 30000 -q "$work"/stderr-*.txt >"$out/stderr-$1.txt" 2>/dev/null
exit 0
