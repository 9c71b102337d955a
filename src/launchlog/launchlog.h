/* The interface of build/libmkb_launch.so (docs/launch-attribution.md).
 *
 * Load it with CUDA_INJECTION64_PATH=/abs/path/libmkb_launch.so and give it a
 * writable descriptor in MKB_LAUNCH_FD; the driver calls InitializeInjection
 * at cuInit. It writes JSON lines to that descriptor: "hello" once, "module"
 * per module or library load, "kernel" per kernel executed, "begin" / "end"
 * around each solve call, "error" on a CUPTI failure, "bye" at exit.
 *
 * The harness (ctypes.CDLL on the same path returns the loaded library)
 * brackets each solve call:
 *     mkb_launch_begin(n)   before the call's first launch   (n > 0)
 *     ... solve, then a device-wide synchronisation ...
 *     mkb_launch_end(n)     delivers the call's kernel records, then "end"
 * Every line carries "seq" (0, 1, 2, ... in the order written) and "tag"
 * (read once from the descriptor at start-up: the checker's secret).
 * Launches outside a begin/end pair are recorded with call 0 (the harness).
 * On a socket, the checker sends the same markers as commands ("begin <n>",
 * "end <n>", one datagram each), read by the library's own thread: the
 * judge's way, which the candidate's code cannot imitate; marker lines say
 * "via": "checker" or "api". */
#ifndef MKB_LAUNCHLOG_H
#define MKB_LAUNCHLOG_H

#include <stdint.h>

/* 0, or -1 when not recording (or call == 0). */
int mkb_launch_begin(uint64_t call);
/* 0, or -1 when not recording or a CUPTI call failed (an "error" line says which). */
int mkb_launch_end(uint64_t call);
/* 1 while recording. */
int mkb_launch_active(void);
/* CUDA's injection entry point; always 1 (CUDA goes on without us on failure). */
int InitializeInjection(void);

#endif
