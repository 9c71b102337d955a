/* libmkb_launch.so: launch attribution inside the candidate process
 * (docs/launch-attribution.md). CUDA's driver loads it at cuInit when
 * CUDA_INJECTION64_PATH names it and calls InitializeInjection(), which
 * subscribes to CUPTI:
 *
 *  - driver and runtime API callbacks on module / library loads (which file
 *    holds the image, which library on the stack asked for it), on the calls
 *    that map a function or kernel handle to its module, and on every launch
 *    entry point (the launch's correlation id, the call it belongs to, the
 *    origin of the function launched);
 *  - kernel activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL): name,
 *    grid, block, cluster, shared memory, device start and end, correlation id.
 *
 * Each kernel record is joined to its launch by correlation id, classified
 * (classify.h) and written as one JSON line to the descriptor named by
 * MKB_LAUNCH_FD, from C: the candidate's Python never handles a record.
 * The harness delimits solve calls with mkb_launch_begin / mkb_launch_end.
 *
 * Built without sanitizers: it is loaded into a Python process that is not
 * built with them. Every table is fixed in size; what does not fit is
 * counted and reported in the "end" records, never silently lost. */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>


#include "classify.h"
#include "jsonl.h"
#include "launchlog.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- limits ------------------------------------------------------------ */

#define PATH_CAP 512          /* bytes of a library path kept */
#define CHAIN_CAP 768         /* bytes of a loader chain kept */
#define MAX_ORIGINS 2048      /* distinct module loads / host-stub libraries */
#define HANDLE_SLOTS (1u << 16) /* function, kernel, module, library handles */
#define CORR_SLOTS (1u << 16) /* launches awaiting their kernel record */
#define CACHE_SLOTS 2048      /* classification cache (name pointer, origin) */
#define BUF_BYTES (1u << 20)  /* one CUPTI activity buffer */
#define MAX_BUFFERS 64        /* activity buffers outstanding at once */
#define BT_FRAMES 48          /* stack frames examined at a module load */
#define NAME_CAP 1536         /* bytes of a kernel name written */
#define DEMANGLED_CAP 1024    /* bytes of a demangled name written */

/* ---- state ------------------------------------------------------------- */

struct origin {
	char api[32];             /* what loaded it: cuModuleLoadData, host stub, ... */
	char image[PATH_CAP];     /* file of the image, "" when in anonymous memory */
	char loader[PATH_CAP];    /* innermost library on the loading stack, "" if none */
	char chain[CHAIN_CAP];    /* up to 4 libraries of that stack, innermost first */
};

struct handle_slot {
	uintptr_t key;            /* 0: empty */
	int origin;
};

struct corr_slot {
	uint32_t corr;            /* 0: empty (CUPTI's ids start at 1) */
	int origin;
	uint64_t call;
	const char *api;          /* static string */
};

struct cache_slot {
	const char *name;         /* CUPTI's interned name pointer */
	int origin;
	enum mkb_kclass cls;
	const char *rule;
	char *demangled;          /* malloc'd by __cxa_demangle, or NULL */
};

static int g_fd = -1;
/* The checker's tag for this process's lines (hex), read from g_fd once at
 * start-up, before any candidate code runs; "" when none came. */
static char g_tag[MKB_TAG_MAX + 1];
static uint64_t g_seq;                 /* the next line's number (g_write_lock) */
/* MKB_LAUNCH_DRY=1 (tests on a machine without a GPU): no CUPTI at all; the
 * channel, the seal and the markers work, and no kernel is ever recorded.
 * "hello" says "dry": true, and a checker that is not testing refuses it. */
static int g_dry;
static atomic_int g_active;
static atomic_uint_fast64_t g_call;    /* the solve call running, 0: the harness */
static CUpti_SubscriberHandle g_subscriber;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;   /* tables below */
static pthread_mutex_t g_write_lock = PTHREAD_MUTEX_INITIALIZER;
static struct origin g_origins[MAX_ORIGINS]; /* [0]: unknown */
static int g_norigins = 1;
static struct handle_slot g_handles[HANDLE_SLOTS];
static struct corr_slot g_corr[CORR_SLOTS];
static struct cache_slot g_cache[CACHE_SLOTS];

/* the current call's totals (under g_lock) */
static uint64_t g_cur_call, g_cur_kernels, g_cur_ns[MKB_K_OTHER_JIT + 1];

/* counts of what could not be kept (reported in every "end" record) */
static atomic_uint_fast64_t g_dropped;      /* CUPTI's dropped activity records */
static atomic_uint_fast64_t g_refused;      /* buffers refused (MAX_BUFFERS) */
static atomic_uint_fast64_t g_lost_lines;   /* lines write(2) did not take */
static atomic_uint_fast64_t g_cut_lines;    /* lines with a field cut short */
static atomic_uint_fast64_t g_unmatched;    /* kernel records without a launch seen */
static atomic_uint_fast64_t g_table_full;   /* origins / handles / corr overwritten or full */
static atomic_uint_fast64_t g_cupti_errors;
static atomic_int g_buffers_out;

