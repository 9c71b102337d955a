# Sourced by the GPU scripts (zygote_bench.sh, gpu_judge.sh): a zygote for
# the script's evaluations (docs/judge.md, "Start-up: the zygote").
#
#   zygote_up NAME DEVICE LOG   start `build/mkb zygote --socket NAME` in the
#                               background (its output in LOG), wait up to
#                               120 s until both zygotes (candidates' and
#                               checkers') listen, end it when the script
#                               exits. Returns 3 (LOG on stderr) when it did
#                               not start.

zygote_up() {
	local name=$1 device=$2 log=$3
	build/mkb zygote --socket "$name" --device "$device" >"$log" 2>&1 &
	ZYGOTE_PID=$!
	trap 'kill $ZYGOTE_PID 2>/dev/null; wait $ZYGOTE_PID 2>/dev/null' EXIT
	for _ in $(seq 1200); do
		[ "$(grep -c '"zygote"' "$log" 2>/dev/null)" = 2 ] && return 0
		kill -0 $ZYGOTE_PID 2>/dev/null || break
		sleep 0.1
	done
	echo "the zygote did not start:" >&2
	cat "$log" >&2
	return 3
}
