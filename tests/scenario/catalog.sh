#!/usr/bin/env bash
# The catalog as the C side reads it: mkb list / show over all 74 problems.
. "$(dirname "$0")/../lib.sh"

expect 'mkb list shows the 74 problems of CATALOG.md, by family' '
	"$MKB" list >list.txt
	[ "$(tail -1 list.txt)" = "74 problems" ]
	for fc in attention:18 kv_cache:8 mlp_norm:17 moe:8 quantization:10 linear_attention:13; do
		n=$(awk -v f="${fc%%:*}" "\$2 == f" list.txt | wc -l)
		[ "$n" = "${fc##*:}" ] || { echo "family ${fc%%:*}: $n"; exit 1; }
	done
	# numbers 1..74, each once
	[ "$(head -n -1 list.txt | awk "{print \$1 + 0}" | sort -n | uniq | tr "\n" " ")" = "$(seq -s " " 1 74) " ]
'

expect 'mkb list --family filters, --json is valid JSON' '
	"$MKB" list --family moe >moe.txt
	[ "$(tail -1 moe.txt)" = "8 problems" ]
	! head -n -1 moe.txt | grep -v " moe "
	"$MKB" list --json | python3 -c "import json,sys; a=json.load(sys.stdin); assert len(a) == 74 and all(set(x) >= {\"number\",\"name\",\"family\",\"description\"} for x in a)"
	set +e; "$MKB" list --family cooking 2>err.txt; rc=$?; set -e
	[ $rc = 2 ] && grep -q "unknown family" err.txt
'

expect 'mkb show works for every problem in both DSLs and names the docs' '
	for n in $(seq 1 74); do
		for d in cutedsl tirx; do
			"$MKB" show $n --dsl $d >show.txt
			nn=$(printf "%02d" $n)
			grep -q "^# Problem $nn: " show.txt
			case $d in cutedsl) grep -q "in CuTe DSL" show.txt;; tirx) grep -q "in TIRx" show.txt;; esac
			grep -q "docs/$d/.*primer.md" show.txt
			grep -q "docs/$d/api-index.txt" show.txt
			! grep -q "{[a-z_]*}" show.txt
		done
	done
'

expect 'mkb show refuses an unknown problem or DSL' '
	set +e
	"$MKB" show 75 --dsl tirx 2>e1; r1=$?
	"$MKB" show 28 --dsl triton 2>e2; r2=$?
	set -e
	[ "$r1$r2" = 22 ] && grep -q "no problem 75" e1 && grep -q "unknown DSL" e2
'

expect 'mkb demo runs the project'"'"'s tools/demo.sh; it takes no arguments' '
	mkdir -p root/tools root/problems
	printf "#!/bin/sh\necho \"demo ran in \$(pwd)\"\n" >root/tools/demo.sh
	MKB_ROOT=$PWD/root "$MKB" demo >demo.txt
	grep -q "^demo ran" demo.txt
	"$MKB" demo --help | grep -q "tools/demo.sh"
	set +e
	"$MKB" demo now 2>err.txt; rc=$?
	set -e
	[ $rc = 2 ] && grep -q "takes no arguments" err.txt
'

finish