static _Thread_local int t_inside;          /* our own driver calls: no recursion */

/* Resolved at init, NULL when missing (then not used). */
static __typeof__(cuFuncGetModule) *p_cuFuncGetModule;
static __typeof__(cuKernelGetLibrary) *p_cuKernelGetLibrary;
static char *(*p_cxa_demangle)(const char *, char *, size_t *, int *);

static char g_self_path[PATH_CAP];

/* ---- output ------------------------------------------------------------ */

static void emit(struct mkb_line *l)
{
	if (l->full)
		atomic_fetch_add(&g_cut_lines, 1);
	if (g_fd < 0)
		return;
	/* One write per line: atomic on a pipe (n <= PIPE_BUF), one datagram on
	 * a SOCK_SEQPACKET socket. The lock keeps lines whole on other files,
	 * and the sequence numbers in the order of the writes. */
	if (pthread_mutex_lock(&g_write_lock) != 0) {
		atomic_fetch_add(&g_lost_lines, 1);
		return;
	}
	/* Sealed (docs/launch-attribution.md "Sealed lines"): a line written
	 * by anything else on this descriptor lacks the tag, and a line lost
	 * leaves a gap in seq. */
	mkb_line_seal(l, g_seq++, g_tag);
	size_t n = mkb_line_end(l);
	const char *p = l->buf;
	while (n > 0) {
		ssize_t w = write(g_fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			atomic_fetch_add(&g_lost_lines, 1);
			break;
		}
		p += w;
		n -= (size_t)w;
	}
	if (pthread_mutex_unlock(&g_write_lock) != 0)
		atomic_fetch_add(&g_lost_lines, 1);
}

static void emit_cupti_error(const char *what, CUptiResult r)
{
	const char *text = NULL;
	if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS)
		text = NULL;
	atomic_fetch_add(&g_cupti_errors, 1);
	struct mkb_line l;
	mkb_line_start(&l, "error");
	mkb_line_str(&l, "what", what, 128);
	mkb_line_i64(&l, "code", (int64_t)r);
	mkb_line_str(&l, "text", text, 256);
	emit(&l);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strnlen(src, cap - 1) : 0;
	if (n)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ---- tables (callers hold g_lock) ---------------------------------------- */

static size_t mix(uintptr_t k)
{
	uint64_t x = (uint64_t)k;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)x;
}

/* Open addressing, bounded probe; a full neighbourhood overwrites its
 * first slot (counted): stale handles are the ones to lose. */
#define PROBE 16

static void handle_put(const void *handle, int origin)
{
	uintptr_t key = (uintptr_t)handle;
	if (!key)
		return;
	size_t h = mix(key);
	for (size_t i = 0; i < PROBE; i++) {
		struct handle_slot *s = &g_handles[(h + i) & (HANDLE_SLOTS - 1)];
		if (s->key == key || s->key == 0) {
			s->key = key;
			s->origin = origin;
			return;
		}
	}
	atomic_fetch_add(&g_table_full, 1);
	struct handle_slot *s = &g_handles[h & (HANDLE_SLOTS - 1)];
	s->key = key;
	s->origin = origin;
}

/* origin of a handle, 0 when unknown */
static int handle_get(const void *handle)
{
	uintptr_t key = (uintptr_t)handle;
	if (!key)
		return 0;
	size_t h = mix(key);
	for (size_t i = 0; i < PROBE; i++) {
		const struct handle_slot *s = &g_handles[(h + i) & (HANDLE_SLOTS - 1)];
		if (s->key == key)
			return s->origin;
		if (s->key == 0)
			return 0;
	}
	return 0;
}

static int origin_new(const char *api, const char *image, const char *loader, const char *chain)
{
	if (g_norigins >= MAX_ORIGINS) {
		atomic_fetch_add(&g_table_full, 1);
		return 0;
	}
	struct origin *o = &g_origins[g_norigins];
	copy_str(o->api, sizeof(o->api), api);
	copy_str(o->image, sizeof(o->image), image);
	copy_str(o->loader, sizeof(o->loader), loader);
	copy_str(o->chain, sizeof(o->chain), chain);
	return g_norigins++;
}

/* The origin for host stubs in one library file (interned). */
static int origin_for_stub_file(const char *path)
{
	for (int i = 1; i < g_norigins; i++)
		if (!strcmp(g_origins[i].api, "host stub") && !strncmp(g_origins[i].image, path, PATH_CAP - 1))
			return i;
	return origin_new("host stub", path, "", "");
}

static void corr_put(uint32_t corr, int origin, const char *api)
{
	struct corr_slot *s = &g_corr[corr & (CORR_SLOTS - 1)];
	if (s->corr == corr) {
		/* a runtime launch and the driver launch under it may share the
		 * id: keep the better-known origin */
		if (origin)
			s->origin = origin;
		return;
	}
	/* an older launch still here never produced a kernel record (a failed
	 * launch, or the driver call under a runtime one): replace it */
	s->corr = corr;
	s->origin = origin;
	s->api = api;
	s->call = atomic_load(&g_call);
}

