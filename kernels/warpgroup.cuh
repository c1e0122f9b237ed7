// warpgroup.cuh: the warpgroup-level tensor-core instruction of sm_90, wgmma.mma_async (m64nNk16,
// f16 or bf16 operands from shared memory; m64nNk8, f32 operands read as tf32, both K-major, as
// the instruction takes them; f32 accumulators in registers), with its fences, behind
// functions that run the same on the simulator. A kernel that uses them is built with
// tensor_core.cuh (shared_address) and this file before its own source; on the GPU they need the
// sm_90a target, which tocha's NVRTC builds for sm_90 devices use (elsewhere they trap).
//
// A warpgroup is four consecutive warps, the first a multiple of 4; its 128 threads issue each
// wgmma together. The operands lie in shared memory in the 128-byte swizzled layout (the PTX ISA,
// "Shared Memory Matrix Layout"): rows of 128 bytes (64 16-bit elements), eight rows an atom of
// 1024 bytes, and the 16-byte chunk c of a row r stored at chunk c ^ (r % 8) of it: an address's
// bits 4-6 XORed with its bits 7-9, so that every atom must start 1024-byte aligned.
// swizzle128(row, chunk) gives the place. An operand is K-major (each of its rows along k) or
// MN-major (each row along m of A or n of B, with trans):
// - K-major, A 64 x 16 (or B N x 16, rows along n): row i at byte (i / 8) * stride + (i % 8) * 128
//   from the start, its 16 k elements the row's 32 bytes at the start's column; a kernel steps k
//   by 16 moving the start 32 bytes within the rows (the swizzle applies to the final address).
//   lead is not used.
// - MN-major, A 16 x 64 or B 16 x N (rows along k): k row j at (j / 8) * stride + (j % 8) * 128,
//   holding 64 elements of m (or n); elements 64 i to 64 i + 63 at i * lead further.
//
// Accumulators: thread t of the warpgroup (warp w = t / 32, g = lane / 4, q = lane % 4) holds, for
// each 8 columns j of the N, d[4j] and d[4j + 1] at row 16 w + g, columns 8 j + 2 q and 8 j + 2 q +
// 1, and d[4j + 2], d[4j + 3] at row 16 w + g + 8: the mma.m16n8 layout, per warp, along N.
//
// Ordering, as on the GPU: shared memory that ordinary stores or cp.async wrote must be fenced
// (fence_async_shared in each writer, after its writes) and a barrier passed before a wgmma reads
// it; wgmma_fence before the first wgmma of a batch; wgmma_commit closes a batch, and
// wgmma_wait<N> waits until at most N batches of this warpgroup are in flight: only then may the
// accumulators be read or the operands' shared memory be overwritten. The simulator computes at the
// call (the products summed in f64, added to d and rounded once to f32) and needs no fences.

