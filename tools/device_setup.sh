#!/usr/bin/env bash
# GPU machine, in the repo root: install the DSLs staged by tools/stage_dsls.sh
# and build mkb. One call per staged part (a call carries at most 64 MiB):
#
#   device run, carry [.stage/manifest, .stage/include, .stage/part-00]:  tools/device_setup.sh
#   device run, carry [.stage/manifest, .stage/include, .stage/part-01]:  tools/device_setup.sh
#   device run, carry [.stage/manifest, .stage/include, .stage/part-02]:  tools/device_setup.sh && ...
#
# Parts are kept in /root/stage between calls (the machine stays warm for a
# short while only: make the calls back to back). When every part is there,
# the archive is reassembled, checked against the manifest's sha256 and
# unpacked into $DSL_SITE; then mkb is built against the carried headers and
# the machine's own libjansson/libsqlite3/libcurl (without libpq: PG=0). Prints "setup: ready" when done,
# "setup: waiting for ..." otherwise. Source tools/device_env.sh afterwards.
#
# NO_DSL=1 (carry only .stage/include): build mkb and the launch recorder,
# no DSLs: enough for the torch stand-ins of tests/kernels/ and the
# trust-boundary rows of tests/adversarial/ (one call instead of three).
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=${STAGE:-/root/stage}
DSL_SITE=${DSL_SITE:-/root/dsl-site}
manifest=.stage/manifest
no_dsl=${NO_DSL:-}
[ -n "$no_dsl" ] || [ -f "$manifest" ] || { echo "setup: carry .stage/manifest (run tools/stage_dsls.sh here first)" >&2; exit 2; }
mkdir -p "$STAGE"

# Keep every carried part whose hash matches the manifest.
[ -n "$no_dsl" ] || for f in .stage/part-*; do
	[ -f "$f" ] || continue
	name=$(basename "$f")
	want=$(awk -v n="$name" '$1 == "part" && $2 == n {print $3}' "$manifest")
	got=$(sha256sum "$f" | cut -d' ' -f1)
	if [ "$want" != "$got" ]; then
		echo "setup: $name does not match the manifest ($got != $want)" >&2
		exit 1
	fi
	cp "$f" "$STAGE/$name"
	echo "setup: stored $name"
done

whole=$([ -n "$no_dsl" ] || awk '$1 == "whole" {print $2}' "$manifest")
if [ -z "$no_dsl" ] && [ ! -f "$DSL_SITE/.installed-$whole" ]; then
	missing=""
	for name in $(awk '$1 == "part" {print $2}' "$manifest"); do
		[ -f "$STAGE/$name" ] || missing="$missing $name"
	done
	if [ -n "$missing" ]; then
		echo "setup: waiting for$missing"
		exit 0
	fi
	cat $(awk -v d="$STAGE" '$1 == "part" {print d "/" $2}' "$manifest") > "$STAGE/dsl-site.tar.xz"
	got=$(sha256sum "$STAGE/dsl-site.tar.xz" | cut -d' ' -f1)
	if [ "$got" != "$whole" ]; then
		echo "setup: reassembled archive does not match the manifest" >&2
		exit 1
	fi
	rm -rf "$DSL_SITE" && mkdir -p "$DSL_SITE"
	tar -C "$DSL_SITE" -xJf "$STAGE/dsl-site.tar.xz"
	touch "$DSL_SITE/.installed-$whole"
	echo "setup: unpacked the DSLs into $DSL_SITE"
fi

# Build mkb here: the machine has the shared libraries but no -dev packages,
# so no unversioned libNAME.so for -lNAME: link against the versioned one.
devlib() { # NAME SONAME
	local path
	path=$(ldconfig -p | awk -v so="$2" '$1 == so && /x86-64/ {print $NF; exit}')
	if [ -z "$path" ]; then
		echo "setup: $2 is not on this machine (mkb links $1)" >&2
		exit 1
	fi
	ln -sf "$path" "build/devlib/lib$1.so"
}
mkdir -p build/devlib
devlib jansson libjansson.so.4
devlib sqlite3 libsqlite3.so.0
devlib curl libcurl.so.4
make -s build/mkb build/mkb-submit DEBS_STAMP= PG=0 PKG_CFLAGS="-I.stage/include" PKG_LIBS="-Lbuild/devlib -ljansson -lsqlite3 -lcurl"
# the zygote's child side (mkb zygote, then --zygote NAME; docs/judge.md): libc only
make -s build/libmkb_zygote.so
# The launch recorder (the DSL rules; docs/launch-attribution.md): without
# it an evaluation that enforces the rules is an infra_error on a GPU.
cuda_dir=""
for d in ${CUDA_DIR:-} /usr/local/cuda-13.0 /usr/local/cuda /usr/local/cuda-*; do
	[ -f "$d/include/cupti.h" ] && { cuda_dir=$d; break; }
done
if [ -z "$cuda_dir" ]; then
	echo "setup: no CUPTI headers under /usr/local/cuda*: the DSL rules cannot be enforced here (set CUDA_DIR)" >&2
elif make -s build/libmkb_launch.so CUDA_DIR="$cuda_dir"; then
	echo "setup: launch recorder built against $cuda_dir"
else
	echo "setup: the launch recorder did not build against $cuda_dir" >&2
fi
. tools/device_env.sh
if [ -n "$no_dsl" ]; then
	echo "setup: ready (no DSLs)"
	exit 0
fi
"$MKB_PYTHON" - <<'PY'
import importlib.metadata as md
import cutlass, cutlass.cute, tvm, tvm_ffi
from tvm.script import tirx
for d in ("nvidia-cutlass-dsl", "apache-tvm", "apache-tvm-ffi", "torch"):
    print(f"setup: {d} {md.version(d)}")
PY
make -s api-index | sed 's/^/setup: /'
echo "setup: ready"