/* ---- where code came from ---------------------------------------------- */

static int skipped_library(const char *path)
{
	static const char *const skip[] = {"libcuda.so", "libcudart.so", "libcupti.so", "libc.so",
					   "libpthread.so", "ld-linux", "libdl.so", "libgcc_s.so"};
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (g_self_path[0] && !strcmp(path, g_self_path))
		return 1;
	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (!strncmp(base, skip[i], strlen(skip[i])))
			return 1;
	return 0;
}

/* The libraries on this thread's stack, innermost first, CUDA's own and
 * ours skipped: loader gets the first, chain up to four ("[anon]" for code
 * in anonymous memory, a JIT's). */
static void loading_stack(char *loader, size_t loader_cap, char *chain, size_t chain_cap)
{
	void *frames[BT_FRAMES];
	int n = backtrace(frames, BT_FRAMES);
	size_t used = 0;
	int listed = 0;
	const char *last = NULL;
	loader[0] = chain[0] = '\0';
	for (int i = 0; i < n && listed < 4; i++) {
		Dl_info info;
		const char *path = "[anon]";
		if (dladdr(frames[i], &info) && info.dli_fname && info.dli_fname[0])
			path = info.dli_fname;
		if (strcmp(path, "[anon]") && skipped_library(path))
			continue;
		if (last && !strcmp(last, path))
			continue;
		last = path;
		if (!loader[0] && strcmp(path, "[anon]"))
			copy_str(loader, loader_cap, path);
		int w = snprintf(chain + used, chain_cap - used, "%s%s", listed ? " < " : "", path);
		if (w < 0 || (size_t)w >= chain_cap - used)
			break;
		used += (size_t)w;
		listed++;
	}
}

/* dladdr's file for an address inside a mapped library, or "" */
static void file_of(const void *addr, char *out, size_t cap)
{
	Dl_info info;
	out[0] = '\0';
	if (addr && dladdr(addr, &info) && info.dli_fname && info.dli_fname[0] == '/')
		copy_str(out, cap, info.dli_fname);
}

static void module_loaded(const char *api, const void *handle, const void *image_ptr, const char *file)
{
	char image[PATH_CAP], loader[PATH_CAP], chain[CHAIN_CAP];
	if (file)
		copy_str(image, sizeof(image), file);
	else
		file_of(image_ptr, image, sizeof(image));
	loading_stack(loader, sizeof(loader), chain, sizeof(chain));
	if (pthread_mutex_lock(&g_lock) != 0)
		return;
	int origin = origin_new(api, image, loader, chain);
	handle_put(handle, origin);
	if (pthread_mutex_unlock(&g_lock) != 0)
		atomic_fetch_add(&g_table_full, 1);
	const char *rule;
	struct mkb_kernel_facts facts = {NULL, NULL, image, loader};
	enum mkb_kclass cls = mkb_classify_kernel(&facts, &rule);
	struct mkb_line l;
	mkb_line_start(&l, "module");
	mkb_line_i64(&l, "origin", origin);
	mkb_line_str(&l, "api", api, 64);
	mkb_line_str(&l, "image", image[0] ? image : NULL, PATH_CAP);
	mkb_line_str(&l, "loader", loader[0] ? loader : NULL, PATH_CAP);
	mkb_line_str(&l, "chain", chain, CHAIN_CAP);
	mkb_line_str(&l, "class", mkb_kclass_name(cls), 32);
	mkb_line_str(&l, "rule", rule, 128);
	mkb_line_u64(&l, "call", atomic_load(&g_call));
	emit(&l);
}

/* Map a derived handle (function of a module, kernel of a library, ...) to
 * the origin of the handle it came from. */
static void derived(const void *child, const void *parent)
{
	if (pthread_mutex_lock(&g_lock) != 0)
		return;
	handle_put(child, handle_get(parent));
	if (pthread_mutex_unlock(&g_lock) != 0)
		atomic_fetch_add(&g_table_full, 1);
}

/* The origin of a launched function (g_lock held). A handle not seen being
 * made is asked of the driver (its module or library) once, then cached. */
static int function_origin(const void *f)
{
	int origin = handle_get(f);
	if (origin || !f || t_inside)
		return origin;
	t_inside = 1;
	CUmodule mod = NULL;
	CUlibrary lib = NULL;
	if (p_cuFuncGetModule && p_cuFuncGetModule(&mod, (CUfunction)(uintptr_t)f) == CUDA_SUCCESS)
		origin = handle_get(mod);
	if (!origin && p_cuKernelGetLibrary &&
	    p_cuKernelGetLibrary(&lib, (CUkernel)(uintptr_t)f) == CUDA_SUCCESS)
		origin = handle_get(lib);
	t_inside = 0;
	if (origin)
		handle_put(f, origin);
	return origin;
}