namespace tocha
{

// The byte offset of 16-byte chunk `chunk` (0-7) of row `row` in a 128-byte swizzled tile.
__device__ __forceinline__ int swizzle128(int row, int chunk)
{
    return row * 128 + ((chunk ^ (row & 7)) << 4);
}

// The first 1024-byte boundary at or after p in shared memory: where swizzled tiles start (their
// swizzle follows address bits 7-9), the dynamic shared memory asked with 1 KiB to spare.
__device__ __forceinline__ unsigned char *align_1024(unsigned char *p)
{
#ifdef TOCHA_SIM
    const unsigned base = (unsigned)((unsigned long long)p % 1024);
#else
    const unsigned base = shared_address(p) % 1024;
#endif
    return p + (1024 - base) % 1024;
}

#ifdef TOCHA_SIM
__device__ __forceinline__ void wgmma_fence() {}
__device__ __forceinline__ void wgmma_commit() {}
template <int N> __device__ __forceinline__ void wgmma_wait() {}
__device__ __forceinline__ void fence_async_shared() {}
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
#else
__device__ __forceinline__ void wgmma_fence() { __trap(); }
__device__ __forceinline__ void wgmma_commit() { __trap(); }
template <int N> __device__ __forceinline__ void wgmma_wait() { __trap(); }
__device__ __forceinline__ void fence_async_shared() { __trap(); }
#endif

// setmaxnreg: this warpgroup's registers a thread become N (24 to 256, a multiple of 8),
// INCREASE or not; takes effect where the kernel's register count is capped at entry
// (__launch_bounds__(threads, 1)). Nothing on the simulator.
template <int N, bool INCREASE> __device__ __forceinline__ void set_max_registers()
{
#if !defined(TOCHA_SIM) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (INCREASE)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
    else
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

#if !defined(TOCHA_SIM) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The shared memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): the start address,
// the leading and stride byte offsets (each in 16-byte units), the 128-byte swizzle mode.
__device__ __forceinline__ unsigned long long wg_descriptor(const void *start, unsigned lead,
                                                            unsigned stride)
{
    return (unsigned long long)((shared_address(start) & 0x3ffffu) >> 4) |
           (unsigned long long)((lead >> 4) & 0x3fffu) << 16 |
           (unsigned long long)((stride >> 4) & 0x3fffu) << 32 | 1ull << 62;
}

// The asm of one wgmma for each N taken: the accumulators' operand lists, then the descriptors,
// the scale of d (1: accumulate) and the transposes.
#define TOCHA_WG_REGS_64                                                                                \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                             \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TOCHA_WG_ACC_64                                                                                 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),     \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),        \
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),      \
        "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),      \
        "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TOCHA_WG_REGS_128                                                                               \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                             \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"                   \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"                   \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TOCHA_WG_ACC_128                                                                                \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),     \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),        \
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),      \
        "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),      \
        "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),      \
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),      \
        "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),      \
        "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),      \
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define TOCHA_WG_REGS_256                                                                               \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                             \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"                   \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"                   \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"                   \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"                   \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"                   \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"       \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define TOCHA_WG_ACC_256                                                                                \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),     \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),        \
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),      \
        "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),      \
        "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),      \
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),      \
        "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),      \
        "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),      \
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),      \
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),      \
        "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),      \
        "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),      \
        "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),      \
        "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),      \
        "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),              \
        "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),             \
        "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),             \
        "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]),             \
        "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define TOCHA_WG_OPERANDS_64 "}, %32, %33, p, 1, 1, %35, %36;}"
#define TOCHA_WG_ONE_64 "%34"
#define TOCHA_WG_OPERANDS_128 "}, %64, %65, p, 1, 1, %67, %68;}"
#define TOCHA_WG_ONE_128 "%66"
#define TOCHA_WG_OPERANDS_256 "}, %128, %129, p, 1, 1, %131, %132;}"
#define TOCHA_WG_ONE_256 "%130"

#define TOCHA_WG_ASM(N, TYPE)                                                                           \
    "{.reg .pred p; setp.ne.b32 p, " TOCHA_WG_ONE_##N ", 0; wgmma.mma_async.sync.aligned.m64n" #N       \
                                                      "k16.f32." TYPE "." TYPE                          \
                                                      " {" TOCHA_WG_REGS_##N TOCHA_WG_OPERANDS_##N
#define TOCHA_WG_ISSUE(N)                                                                               \
    template <> struct wgmma_issue<N> {                                                                 \
        template <int BF16, int TA, int TB>                                                             \
        static __device__ __forceinline__ void run(float (&d)[N / 2], unsigned long long da,            \
                                                   unsigned long long db)                               \
        {                                                                                               \
            if (BF16)                                                                                   \
                asm volatile(TOCHA_WG_ASM(N, "bf16")                                                    \
                             : TOCHA_WG_ACC_##N                                                         \
                             : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB));                             \
            else                                                                                        \
                asm volatile(TOCHA_WG_ASM(N, "f16")                                                     \
                             : TOCHA_WG_ACC_##N                                                         \
                             : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB));                             \
        }                                                                                               \
    };
