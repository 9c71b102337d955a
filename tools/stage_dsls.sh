#!/usr/bin/env bash
# Developer machine: download the DSL wheels of tools/dsl-wheels.txt for the
# GPU machine's Python (3.12, x86_64), unpack them into one site folder in
# install order, and pack it as .stage/dsl-site.tar.xz in parts of at most
# 45 MiB (a device call carries at most 64 MiB, the working tree included), with a manifest of sha256s.
# Cached: only the headers are refreshed when .stage/manifest matches the wheel list.
set -euo pipefail
cd "$(dirname "$0")/.."
list=tools/dsl-wheels.txt

# Headers for building mkb on the GPU machine, which has the libraries but no
# -dev packages. Staged on every run, cached wheels or not: a stage made before
# mkb needed a library would lack its headers.
stage_headers() {
	local curl
	mkdir -p .stage/include/curl
	cp /usr/include/jansson.h /usr/include/jansson_config.h /usr/include/sqlite3.h .stage/include/
	for curl in /usr/include/curl /usr/include/*-linux-gnu/curl; do # Debian: multiarch
		[ -f "$curl/curl.h" ] && break
	done
	cp "$curl"/*.h .stage/include/curl/
}

key=$(sha256sum "$list" | cut -c1-16)
if [ -f .stage/manifest ] && grep -q "^key $key$" .stage/manifest; then
	stage_headers
	echo "stage: up to date ($(grep -c '^part ' .stage/manifest) parts)"
	exit 0
fi
rm -rf .stage && mkdir -p .stage/wheels .stage/site
platforms=""
for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_34_x86_64; do
	platforms="$platforms --platform $p"
done
grep -v '^#' "$list" | grep -v '^$' | while read -r spec; do
	python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
		--implementation cp $platforms -d .stage/wheels "$spec"
	name=${spec%%==*}
	wheel=$(ls .stage/wheels/"$(echo "$name" | tr - _)"-*.whl | head -1)
	(cd .stage/site && unzip -qo "../wheels/$(basename "$wheel")")
done
tar -C .stage/site -cf - . | xz -T0 -6 > .stage/dsl-site.tar.xz
(cd .stage && split -b 45M -d dsl-site.tar.xz part-)
{
	echo "key $key"
	echo "whole $(sha256sum .stage/dsl-site.tar.xz | cut -d' ' -f1)"
	for f in .stage/part-*; do echo "part $(basename "$f") $(sha256sum "$f" | cut -d' ' -f1)"; done
} > .stage/manifest
rm -rf .stage/site .stage/wheels .stage/dsl-site.tar.xz
stage_headers
cat .stage/manifest