/* A runtime launch names a host stub (or a cudaKernel_t): the stub's
 * library is the origin when the handle is not known. */
static void runtime_launch(uint32_t corr, const void *func, const char *api)
{
	char file[PATH_CAP];
	if (pthread_mutex_lock(&g_lock) != 0)
		return;
	int origin = handle_get(func);
	if (!origin) {
		file_of(func, file, sizeof(file));
		if (file[0]) {
			origin = origin_for_stub_file(file);
			handle_put(func, origin);
		}
	}
	corr_put(corr, origin, api);
	if (pthread_mutex_unlock(&g_lock) != 0)
		atomic_fetch_add(&g_table_full, 1);
}

static void driver_launch(uint32_t corr, const void *f, const char *api)
{
	if (pthread_mutex_lock(&g_lock) != 0)
		return;
	corr_put(corr, f ? function_origin(f) : 0, api);
	if (pthread_mutex_unlock(&g_lock) != 0)
		atomic_fetch_add(&g_table_full, 1);
}

/* ---- CUPTI callbacks ----------------------------------------------------- */

#define P(type) ((const type *)cb->functionParams)

static void on_driver(CUpti_CallbackId cbid, const CUpti_CallbackData *cb)
{
	if (cb->callbackSite == CUPTI_API_ENTER) {
		switch (cbid) {
		case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
		case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
			driver_launch(cb->correlationId, P(cuLaunchKernel_params)->f, "cuLaunchKernel");
			break;
		case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
		case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
			driver_launch(cb->correlationId, P(cuLaunchKernelEx_params)->f, "cuLaunchKernelEx");
			break;
		case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
		case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
			driver_launch(cb->correlationId, P(cuLaunchCooperativeKernel_params)->f,
				      "cuLaunchCooperativeKernel");
			break;
		case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
		case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
			/* kernels of a graph: their origin is not traced here */
			driver_launch(cb->correlationId, NULL, "cuGraphLaunch");
			break;
		default:
			break;
		}
		return;
	}
	/* exits: handles made by a successful call */
	if (!cb->functionReturnValue || *(const CUresult *)cb->functionReturnValue != CUDA_SUCCESS)
		return;
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoad:
		module_loaded("cuModuleLoad", *P(cuModuleLoad_params)->module, NULL, P(cuModuleLoad_params)->fname);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData:
		module_loaded("cuModuleLoadData", *P(cuModuleLoadData_params)->module,
			      P(cuModuleLoadData_params)->image, NULL);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx:
		module_loaded("cuModuleLoadDataEx", *P(cuModuleLoadDataEx_params)->module,
			      P(cuModuleLoadDataEx_params)->image, NULL);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary:
		module_loaded("cuModuleLoadFatBinary", *P(cuModuleLoadFatBinary_params)->module,
			      P(cuModuleLoadFatBinary_params)->fatCubin, NULL);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData:
		module_loaded("cuLibraryLoadData", *P(cuLibraryLoadData_params)->library,
			      P(cuLibraryLoadData_params)->code, NULL);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile:
		module_loaded("cuLibraryLoadFromFile", *P(cuLibraryLoadFromFile_params)->library, NULL,
			      P(cuLibraryLoadFromFile_params)->fileName);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction:
		derived(*P(cuModuleGetFunction_params)->hfunc, P(cuModuleGetFunction_params)->hmod);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel:
		derived(*P(cuLibraryGetKernel_params)->pKernel, P(cuLibraryGetKernel_params)->library);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryGetModule:
		derived(*P(cuLibraryGetModule_params)->pMod, P(cuLibraryGetModule_params)->library);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction:
		derived(*P(cuKernelGetFunction_params)->pFunc, P(cuKernelGetFunction_params)->kernel);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuModuleEnumerateFunctions: {
		const cuModuleEnumerateFunctions_params *p = P(cuModuleEnumerateFunctions_params);
		for (unsigned i = 0; p->functions && i < p->numFunctions && i < HANDLE_SLOTS / 4; i++)
			derived(p->functions[i], p->mod);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryEnumerateKernels: {
		const cuLibraryEnumerateKernels_params *p = P(cuLibraryEnumerateKernels_params);
		for (unsigned i = 0; p->kernels && i < p->numKernels && i < HANDLE_SLOTS / 4; i++)
			derived(p->kernels[i], p->lib);
		break;
	}
	default:
		break;
	}
}

