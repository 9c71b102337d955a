# Sourced by the GPU scripts (gpu_judge.sh, noise_study.sh, gpu_batch.sh):
# which shipped kernels a "N or N/dsl" list names.
#
#   wanted LIST NN_name dsl   is (problem, dsl) named by LIST? (comma
#                             separated N or N/dsl; empty: everything)
#   solutions LIST [ROOT]     "NN_name dsl" per ROOT/NN_name/dsl/kernel.py
#                             that LIST names (ROOT: solutions)

wanted() {
	local t
	[ -n "$1" ] || return 0
	for t in ${1//,/ }; do
		[ "$((10#${t%%/*}))" = "$((10#${2%%_*}))" ] || continue
		[ "$t" = "${t%%/*}" ] || [ "${t#*/}" = "$3" ] && return 0
	done
	return 1
}

solutions() {
	local d n dsl
	for d in "${2:-solutions}"/[0-9]*_*/; do
		d=${d%/}
		n=$(basename "$d")
		for dsl in cutedsl tirx; do
			[ -f "$d/$dsl/kernel.py" ] && wanted "${1:-}" "$n" "$dsl" && echo "$n $dsl"
		done
	done
	return 0
}
