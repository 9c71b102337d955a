/* Launch attribution: the kernel classifier and the bounded JSON lines of
 * src/launchlog/ (docs/launch-attribution.md). The kernel names are real:
 * CuTe DSL's and TIRx's from compiling solutions/28_fused_add_rmsnorm for
 * sm_90a on the CPU (CUTE_DSL_KEEP=cubin; tvm inspect_source), torch's and
 * cuBLASLt's from the strings of libtorch_cuda.so (torch 2.11 cu130) and
 * libcublasLt.so.13 of the grader's GPU venv. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "launchlog/classify.h"
#include "launchlog/jsonl.h"
#include "unit.h"

#define TORCH "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so"
#define CUBLASLT "/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublasLt.so.13"
#define CUTE_RT "/venv/lib/python3.11/site-packages/nvidia_cutlass_dsl/cu13/lib/libcute_dsl_runtime.so"
#define TVM_RT "/venv/lib/python3.11/site-packages/tvm/lib/libtvm_runtime_cuda.so"
#define TRITON_UTILS "/root/.triton/cache/3f2a/cuda_utils.cpython-311-x86_64-linux-gnu.so"

#define CUTE_28 "kernel_cutlass__fused_add_rmsnorm_kernel_ptrbf16gmemalign16_ptrbf16gmemalign16_" \
		"ptrbf16gmemalign16_ptrbf16gmemalign16__4096_128_4_1_1e05_0"
#define TIRX_28 "fused_add_rmsnorm_kernel"
#define ATEN_ABS "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_10AbsFunctorIbEESt5arrayIPcLm2EEEEviT0_T1_"
#define ATEN_FILL "_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_15gpu_kernel_implINS0_11FillFunctorImEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_"
#define ATEN_REDUCE "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIbNS0_9MinMaxOpsIbbiEEjbLi4ELi4EEEEEvT1_"
#define ATEN_COPY "_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_15gpu_kernel_implIZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE14_clEvEUlmE_EEvS4_RKT_EUliE_EEviT1_"
/* an ATen kernel whose template arguments name CUTLASS types */
#define ATEN_SPARSE "_ZN2at6native35sparse_semi_structured_apply_kernelINS0_11KernelTypesIN7cutlass10bfloat16_tEEEEEvNT_6ParamsE"
#define FLASH_BWD "_ZN13pytorch_flash44flash_bwd_dq_dk_dv_loop_seqk_parallel_kernelI23Flash_bwd_kernel_traitsILi128ELi64ELi64ELi8ELi4ELi2ELi2ELb1ELb0EN7cutlass10bfloat16_tE19Flash_kernel_traitsILi128ELi64ELi64ELi8ES3_EELb0ELb1ELb0ELb0ELb0ELb0ELb0EEEvNS_16Flash_bwd_paramsE"
#define MEMEFF_FWD "_Z43fmha_cutlassF_bf16_aligned_32x128_gmem_sm80N22PyTorchMemEffAttention15AttentionKernelIN7cutlass10bfloat16_tENS1_4arch4Sm80ELb1ELi32ELi128ELi65536ELb1ELb1EE6ParamsE"
#define CUTLASS_IN_TORCH "_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9xINS_4gemm6kernel13GemmUniversalINS5_17GroupProblemShapeIN4cute5tupleIJiiiEEEEE"
#define XMMA "sm90_xmma_gemm_i8i32_i8i32_i32_tn_n_tilesize64x256x128_cgasize1x1x1_warpgroupsize1x1x1_aligna4_alignc4_execute_split_k_kernel__5x_cublas"
#define SPLITK "_ZN8cublasLt19splitKreduce_kernelILi8ELi32Eif13__nv_fp8_e4m3fS1_Lb1Ef6__halfS2_Lb0ELb0ELb0ELb0EEEvNS_18cublasSplitKParamsIT4_EEPKT2_PKT8_PT7_PT3_PKS4_SH_PKT9_S8_PSI_PvlPS4_PiSN_SN_SH_SH_SH_SH_SH_"