static void on_runtime(CUpti_CallbackId cbid, const CUpti_CallbackData *cb)
{
	if (cb->callbackSite == CUPTI_API_EXIT) {
		/* the runtime's own library API hands out cudaKernel_t handles */
		if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLibraryGetKernel_v12060 && cb->functionReturnValue &&
		    *(const cudaError_t *)cb->functionReturnValue == cudaSuccess)
			derived(*P(cudaLibraryGetKernel_v12060_params)->pKernel,
				P(cudaLibraryGetKernel_v12060_params)->library);
		return;
	}
	switch (cbid) {
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
		runtime_launch(cb->correlationId, P(cudaLaunchKernel_v7000_params)->func, "cudaLaunchKernel");
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
		runtime_launch(cb->correlationId, P(cudaLaunchKernel_ptsz_v7000_params)->func, "cudaLaunchKernel");
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
		runtime_launch(cb->correlationId, P(cudaLaunchKernelExC_v11060_params)->func, "cudaLaunchKernelExC");
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
		runtime_launch(cb->correlationId, P(cudaLaunchKernelExC_ptsz_v11060_params)->func,
			       "cudaLaunchKernelExC");
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
		runtime_launch(cb->correlationId, P(cudaLaunchCooperativeKernel_v9000_params)->func,
			       "cudaLaunchCooperativeKernel");
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
		runtime_launch(cb->correlationId, P(cudaLaunchCooperativeKernel_ptsz_v9000_params)->func,
			       "cudaLaunchCooperativeKernel");
		break;
	case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
	case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
		runtime_launch(cb->correlationId, NULL, "cudaGraphLaunch");
		break;
	case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
	case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
		/* nvcc 13's <<<>>>: its params struct is not in the headers; the
		 * driver launch under it carries the function */
		runtime_launch(cb->correlationId, NULL, "__cudaLaunchKernel");
		break;
	default:
		break;
	}
}

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			    const void *data)
{
	(void)userdata;
	if (!atomic_load(&g_active) || !data)
		return;
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
		on_driver(cbid, data);
	else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
		on_runtime(cbid, data);
}

/* ---- activity records ---------------------------------------------------- */

/* Activity buffers are kept for reuse. Every call's end flushes, which
 * hands CUPTI's buffer back, so the next call's first launch asks for one
 * inside its timed window: a fresh 1 MiB allocation there is an mmap and
 * page faults each call (and a munmap, with its TLB shootdown across the
 * process's threads, at each flush). Pooled buffers stay resident; the two
 * start() makes are touched there, before any launch. */
static void *g_pool[MAX_BUFFERS];
static int g_pool_n;
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;

static void *buffer_take(void)
{
	void *p = NULL;
	if (pthread_mutex_lock(&g_pool_lock) == 0) {
		if (g_pool_n > 0)
			p = g_pool[--g_pool_n];
		if (pthread_mutex_unlock(&g_pool_lock) != 0)
			atomic_fetch_add(&g_table_full, 1);
	}
	return p ? p : aligned_alloc(8, BUF_BYTES);
}

static void buffer_give(void *p)
{
	if (!p)
		return;
	if (pthread_mutex_lock(&g_pool_lock) == 0) {
		if (g_pool_n < MAX_BUFFERS) {
			g_pool[g_pool_n++] = p;
			p = NULL;
		}
		if (pthread_mutex_unlock(&g_pool_lock) != 0)
			atomic_fetch_add(&g_table_full, 1);
	}
	free(p);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*max_records = 0;
	*buffer = NULL;
	*size = 0;
	if (atomic_fetch_add(&g_buffers_out, 1) >= MAX_BUFFERS) {
		atomic_fetch_sub(&g_buffers_out, 1);
		atomic_fetch_add(&g_refused, 1); /* CUPTI drops records, and counts them */
		return;
	}
	void *p = buffer_take();
	if (!p) {
		atomic_fetch_sub(&g_buffers_out, 1);
		atomic_fetch_add(&g_refused, 1);
		return;
	}
	*buffer = p;
	*size = BUF_BYTES;
}

/* Class of (name, origin), cached; g_lock held. */
static const struct cache_slot *classified(const char *name, int origin)
{
	size_t h = mix((uintptr_t)name ^ ((uintptr_t)origin << 48)) & (CACHE_SLOTS - 1);
	struct cache_slot *s = &g_cache[h];
	if (s->name == name && s->origin == origin && name)
		return s;
	free(s->demangled);
	s->demangled = NULL;
	if (p_cxa_demangle && name && name[0] == '_' && name[1] == 'Z') {
		int status = -1;
		char *d = p_cxa_demangle(name, NULL, NULL, &status);
		if (status == 0)
			s->demangled = d;
		else
			free(d);
	}
	const struct origin *o = &g_origins[origin > 0 && origin < g_norigins ? origin : 0];
	struct mkb_kernel_facts facts = {name, s->demangled, o->image, o->loader};
	s->cls = mkb_classify_kernel(&facts, &s->rule);
	s->name = name;
	s->origin = origin;
	return s;
}

