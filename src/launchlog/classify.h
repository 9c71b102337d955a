/* Which kind of code a GPU kernel came from (docs/launch-attribution.md).
 * Pure C, no CUDA: the injection library (launchlog.c) fills the facts from
 * CUPTI and the loader's call stack; the unit tests fill them by hand. */
#ifndef MKB_LAUNCH_CLASSIFY_H
#define MKB_LAUNCH_CLASSIFY_H

enum mkb_kclass {
	MKB_K_DSL_CUTEDSL,    /* compiled by CuTe DSL (module loaded by its runtime) */
	MKB_K_DSL_TIRX,       /* compiled by TVM / TIRx (module loaded by libtvm_runtime*) */
	MKB_K_TORCH_NATIVE,   /* ATen's own kernels: elementwise, copies, fills, reductions, ... */
	MKB_K_VENDOR,         /* cuBLAS(Lt), cuDNN, NCCL, flash / mem-efficient attention,
				 CUTLASS kernels shipped in torch */
	MKB_K_OTHER_JIT,      /* Triton, NVRTC, inline extensions, anything unrecognised */
};

/* What is known about one kernel. Every field may be NULL. */
struct mkb_kernel_facts {
	const char *name;      /* the name CUPTI reports (mangled for C++ kernels) */
	const char *demangled; /* its demangled form, when a demangler was at hand */
	/* The file that holds the module's image (dladdr of the image pointer
	 * given to cuModuleLoadData / cuLibraryLoadData, the path given to
	 * cuModuleLoad / cuLibraryLoadFromFile) or the host stub of a runtime
	 * launch (dladdr of cudaLaunchKernel's func). NULL when the image was
	 * in anonymous memory (a JIT's output) or the launch was not matched. */
	const char *image;
	/* The innermost library on the stack of the thread that loaded the
	 * module, CUDA's own libraries (libcuda, libcudart, libcupti, libc) and
	 * this library skipped. NULL when not known. */
	const char *loader;
};

/* Classify; *rule (may be NULL) gets a short static sentence naming the rule
 * that decided. Unrecognised code is MKB_K_OTHER_JIT: the rules that use the
 * classes fail closed. */
enum mkb_kclass mkb_classify_kernel(const struct mkb_kernel_facts *f, const char **rule);

/* "dsl_cutedsl", "dsl_tirx", "torch_native", "vendor_library", "other_jit" */
const char *mkb_kclass_name(enum mkb_kclass c);

#endif