template <int N> struct wgmma_issue;
TOCHA_WG_ISSUE(64)
TOCHA_WG_ISSUE(128)
TOCHA_WG_ISSUE(256)

// tf32: no transpose operands (K-major only).
#define TOCHA_WG_TF32_OPERANDS_64 "}, %32, %33, p, 1, 1;}"
#define TOCHA_WG_TF32_OPERANDS_128 "}, %64, %65, p, 1, 1;}"
#define TOCHA_WG_TF32_OPERANDS_256 "}, %128, %129, p, 1, 1;}"
#define TOCHA_WG_TF32_ISSUE(N)                                                                          \
    template <> struct wgmma_tf32_issue<N> {                                                            \
        static __device__ __forceinline__ void run(float (&d)[N / 2], unsigned long long da,            \
                                                   unsigned long long db)                               \
        {                                                                                               \
            asm volatile("{.reg .pred p; setp.ne.b32 p, " TOCHA_WG_ONE_##N                               \
                         ", 0; wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32"                  \
                         " {" TOCHA_WG_REGS_##N TOCHA_WG_TF32_OPERANDS_##N                               \
                         : TOCHA_WG_ACC_##N                                                             \
                         : "l"(da), "l"(db), "r"(1));                                                   \
        }                                                                                               \
    };
template <int N> struct wgmma_tf32_issue;
TOCHA_WG_TF32_ISSUE(64)
TOCHA_WG_TF32_ISSUE(128)
TOCHA_WG_TF32_ISSUE(256)
#endif

// d (64 x N, f32, the layout above) += a (64 x 16) x b (16 x N), T __half or __nv_bfloat16, N 64,
// 128 or 256; a and b in shared memory as described above, K-major or, with TA / TB, MN-major,
// with their lead and stride byte offsets (multiples of 16). T float: a (64 x 8) x b (8 x N), the
// f32 operands read as tf32 (their 13 low mantissa bits dropped), both K-major (TA = TB = 0),
// their 8 k elements the 32 bytes at the start's column: a step of k moves the start 32 bytes,
// as the halves' does. Asynchronous on the GPU: see the ordering above.
template <typename T, int N, int TA, int TB>
__device__ __forceinline__ void wgmma(float (&d)[N / 2], const void *a, unsigned a_lead,
                                      unsigned a_stride, const void *b, unsigned b_lead,
                                      unsigned b_stride)
{
    static_assert(N == 64 || N == 128 || N == 256, "wgmma: N is 64, 128 or 256");
    if constexpr (sizeof(T) == 4) {
        static_assert(!TA && !TB, "wgmma: tf32 operands are K-major");
#ifdef TOCHA_SIM
        (void)a_lead, (void)b_lead;
        tocha_sim::wgmma_m64k8_tf32(d, N, a, a_stride, b, b_stride);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
        (void)a_lead, (void)b_lead;
        wgmma_tf32_issue<N>::run(d, wg_descriptor(a, 0, a_stride), wg_descriptor(b, 0, b_stride));
#else
        (void)d, (void)a, (void)a_lead, (void)a_stride, (void)b, (void)b_lead, (void)b_stride;
        __trap();
#endif
    } else {
#ifdef TOCHA_SIM
        tocha_sim::wgmma_m64k16(d, N, a, a_lead, a_stride, TA != 0, b, b_lead, b_stride, TB != 0,
                                mma_kind<T>::bf16);
#elif defined(__CUDA_ARCH_FEAT_SM90_ALL)
        wgmma_issue<N>::template run<mma_kind<T>::bf16, TA, TB>(d, wg_descriptor(a, a_lead, a_stride),
                                                                wg_descriptor(b, b_lead, b_stride));
#else
        (void)d, (void)a, (void)a_lead, (void)a_stride, (void)b, (void)b_lead, (void)b_stride;
        __trap();
#endif
    }
}

} // namespace tocha