static void kernel_record(const CUpti_ActivityKernel10 *k)
{
	struct corr_slot found = {0, 0, 0, NULL};
	if (pthread_mutex_lock(&g_lock) != 0)
		return;
	struct corr_slot *s = &g_corr[k->correlationId & (CORR_SLOTS - 1)];
	if (s->corr == k->correlationId && k->correlationId) {
		found = *s;
		/* a graph's kernels share their launch's id: keep the slot */
		if (k->graphId == 0)
			s->corr = 0;
	} else {
		atomic_fetch_add(&g_unmatched, 1);
	}
	const struct origin *o = &g_origins[found.origin > 0 && found.origin < g_norigins ? found.origin : 0];
	const struct cache_slot *c = classified(k->name, found.origin);
	enum mkb_kclass cls = c->cls;
	const char *rule = c->rule;
	uint64_t ns = k->end > k->start ? k->end - k->start : 0;
	if (found.corr && found.call != 0 && found.call == g_cur_call) {
		g_cur_kernels++;
		g_cur_ns[cls] += ns;
	}
	/* build the line under the lock: the origin and cache entry stay put */
	struct mkb_line l;
	mkb_line_start(&l, "kernel");
	mkb_line_u64(&l, "call", found.call);
	mkb_line_str(&l, "class", mkb_kclass_name(cls), 32);
	mkb_line_str(&l, "rule", rule, 128);
	mkb_line_str(&l, "api", found.api, 32);
	mkb_line_u64(&l, "ns", ns);
	mkb_line_u64(&l, "start", k->start);
	mkb_line_u64(&l, "end", k->end);
	mkb_line_triple(&l, "grid", k->gridX, k->gridY, k->gridZ);
	mkb_line_triple(&l, "block", k->blockX, k->blockY, k->blockZ);
	mkb_line_triple(&l, "cluster", k->clusterX, k->clusterY, k->clusterZ);
	mkb_line_i64(&l, "smem", (int64_t)k->staticSharedMemory + k->dynamicSharedMemory);
	mkb_line_u64(&l, "corr", k->correlationId);
	mkb_line_u64(&l, "stream", k->streamId);
	mkb_line_u64(&l, "graph", k->graphId);
	mkb_line_i64(&l, "origin", found.origin);
	mkb_line_str(&l, "image", o->image[0] ? o->image : NULL, PATH_CAP);
	mkb_line_str(&l, "loader", o->loader[0] ? o->loader : NULL, PATH_CAP);
	mkb_line_str(&l, "name", k->name, NAME_CAP);
	mkb_line_str(&l, "demangled", c->demangled, DEMANGLED_CAP);
	if (pthread_mutex_unlock(&g_lock) != 0)
		atomic_fetch_add(&g_table_full, 1);
	emit(&l);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				      size_t valid)
{
	(void)size;
	CUpti_Activity *rec = NULL;
	for (;;) {
		CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &rec);
		if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
			break;
		if (r != CUPTI_SUCCESS) {
			emit_cupti_error("cuptiActivityGetNextRecord", r);
			break;
		}
		if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
			kernel_record((const CUpti_ActivityKernel10 *)rec);
	}
	size_t dropped = 0;
	CUptiResult r = cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
	if (r == CUPTI_SUCCESS)
		atomic_fetch_add(&g_dropped, dropped);
	else
		emit_cupti_error("cuptiActivityGetNumDroppedRecords", r);
	if (buffer)
		atomic_fetch_sub(&g_buffers_out, 1);
	buffer_give(buffer);
}

/* ---- the markers of solve calls ------------------------------------------ */

/* They come two ways, and each marker line says which ("via"):
 *  - "checker": commands the checker sends on the launch socket, read by
 *    this library's own thread (command_loop). Only the checker holds the
 *    other end, so the candidate cannot send one; the judge uses these.
 *  - "api": the exported functions below, which anything in the process can
 *    call (tools/gpu_launch_check.sh does). A checker that drives the
 *    markers itself treats an "api" marker as the kernel's doing. */

/* Call `call` (> 0) starts: launches from now on belong to it. */
static int mark_begin(uint64_t call, const char *via)
{
	if (!atomic_load(&g_active) || call == 0)
		return -1;
	if (pthread_mutex_lock(&g_lock) != 0)
		return -1;
	g_cur_call = call;
	g_cur_kernels = 0;
	memset(g_cur_ns, 0, sizeof(g_cur_ns));
	if (pthread_mutex_unlock(&g_lock) != 0)
		return -1;
	atomic_store(&g_call, call);
	struct mkb_line l;
	mkb_line_start(&l, "begin");
	mkb_line_u64(&l, "call", call);
	mkb_line_str(&l, "via", via, 16);
	emit(&l);
	return 0;
}

/* Call `call` is over: launches are the harness's again (call 0); its
 * kernel records are delivered, then an "end" line with its totals and the
 * loss counters. */