static enum mkb_kclass cls(const char *name, const char *demangled, const char *image, const char *loader,
			   const char **rule)
{
	struct mkb_kernel_facts f = {name, demangled, image, loader};
	return mkb_classify_kernel(&f, rule);
}

static void test_dsl_kernels(void)
{
	const char *rule = NULL;
	/* CuTe DSL: the cubin in Python's memory, loaded by its runtime */
	CHECK(cls(CUTE_28, NULL, NULL, CUTE_RT, &rule) == MKB_K_DSL_CUTEDSL);
	CHECK(rule && strstr(rule, "libcute_dsl_runtime"));
	/* TIRx: loaded by TVM's CUDA runtime module */
	CHECK(cls(TIRX_28, NULL, NULL, TVM_RT, &rule) == MKB_K_DSL_TIRX);
	/* the loader decides, not the name: a CuTe-looking name from Triton */
	CHECK(cls(CUTE_28, NULL, NULL, TRITON_UTILS, &rule) == MKB_K_OTHER_JIT);
	CHECK(cls(TIRX_28, NULL, NULL, CUTE_RT, NULL) == MKB_K_DSL_CUTEDSL);
	/* names alone: CuTe's prefix is recognised (and marked), TVM's is not */
	CHECK(cls(CUTE_28, NULL, NULL, NULL, &rule) == MKB_K_DSL_CUTEDSL);
	CHECK(rule && !strncmp(rule, "name only", 9));
	CHECK(cls(TIRX_28, NULL, NULL, NULL, &rule) == MKB_K_OTHER_JIT);
}

static void test_torch_kernels(void)
{
	const char *rule = NULL;
	CHECK(cls(ATEN_ABS, NULL, TORCH, NULL, &rule) == MKB_K_TORCH_NATIVE);
	CHECK_STR(rule, "ATen elementwise (torch)");
	CHECK(cls(ATEN_FILL, NULL, TORCH, NULL, &rule) == MKB_K_TORCH_NATIVE);
	CHECK_STR(rule, "ATen fill (torch)");
	CHECK(cls(ATEN_REDUCE, NULL, TORCH, NULL, &rule) == MKB_K_TORCH_NATIVE);
	CHECK_STR(rule, "ATen reduction (torch)");
	CHECK(cls(ATEN_COPY, NULL, TORCH, NULL, &rule) == MKB_K_TORCH_NATIVE);
	CHECK_STR(rule, "ATen copy (torch)");
	CHECK(cls(ATEN_SPARSE, NULL, TORCH, NULL, &rule) == MKB_K_TORCH_NATIVE);
	/* vendored inside libtorch_cuda.so */
	CHECK(cls(FLASH_BWD, NULL, TORCH, NULL, &rule) == MKB_K_VENDOR);
	CHECK(cls(MEMEFF_FWD, NULL, TORCH, NULL, NULL) == MKB_K_VENDOR);
	CHECK(cls(CUTLASS_IN_TORCH, NULL, TORCH, NULL, NULL) == MKB_K_VENDOR);
	CHECK(cls("kernel", "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm>(Params)", TORCH, NULL,
		  NULL) == MKB_K_VENDOR);
	/* origin unknown: the ATen namespace, mangled or demangled */
	CHECK(cls(ATEN_ABS, NULL, NULL, NULL, &rule) == MKB_K_TORCH_NATIVE);
	CHECK(rule && !strncmp(rule, "name only", 9));
	CHECK(cls("x", "void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<bool>>(int)",
		  NULL, NULL, NULL) == MKB_K_TORCH_NATIVE);
	/* an ATen-looking name in someone else's library is that library's */
	CHECK(cls(ATEN_ABS, NULL, "/tmp/build/torch_extensions/py311_cu130/myext/myext.so", NULL, &rule) ==
	      MKB_K_OTHER_JIT);
}

