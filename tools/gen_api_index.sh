#!/bin/sh
# Generate build/docs/<dsl>/api-index.txt for each DSL that some Python can import.
# The Python per DSL: $CUTEDSL_PYTHON / $TIRX_PYTHON, else $MKB_PYTHON, else python3.
# A DSL that is not installed is skipped with a message (exit status stays 0).
set -u
cd "$(dirname "$0")/.." || exit 1
default_py=${MKB_PYTHON:-python3}
status=0

gen() {
	dsl=$1 py=$2 module=$3
	out=build/docs/$dsl/api-index.txt
	if ! command -v "$py" >/dev/null 2>&1 && [ ! -x "$py" ]; then
		echo "gen_api_index: $dsl: no Python '$py'; skipped"
		return 0
	fi
	if ! "$py" -c "import $module" >/dev/null 2>&1; then
		echo "gen_api_index: $dsl: '$module' not importable by $py; skipped"
		return 0
	fi
	printf 'gen_api_index: %s: ' "$dsl"
	if ! "$py" tools/gen_api_index.py --dsl "$dsl" --out "$out"; then
		echo "gen_api_index: $dsl: generator failed" >&2
		status=1
	fi
}

gen cutedsl "${CUTEDSL_PYTHON:-$default_py}" cutlass.cute
gen tirx "${TIRX_PYTHON:-$default_py}" tvm.script.tirx
exit $status