static int mark_end(uint64_t call, const char *via)
{
	if (!atomic_load(&g_active))
		return -1;
	atomic_store(&g_call, 0);
	int rc = 0;
	CUptiResult r = g_dry ? CUPTI_SUCCESS : cuptiActivityFlushAll(0);
	if (r != CUPTI_SUCCESS) {
		emit_cupti_error("cuptiActivityFlushAll", r);
		rc = -1;
	}
	struct mkb_line l;
	mkb_line_start(&l, "end");
	mkb_line_u64(&l, "call", call);
	mkb_line_str(&l, "via", via, 16);
	if (pthread_mutex_lock(&g_lock) != 0)
		return -1;
	mkb_line_bool(&l, "matched", g_cur_call == call);
	mkb_line_u64(&l, "kernels", g_cur_kernels);
	for (int c = 0; c <= MKB_K_OTHER_JIT; c++) {
		char key[40];
		int n = snprintf(key, sizeof(key), "ns_%s", mkb_kclass_name((enum mkb_kclass)c));
		if (n > 0 && (size_t)n < sizeof(key))
			mkb_line_u64(&l, key, g_cur_ns[c]);
	}
	g_cur_call = 0;
	if (pthread_mutex_unlock(&g_lock) != 0)
		rc = -1;
	mkb_line_u64(&l, "dropped", atomic_load(&g_dropped));
	mkb_line_u64(&l, "refused_buffers", atomic_load(&g_refused));
	mkb_line_u64(&l, "unmatched", atomic_load(&g_unmatched));
	mkb_line_u64(&l, "table_full", atomic_load(&g_table_full));
	mkb_line_u64(&l, "cut_lines", atomic_load(&g_cut_lines));
	mkb_line_u64(&l, "lost_lines", atomic_load(&g_lost_lines));
	mkb_line_u64(&l, "cupti_errors", atomic_load(&g_cupti_errors));
	emit(&l);
	return rc;
}

/* Solve call `call` (> 0) starts. 0 on success, -1 when not recording. */
EXPORT int mkb_launch_begin(uint64_t call)
{
	return mark_begin(call, "api");
}

/* Solve call `call` is over (the harness has synchronised the device).
 * 0 on success, -1 otherwise. */
EXPORT int mkb_launch_end(uint64_t call)
{
	return mark_end(call, "api");
}

/* The checker's commands, one datagram each: "begin <n>" or "end <n>".
 * Ends when the checker closes its end (or the descriptor fails). A command
 * that does not parse is answered by an "error" line. */
