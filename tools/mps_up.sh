# Sourced by the GPU scripts (gpu_judge.sh): CUDA's multi-process service
# for one script, as a diagnosis (docs/judge.md, "Honest kernels still time
# slower"): both of the judge's processes then submit their work through one
# GPU context, so nothing switches contexts between the checker's work and
# the candidate's call. Private to the script: its control daemon's pipe and
# log folders live under DIR, only processes given CUDA_MPS_PIPE_DIRECTORY
# reach it, and the GPU's compute mode and clocks are left as they are.
#
#   mps_up DIR   start `nvidia-cuda-mps-control -d` with its folders under DIR,
#                export CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY
#                for what the script starts next, and quit the daemon when
#                the script exits. Returns 3 (why, on stderr) when it could
#                not start.

mps_up() {
	local dir=$1
	command -v nvidia-cuda-mps-control >/dev/null || {
		echo "mps_up: no nvidia-cuda-mps-control on this machine" >&2
		return 3
	}
	mkdir -p "$dir/pipe" "$dir/log" || return 3
	export CUDA_MPS_PIPE_DIRECTORY="$dir/pipe" CUDA_MPS_LOG_DIRECTORY="$dir/log"
	nvidia-cuda-mps-control -d || {
		echo "mps_up: the control daemon did not start:" >&2
		cat "$dir/log/control.log" >&2 2>/dev/null
		unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
		return 3
	}
	# quit it (and the server it starts for the first client) on exit
	trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1' EXIT
}
