// tensor_core.cuh: the warp-level tensor-core instructions a matrix kernel is written with, as
// PTX defines them, behind functions that run the same on the simulator: mma.sync m16n8k16
// (f16 or bf16 inputs, f32 accumulators), ldmatrix (1, 2 or 4 8x8 matrices of 16-bit elements,
// plain or transposed) and cp.async (16 bytes from global to shared memory, in groups). A kernel
// that uses them is built with this file before its own source:
//   kernel.new { source = op.source("tensor_core.cuh") .. op.source("matmul.cu"), ... }
//
// Fragments are PTX's, lane by lane (the PTX ISA, "Matrix fragments for mma.m16n8k16"), so that
// a kernel may fill them from registers as well as through ldmatrix. With g = lane / 4 and
// t = lane % 4, each 32-bit register holding two elements, the lower-indexed in its low half:
// - A, 16 x 16 row-major, four registers: a[0] row g, columns 2t and 2t + 1; a[1] row g + 8;
//   a[2] row g, columns 2t + 8 and 2t + 9; a[3] row g + 8, columns 2t + 8 and 2t + 9.
// - B, 16 x 8 (k x n) column-major, two registers: b[0] rows 2t and 2t + 1 of column g; b[1]
//   rows 2t + 8 and 2t + 9.
// - C and D, 16 x 8 f32, four floats: c[0], c[1] row g, columns 2t and 2t + 1; c[2], c[3] row
//   g + 8.
// The tensor cores' sum of the 16 products and c rounds in an order and precision the hardware
// does not document (at least f32's); the simulator sums in f64 and rounds once, so results
// agree exactly wherever the products and partial sums are exact in f32.
//
// Each function is called by all 32 lanes of a warp together (the _sync instructions' rule;
// the simulator fails the launch otherwise, naming it).

namespace tocha
{

// The f16 and bf16 element types of mma_16816.
template <typename T> struct mma_kind;
template <> struct mma_kind<__half> {
    static const int bf16 = 0;
};
template <> struct mma_kind<__nv_bfloat16> {
    static const int bf16 = 1;
};

// d = a x b + c on one warp's fragments (above), T __half or __nv_bfloat16; d may be c.
template <typename T>
__device__ __forceinline__ void mma_16816(float d[4], const unsigned a[4], const unsigned b[2],
                                          const float c[4])
{
#ifdef TOCHA_SIM
    tocha_sim::mma_m16n8k16(d, a, b, c, mma_kind<T>::bf16);
#else
    if (mma_kind<T>::bf16)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%10, %11, %12, %13};"
            : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
              "f"(c[2]), "f"(c[3]));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%10, %11, %12, %13};"
            : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
              "f"(c[2]), "f"(c[3]));
#endif
}

#ifndef TOCHA_SIM
__device__ __forceinline__ unsigned shared_address(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}
#endif

// ldmatrix: COUNT (1, 2 or 4) 8x8 matrices of 16-bit elements from shared memory. Lane l gives
// `row`, the address of row l % 8 of matrix l / 8 (16 bytes, 16-byte aligned; lanes past
// 8 x COUNT give theirs too, unused); r[j] then holds matrix j's row lane / 4, elements 2t and
// 2t + 1 (t = lane % 4), or with TRANS its column lane / 4, rows 2t and 2t + 1. Four matrices
// of a 16 x 16 row-major tile (rows 0-7 and 8-15 of columns 0-7, then of 8-15: lane l giving
// row l % 16, column 8 x (l / 16)) are mma_16816's A fragment; with TRANS over a k x n
// row-major tile, two matrices are its B fragment.
template <int COUNT, bool TRANS = false>
__device__ __forceinline__ void ldmatrix(unsigned r[COUNT], const void *row)
{
#ifdef TOCHA_SIM
    tocha_sim::ldmatrix(r, COUNT, TRANS, row);
#else
    const unsigned s = shared_address(row);
    if (COUNT == 4 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s)
                     : "memory");
    else if (COUNT == 4)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s)
                     : "memory");
    else if (COUNT == 2 && TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(s)
                     : "memory");
    else if (COUNT == 2)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(s)
                     : "memory");
    else if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"
                     : "=r"(r[0])
                     : "r"(s)
                     : "memory");
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];"
                     : "=r"(r[0])
                     : "r"(s)
                     : "memory");
#endif
}

// cp.async: starts a copy of the first `bytes` (0 to 16) of the 16 bytes at src (global, 16-byte
// aligned) to dst (shared, 16-byte aligned), the rest of dst's 16 bytes zeroed (bytes 0: a
// tile's edge). The copies a thread started since its last commit form a group; cp_async_wait<N>
// waits until at most N of its groups are still in flight. Other threads see dst only after a
// barrier that follows their writer's wait. The simulator copies at once.
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int bytes = 16)
{
#ifdef TOCHA_SIM
    memcpy(dst, src, (size_t)bytes);
    memset((char *)dst + bytes, 0, (size_t)(16 - bytes));
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(dst)),
                 "l"(__cvta_generic_to_global(src)), "r"(bytes)
                 : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit()
{
#ifndef TOCHA_SIM
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
#ifndef TOCHA_SIM
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

} // namespace tocha