static void test_vendor_kernels(void)
{
	CHECK(cls(XMMA, NULL, CUBLASLT, NULL, NULL) == MKB_K_VENDOR);
	CHECK(cls(SPLITK, NULL, CUBLASLT, NULL, NULL) == MKB_K_VENDOR);
	CHECK(cls("anything", NULL, "/usr/lib/x86_64-linux-gnu/libcublas.so.13", NULL, NULL) == MKB_K_VENDOR);
	CHECK(cls("anything", NULL, "/venv/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", NULL, NULL) ==
	      MKB_K_VENDOR);
	/* cuDNN's runtime-compiled engines load from memory */
	CHECK(cls("cudnn_generated_fort_native_sdpa", NULL, NULL,
		  "/venv/nvidia/cudnn/lib/libcudnn_engines_runtime_compiled.so.9", NULL) == MKB_K_VENDOR);
	CHECK(cls("fwd", NULL, "/venv/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so", NULL, NULL) ==
	      MKB_K_VENDOR);
	/* by name only */
	CHECK(cls(XMMA, NULL, NULL, NULL, NULL) == MKB_K_VENDOR);
	CHECK(cls(SPLITK, NULL, NULL, NULL, NULL) == MKB_K_VENDOR);
	CHECK(cls("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_TNT", NULL, NULL, NULL, NULL) == MKB_K_VENDOR);
	CHECK(cls(FLASH_BWD, NULL, NULL, NULL, NULL) == MKB_K_VENDOR);
}

static void test_other_jit(void)
{
	const char *rule = NULL;
	CHECK(cls("triton_poi_fused_add_0", NULL, NULL, TRITON_UTILS, &rule) == MKB_K_OTHER_JIT);
	CHECK(rule && strstr(rule, "Triton"));
	CHECK(cls("add_kernel", NULL, NULL, "/x/site-packages/triton/backends/nvidia/lib/libtriton.so", NULL) ==
	      MKB_K_OTHER_JIT);
	CHECK(cls("my_kernel", NULL, NULL, "/x/site-packages/cuda/bindings/_bindings/cydriver.cpython-311.so",
		  &rule) == MKB_K_OTHER_JIT);
	CHECK(rule && strstr(rule, "cuda-python"));
	CHECK(cls("k", NULL, NULL, "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so",
		  NULL) == MKB_K_OTHER_JIT);
	CHECK(cls("k", NULL, NULL, "/home/u/libmine.so", &rule) == MKB_K_OTHER_JIT);
	CHECK_STR(rule, "loaded from memory by an unrecognised library");
	CHECK(cls("k", NULL, "/home/u/libmine.so", NULL, &rule) == MKB_K_OTHER_JIT);
	CHECK_STR(rule, "module image in an unrecognised library");
	CHECK(cls("triton_red_fused_0", NULL, NULL, NULL, NULL) == MKB_K_OTHER_JIT);
	CHECK(cls(NULL, NULL, NULL, NULL, &rule) == MKB_K_OTHER_JIT);
	CHECK(cls("", NULL, "", "", NULL) == MKB_K_OTHER_JIT);
	CHECK_STR(mkb_kclass_name(MKB_K_DSL_TIRX), "dsl_tirx");
	CHECK_STR(mkb_kclass_name(MKB_K_VENDOR), "vendor_library");
}

/* The line parses as JSON; returns the object (caller decrefs) or NULL. */
static json_t *parsed(const struct mkb_line *l)
{
	json_error_t err;
	CHECK(l->len > 0 && l->len <= MKB_LINE_MAX && l->buf[l->len - 1] == '\n');
	json_t *j = json_loadb(l->buf, l->len, 0, &err);
	CHECK(j != NULL);
	if (!j)
		fprintf(stderr, "  %s: %.*s\n", err.text, (int)l->len, l->buf);
	return j;
}

