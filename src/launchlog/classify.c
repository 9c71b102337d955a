/* Kernel classification (classify.h). The evidence behind each rule, with
 * the real names it was checked against, is in docs/launch-attribution.md
 * and tests/unit/test_launch_classify.c.
 *
 * Order of evidence, strongest first:
 *  1. the file that holds the module image (or the runtime launch's host
 *     stub): a kernel shipped inside a library is that library's;
 *  2. for an image in anonymous memory (a JIT's output), the library that
 *     called the driver to load it: CuTe DSL's runtime, TVM's, Triton's
 *     launcher, or someone else's;
 *  3. only when neither is known, the kernel's name ("name only: ..."). */
#include <stddef.h>
#include <string.h>

#include "classify.h"

enum lib_kind { LIB_VENDOR, LIB_TORCH, LIB_CUTEDSL, LIB_TIRX, LIB_OTHER };

struct lib_marker {
	const char *text;
	int prefix;           /* 1: basename starts with text; 0: path contains text */
	enum lib_kind kind;
	const char *rule;
};

/* Checked in order; the first match decides. */
static const struct lib_marker lib_markers[] = {
	/* CUDA's own math and communication libraries */
	{"libcublasLt", 1, LIB_VENDOR, "cuBLASLt library"},
	{"libcublas", 1, LIB_VENDOR, "cuBLAS library"},
	{"libcudnn", 1, LIB_VENDOR, "cuDNN library"},
	{"libcusparse", 1, LIB_VENDOR, "cuSPARSE library"},
	{"libcufft", 1, LIB_VENDOR, "cuFFT library"},
	{"libcurand", 1, LIB_VENDOR, "cuRAND library"},
	{"libcusolver", 1, LIB_VENDOR, "cuSOLVER library"},
	{"libnccl", 1, LIB_VENDOR, "NCCL library"},
	{"libnvshmem", 1, LIB_VENDOR, "NVSHMEM library"},
	/* attention and GEMM libraries outside torch */
	{"flash_attn", 1, LIB_VENDOR, "flash-attention library"},
	{"libflash", 1, LIB_VENDOR, "flash-attention library"},
	{"flashinfer", 0, LIB_VENDOR, "FlashInfer library"},
	{"xformers", 0, LIB_VENDOR, "xFormers library"},
	{"deep_gemm", 0, LIB_VENDOR, "DeepGEMM library"},
	/* torch: the kernel's name separates ATen's own from vendored code */
	{"libtorch_cuda", 1, LIB_TORCH, NULL},
	{"libc10_cuda", 1, LIB_TORCH, NULL},
	{"libtorch_nvshmem", 1, LIB_TORCH, NULL},
	/* the DSLs' runtimes, which load what their compilers produced */
	{"libcute_dsl_runtime", 1, LIB_CUTEDSL, "loaded by CuTe DSL's runtime (libcute_dsl_runtime)"},
	{"/nvidia_cutlass_dsl/", 0, LIB_CUTEDSL, "loaded by the CuTe DSL package"},
	{"libtvm_runtime", 1, LIB_TIRX, "loaded by TVM's runtime (libtvm_runtime*)"},
	{"/tvm/lib/", 0, LIB_TIRX, "loaded by the TVM package"},
	/* JITs and extension mechanisms the rules forbid */
	{"/.triton/", 0, LIB_OTHER, "Triton (its cache)"},
	{"/triton/", 0, LIB_OTHER, "Triton"},
	{"__triton_launcher", 1, LIB_OTHER, "Triton's launcher"},
	{"cuda_utils", 1, LIB_OTHER, "Triton's driver module"},
	{"torch_extensions", 0, LIB_OTHER, "a torch C++/CUDA extension (load_inline)"},
	{"libnvrtc", 1, LIB_OTHER, "NVRTC"},
	{"cupy", 0, LIB_OTHER, "CuPy"},
	{"/cuda/bindings/", 0, LIB_OTHER, "cuda-python's driver bindings"},
	{"_ctypes", 1, LIB_OTHER, "ctypes"},
	{"libffi", 1, LIB_OTHER, "libffi (ctypes / cffi)"},
};

