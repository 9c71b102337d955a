#!/usr/bin/env bash
# Installs what mkb needs on a fresh Debian machine of the developers' kind:
# the C build's -dev packages and the grader's Python venv (torch on the CPU).
# Idempotent and quiet when everything is present. Prints the venv's path last;
# with --debs, installs the Debian packages only.
#
# The venv lives outside the clone, keyed by the requirements file's hash, so
# CI runs on the same machine reuse it:  ${MKB_CACHE:-~/.cache/mkb}/venv-<hash>
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

# libpq-dev: the shared PostgreSQL store; postgresql: the server that
# tests/scenario/postgres.sh starts in a temporary folder (nothing is enabled).
debs=(build-essential pkg-config libjansson-dev libsqlite3-dev libcurl4-openssl-dev libpq-dev postgresql
	python3-venv tmux
	chromium-headless-shell) # the last for the HTML report's render test
missing=()
for p in "${debs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "bootstrap: installing ${missing[*]}" >&2
	sudo_cmd=""
	[ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
	$sudo_cmd apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2
fi

[ "${1:-}" = --debs ] && exit 0 # only the packages (the C build needs them first)

req="$here/grader/requirements.txt"
hash=$(sha256sum "$req" | cut -c1-16)
cache=${MKB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mkb}
venv="$cache/venv-$hash"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
	echo "bootstrap: creating $venv (torch is large; this takes a few minutes once)" >&2
	mkdir -p "$cache"
	rm -rf "$venv.tmp"
	python3 -m venv "$venv.tmp"
	"$venv.tmp/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
	"$venv.tmp/bin/python" -c 'import torch; torch.ones(1)' >&2
	# The venv is relocatable enough for python -m use; rename atomically so a
	# killed install never leaves a half-built venv that looks complete.
	rm -rf "$venv"
	mv "$venv.tmp" "$venv"
	sed -i "s|$venv.tmp|$venv|g" "$venv/bin/activate" "$venv/pyvenv.cfg" 2>/dev/null || true
	touch "$venv/.complete"
fi
echo "$venv"