static void test_jsonl_lines(void)
{
	struct mkb_line l;
	mkb_line_start(&l, "kernel");
	mkb_line_str(&l, "name", "a\"b\\c\nd\x01 \xc3\xa9", 100);
	mkb_line_u64(&l, "ns", 9223372036854775807ULL); /* jansson's largest */
	mkb_line_i64(&l, "smem", -5);
	mkb_line_triple(&l, "grid", 1, 2, 3);
	mkb_line_bool(&l, "ok", 1);
	mkb_line_str(&l, "image", NULL, 10);
	mkb_line_end(&l);
	CHECK(!l.full);
	json_t *j = parsed(&l);
	CHECK_STR(json_string_value(json_object_get(j, "t")), "kernel");
	CHECK_STR(json_string_value(json_object_get(j, "name")), "a\"b\\c\nd\x01 \xc3\xa9");
	CHECK(json_integer_value(json_object_get(j, "smem")) == -5);
	CHECK(json_array_size(json_object_get(j, "grid")) == 3);
	CHECK(json_is_true(json_object_get(j, "ok")));
	CHECK(json_is_null(json_object_get(j, "image")));
	json_decref(j);

	/* a value cut at its own limit, never inside a UTF-8 sequence */
	mkb_line_start(&l, "kernel");
	mkb_line_str(&l, "name", "ab\xc3\xa9zz", 3);
	mkb_line_end(&l);
	j = parsed(&l);
	CHECK_STR(json_string_value(json_object_get(j, "name")), "ab");
	CHECK(json_is_true(json_object_get(j, "name_cut")));
	json_decref(j);
}

static void test_jsonl_bounded(void)
{
	/* names longer than a line: the line stays whole, valid and bounded */
	static char huge[3 * MKB_LINE_MAX];
	memset(huge, '"', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	struct mkb_line l;
	mkb_line_start(&l, "kernel");
	mkb_line_str(&l, "name", huge, sizeof(huge));
	mkb_line_str(&l, "demangled", huge, sizeof(huge));
	mkb_line_u64(&l, "ns", 7);
	mkb_line_end(&l);
	CHECK(l.full);
	json_t *j = parsed(&l);
	CHECK(json_is_true(json_object_get(j, "name_cut")));
	json_decref(j);

	/* fill with many small fields until they no longer fit */
	mkb_line_start(&l, "end");
	for (int i = 0; i < 1000; i++)
		mkb_line_triple(&l, "grid", 2147483647, -2147483647, i);
	mkb_line_end(&l);
	CHECK(l.full);
	j = parsed(&l);
	json_decref(j);
}

static void test_jsonl_sealed(void)
{
	/* the seal fits even on a line that is full */
	static char huge[3 * MKB_LINE_MAX];
	memset(huge, 'x', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	const char tag[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	struct mkb_line l;
	mkb_line_start(&l, "kernel");
	mkb_line_str(&l, "name", huge, sizeof(huge));
	mkb_line_str(&l, "demangled", huge, sizeof(huge));
	mkb_line_seal(&l, 9223372036854775807ULL, tag); /* jansson's largest */
	mkb_line_end(&l);
	CHECK(l.full);
	json_t *j = parsed(&l);
	CHECK_STR(json_string_value(json_object_get(j, "tag")), tag);
	CHECK(json_is_integer(json_object_get(j, "seq")));
	json_decref(j);

	/* a tag that is not lower-case hex is cut where it stops being hex */
	mkb_line_start(&l, "begin");
	mkb_line_seal(&l, 3, "ab\"}x");
	mkb_line_end(&l);
	j = parsed(&l);
	CHECK_STR(json_string_value(json_object_get(j, "tag")), "ab");
	CHECK(json_integer_value(json_object_get(j, "seq")) == 3);
	json_decref(j);
	mkb_line_start(&l, "begin");
	mkb_line_seal(&l, 0, NULL);
	mkb_line_end(&l);
	j = parsed(&l);
	CHECK_STR(json_string_value(json_object_get(j, "tag")), "");
	json_decref(j);
}

const struct unit_test launch_tests[] = {
	{"launch: DSL kernels by their loader", test_dsl_kernels},
	{"launch: torch's own and vendored kernels", test_torch_kernels},
	{"launch: vendor libraries", test_vendor_kernels},
	{"launch: Triton, cuda-python, ctypes, unknown", test_other_jit},
	{"launch: JSON lines escape and parse", test_jsonl_lines},
	{"launch: JSON lines stay bounded", test_jsonl_bounded},
	{"launch: JSON lines are sealed, even when full", test_jsonl_sealed},
};
const size_t launch_ntests = sizeof(launch_tests) / sizeof(launch_tests[0]);