const char *mkb_kclass_name(enum mkb_kclass c)
{
	switch (c) {
	case MKB_K_DSL_CUTEDSL: return "dsl_cutedsl";
	case MKB_K_DSL_TIRX: return "dsl_tirx";
	case MKB_K_TORCH_NATIVE: return "torch_native";
	case MKB_K_VENDOR: return "vendor_library";
	case MKB_K_OTHER_JIT: return "other_jit";
	}
	return "other_jit";
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static const struct lib_marker *match_library(const char *path)
{
	const char *base = base_name(path);
	for (size_t i = 0; i < sizeof(lib_markers) / sizeof(lib_markers[0]); i++) {
		const struct lib_marker *m = &lib_markers[i];
		if (m->prefix ? !strncmp(base, m->text, strlen(m->text)) : strstr(path, m->text) != NULL)
			return m;
	}
	return NULL;
}

static int starts(const char *s, const char *prefix)
{
	return s && !strncmp(s, prefix, strlen(prefix));
}

/* text occurs in the name or in its demangled form */
static int mentions(const struct mkb_kernel_facts *f, const char *text)
{
	return (f->name && strstr(f->name, text)) || (f->demangled && strstr(f->demangled, text));
}

/* Attention and GEMM code that torch vendors (flash attention v2 as
 * pytorch_flash::, the CUTLASS memory-efficient attention, CUTLASS GEMMs for
 * scaled_mm and grouped mm): kernels a rule must not count as "torch glue". */
static int vendored_in_torch(const struct mkb_kernel_facts *f)
{
	static const char *const needles[] = {
		"pytorch_flash", "flash_fwd", "flash_bwd", "fmha_cutlass", "PyTorchMemEffAttention",
		"cudnn", "cublas",
	};
	for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
		if (mentions(f, needles[i]))
			return 1;
	/* the kernel itself in namespace cutlass (template arguments that merely
	 * name cutlass types, as in ATen's bf16 kernels, do not count) */
	return starts(f->name, "_ZN7cutlass") || starts(f->demangled, "cutlass::") ||
	       starts(f->demangled, "void cutlass::");
}

static enum mkb_kclass torch_kernel(const struct mkb_kernel_facts *f, const char **rule)
{
	if (vendored_in_torch(f)) {
		*rule = "flash / mem-efficient attention or CUTLASS kernel shipped in torch";
		return MKB_K_VENDOR;
	}
	if (mentions(f, "FillFunctor"))
		*rule = "ATen fill (torch)";
	else if (mentions(f, "reduce_kernel"))
		*rule = "ATen reduction (torch)";
	else if (mentions(f, "copy_kernel") || mentions(f, "CopyKernel"))
		*rule = "ATen copy (torch)";
	else if (mentions(f, "elementwise_kernel"))
		*rule = "ATen elementwise (torch)";
	else
		*rule = "other ATen kernel (torch)";
	return MKB_K_TORCH_NATIVE;
}

static enum mkb_kclass by_library(const struct mkb_kernel_facts *f, const struct lib_marker *m,
				  const char **rule)
{
	switch (m->kind) {
	case LIB_TORCH: return torch_kernel(f, rule);
	case LIB_VENDOR: *rule = m->rule; return MKB_K_VENDOR;
	case LIB_CUTEDSL: *rule = m->rule; return MKB_K_DSL_CUTEDSL;
	case LIB_TIRX: *rule = m->rule; return MKB_K_DSL_TIRX;
	case LIB_OTHER: *rule = m->rule; return MKB_K_OTHER_JIT;
	}
	*rule = m->rule;
	return MKB_K_OTHER_JIT;
}

/* Neither image nor loader known: the name is all there is. Weak evidence
 * (a name is the author's choice), marked "name only" in the rule. */
static enum mkb_kclass by_name(const struct mkb_kernel_facts *f, const char **rule)
{
	static const char *const vendor_prefixes[] = {
		"nvjet_", "sm90_xmma_", "sm80_xmma_", "sm100_xmma_", "ampere_", "volta_", "turing_",
		"cutlass_", "_ZN8cublasLt", "_ZN7cutlass",
	};
	static const char *const vendor_needles[] = {
		"cublas", "cudnn", "pytorch_flash", "fmha_cutlass", "PyTorchMemEffAttention",
		"flash_fwd", "flash_bwd", "_xmma_", "gemv2N_kernel", "gemv2T_kernel", "gemvx",
		"splitKreduce",
	};
	if (starts(f->name, "kernel_cutlass_")) {
		*rule = "name only: CuTe DSL's kernel_cutlass_ prefix (origin unknown)";
		return MKB_K_DSL_CUTEDSL;
	}
	for (size_t i = 0; i < sizeof(vendor_prefixes) / sizeof(vendor_prefixes[0]); i++)
		if (starts(f->name, vendor_prefixes[i])) {
			*rule = "name only: a vendor library's kernel name";
			return MKB_K_VENDOR;
		}
	for (size_t i = 0; i < sizeof(vendor_needles) / sizeof(vendor_needles[0]); i++)
		if (mentions(f, vendor_needles[i])) {
			*rule = "name only: a vendor library's kernel name";
			return MKB_K_VENDOR;
		}
	if (starts(f->name, "_ZN2at6native") || starts(f->name, "_ZN2at4cuda") ||
	    mentions(f, "at::native::")) {
		*rule = "name only: ATen namespace";
		return MKB_K_TORCH_NATIVE;
	}
	if (starts(f->name, "triton_")) {
		*rule = "name only: Triton's triton_ prefix";
		return MKB_K_OTHER_JIT;
	}
	*rule = "name only: unrecognised kernel";
	return MKB_K_OTHER_JIT;
}

enum mkb_kclass mkb_classify_kernel(const struct mkb_kernel_facts *f, const char **rule)
{
	const char *ignored;
	if (!rule)
		rule = &ignored;
	if (f->image && *f->image) {
		const struct lib_marker *m = match_library(f->image);
		if (m)
			return by_library(f, m, rule);
		*rule = "module image in an unrecognised library";
		return MKB_K_OTHER_JIT;
	}
	if (f->loader && *f->loader) {
		const struct lib_marker *m = match_library(f->loader);
		if (m)
			return by_library(f, m, rule);
		*rule = "loaded from memory by an unrecognised library";
		return MKB_K_OTHER_JIT;
	}
	return by_name(f, rule);
}