static void *command_loop(void *arg)
{
	(void)arg;
	for (;;) {
		char buf[64];
		ssize_t n = recv(g_fd, buf, sizeof(buf) - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		buf[n] = '\0';
		char *end = NULL;
		const char *num = !strncmp(buf, "begin ", 6) ? buf + 6 : !strncmp(buf, "end ", 4) ? buf + 4 : NULL;
		errno = 0;
		unsigned long long call = num ? strtoull(num, &end, 10) : 0;
		if (!num || errno || !end || *end || end == num) {
			struct mkb_line l;
			mkb_line_start(&l, "error");
			mkb_line_str(&l, "what", "command", 16);
			mkb_line_str(&l, "text", buf, 64);
			emit(&l);
			continue;
		}
		if (buf[0] == 'b')
			mark_begin(call, "checker");
		else
			mark_end(call, "checker");
	}
	return NULL;
}

/* The command thread, only on a socket (a pipe carries no commands). */
static void start_commands(void)
{
	int type = 0;
	socklen_t len = sizeof(type);
	if (getsockopt(g_fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
		return;
	pthread_t t;
	pthread_attr_t attr;
	if (pthread_attr_init(&attr) != 0)
		return;
	if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
	    pthread_create(&t, &attr, command_loop, NULL) != 0) {
		struct mkb_line l;
		mkb_line_start(&l, "error");
		mkb_line_str(&l, "what", "pthread_create", 32);
		emit(&l);
	}
	pthread_attr_destroy(&attr);
}

/* 1 while recording (the harness checks this once after cuInit). */
EXPORT int mkb_launch_active(void)
{
	return atomic_load(&g_active);
}

/* ---- start-up ------------------------------------------------------------ */

static void at_exit(void)
{
	if (!atomic_load(&g_active))
		return;
	CUptiResult r = g_dry ? CUPTI_SUCCESS : cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (r != CUPTI_SUCCESS)
		emit_cupti_error("cuptiActivityFlushAll(forced)", r);
	struct mkb_line l;
	mkb_line_start(&l, "bye");
	mkb_line_u64(&l, "dropped", atomic_load(&g_dropped));
	mkb_line_u64(&l, "lost_lines", atomic_load(&g_lost_lines));
	emit(&l);
	atomic_store(&g_active, 0);
}

static int parse_fd(const char *text)
{
	if (!text || !*text)
		return -1;
	char *end = NULL;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || *end || v < 0 || v > INT_MAX)
		return -1;
	int fd = (int)v;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
		return -1;
	int fdfl = fcntl(fd, F_GETFD);
	if (fdfl < 0 || fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0)
		return -1;
	return fd;
}

/* The checker queued one datagram on the other end of a socket before the
 * descriptor reached this process: the tag that seals every line. Read at
 * cuInit, before the candidate's code is imported; the candidate cannot read
 * it from the socket afterwards (it is gone from the queue). No datagram
 * (a pipe, a plain file): no tag, and a checker that expects one refuses
 * the lines. */
static void read_tag(void)
{
	char buf[MKB_TAG_MAX + 1];
	ssize_t n;
	do
		n = recv(g_fd, buf, MKB_TAG_MAX, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	size_t k = 0;
	while (n > 0 && k < (size_t)n && ((buf[k] >= '0' && buf[k] <= '9') || (buf[k] >= 'a' && buf[k] <= 'f')))
		k++;
	if (n > 0 && k == (size_t)n)
		memcpy(g_tag, buf, k);
	g_tag[n > 0 && k == (size_t)n ? k : 0] = '\0';
	explicit_bzero(buf, sizeof(buf));
}

static void resolve_optional(void)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (cuda) {
		*(void **)&p_cuFuncGetModule = dlsym(cuda, "cuFuncGetModule");
		*(void **)&p_cuKernelGetLibrary = dlsym(cuda, "cuKernelGetLibrary");
	}
	void *cxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
	if (cxx)
		*(void **)&p_cxa_demangle = dlsym(cxx, "__cxa_demangle");
	Dl_info info;
	if (dladdr((void *)&mkb_launch_active, &info) && info.dli_fname)
		copy_str(g_self_path, sizeof(g_self_path), info.dli_fname);
	/* the handles from dlopen stay open: the libraries were loaded anyway */
}

#define TRY(call)                                         \
	do {                                              \
		CUptiResult r_ = (call);                  \
		if (r_ != CUPTI_SUCCESS) {                \
			emit_cupti_error(#call, r_);      \
			return 1;                         \
		}                                         \
	} while (0)

static const CUpti_CallbackId driver_cbids[] = {
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuModuleLoad, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
	CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary,
	CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData, CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile,
	CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction, CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLibraryGetModule, CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction,
	CUPTI_DRIVER_TRACE_CBID_cuModuleEnumerateFunctions, CUPTI_DRIVER_TRACE_CBID_cuLibraryEnumerateKernels,
};

static const CUpti_CallbackId runtime_cbids[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
	CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
	CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
	CUPTI_RUNTIME_TRACE_CBID_cudaLibraryGetKernel_v12060,
};

static int start(void)
{
	uint32_t version = 0;
	if (g_dry) {
		/* no CUPTI: the channel, the seal and the markers only */
		resolve_optional();
		goto hello;
	}
	TRY(cuptiGetVersion(&version));
	resolve_optional();
	TRY(cuptiSubscribe(&g_subscriber, on_api, NULL));
	for (size_t i = 0; i < sizeof(driver_cbids) / sizeof(driver_cbids[0]); i++)
		TRY(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, driver_cbids[i]));
	for (size_t i = 0; i < sizeof(runtime_cbids) / sizeof(runtime_cbids[0]); i++)
		TRY(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_cbids[i]));
	/* two buffers ready before the first call (one in use, one after a
	 * flush), their pages faulted in now rather than under a launch */
	for (int i = 0; i < 2; i++) {
		void *p = aligned_alloc(8, BUF_BYTES);
		if (p)
			memset(p, 0, BUF_BYTES);
		buffer_give(p);
	}
	TRY(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
	TRY(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
hello:
	if (atexit(at_exit) != 0)
		return 1;
	atomic_store(&g_active, 1);
	struct mkb_line l;
	mkb_line_start(&l, "hello");
	mkb_line_u64(&l, "v", 2); /* 2: lines sealed, mkb_launch_stop */
	mkb_line_i64(&l, "pid", (int64_t)getpid());
	mkb_line_u64(&l, "cupti", version);
	mkb_line_u64(&l, "cupti_header", CUPTI_API_VERSION);
	mkb_line_str(&l, "library", g_self_path, PATH_CAP);
	mkb_line_bool(&l, "demangler", p_cxa_demangle != NULL);
	mkb_line_bool(&l, "func_get_module", p_cuFuncGetModule != NULL);
	mkb_line_bool(&l, "dry", g_dry);
	emit(&l);
	return 0;
}

/* Called by the CUDA driver at cuInit. Whatever happens, CUDA goes on (1);
 * a harness that needs the records checks mkb_launch_active() and the
 * "hello" line. */
EXPORT int InitializeInjection(void)
{
	static atomic_int once;
	if (atomic_exchange(&once, 1))
		return 1;
	g_fd = parse_fd(getenv("MKB_LAUNCH_FD"));
	if (g_fd < 0) {
		static const char msg[] = "mkb_launch: MKB_LAUNCH_FD is not a writable descriptor: not recording\n";
		if (write(2, msg, sizeof(msg) - 1) < 0) {
			/* nothing more to do */
		}
		return 1;
	}
	read_tag();
	const char *dry = getenv("MKB_LAUNCH_DRY");
	g_dry = dry && !strcmp(dry, "1");
	if (start() != 0)
		atomic_store(&g_active, 0);
	else
		start_commands();
	return 1;
}
