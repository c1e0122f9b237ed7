// warpgroup.h: the simulator's side of warpgroup.cuh, wgmma.mma_async m64nNk16 (f16, bf16) and
// m64nNk8 (tf32, both operands K-major). The operands are
// in shared memory already, so each thread computes its own accumulators at the call, reading
// the elements through the 128-byte swizzle as the tensor cores address them; no lane waits for
// another.
namespace tocha_sim
{

// The element at `offset` bytes past `start` after the 128-byte swizzle (an address's bits 4-6
// XORed with its bits 7-9), as f64.
static inline double swizzled_element(const void *start, size_t offset, int bf16)
{
    uintptr_t p = (uintptr_t)start + offset;
    p ^= ((p >> 7) & 7u) << 4;
    unsigned short bits;
    memcpy(&bits, (const void *)p, 2);
    return half_of(bits, 0, bf16);
}

// Traps unless the operands' starts are as the descriptors need: 16-byte aligned, and in the
// first 128-byte row of a 1 KiB swizzle atom (the descriptors' base offset is 0; K-major starts
// step by 32 bytes within that row), or the GPU would read other rows.
static inline void wgmma_check_operands(const void *a, const void *b)
{
    if (((uintptr_t)a & 15u) || ((uintptr_t)b & 15u))
        trap("wgmma: operand addresses %p and %p must be 16-byte aligned", a, b);
    if ((((uintptr_t)a >> 7) & 7u) || (((uintptr_t)b >> 7) & 7u))
        trap("wgmma: operand addresses %p and %p must lie in the first 128 bytes of a 1 KiB-aligned atom", a, b);
}

// d (this thread's n / 2 accumulators) += a x b, as tocha::wgmma (warpgroup.cuh) defines it.
static inline void wgmma_m64k16(float *d, int n, const void *a, unsigned a_lead, unsigned a_stride,
                                bool ta, const void *b, unsigned b_lead, unsigned b_stride, bool tb,
                                int bf16)
{
    wgmma_check_operands(a, b);
    const int t = (int)(team.current % 128), warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    double A[2][16]; // this thread's two rows of a
    for (int h = 0; h < 2; ++h) {
        const int row = 16 * warp + g + 8 * h;
        for (int k = 0; k < 16; ++k) {
            const size_t off = ta ? (size_t)(row / 64) * a_lead + (size_t)(k / 8) * a_stride +
                                        (k % 8) * 128 + (row % 64) * 2
                                  : (size_t)(row / 8) * a_stride + (row % 8) * 128 + k * 2;
            A[h][k] = swizzled_element(a, off, bf16);
        }
    }
    for (int j = 0; j < n / 8; ++j)
        for (int e = 0; e < 2; ++e) {
            const int col = 8 * j + 2 * q + e;
            double B[16];
            for (int k = 0; k < 16; ++k) {
                const size_t off = tb ? (size_t)(col / 64) * b_lead + (size_t)(k / 8) * b_stride +
                                            (k % 8) * 128 + (col % 64) * 2
                                      : (size_t)(col / 8) * b_stride + (col % 8) * 128 + k * 2;
                B[k] = swizzled_element(b, off, bf16);
            }
            for (int h = 0; h < 2; ++h) {
                double s = d[4 * j + 2 * h + e];
                for (int k = 0; k < 16; ++k) s += A[h][k] * B[k];
                d[4 * j + 2 * h + e] = (float)s;
            }
        }
}
// An f32 in shared memory as the tensor cores read a tf32 operand: its 13 low mantissa bits
// dropped (the sign, the exponent and 10 bits of mantissa kept), as f64.
static inline double swizzled_tf32(const void *start, size_t offset)
{
    uintptr_t p = (uintptr_t)start + offset;
    p ^= ((p >> 7) & 7u) << 4;
    unsigned bits;
    memcpy(&bits, (const void *)p, 4);
    bits &= 0xffffe000u;
    float v;
    memcpy(&v, &bits, 4);
    return (double)v;
}

// d (this thread's n / 2 accumulators) += a (64 x 8) x b (8 x n), f32 operands read as tf32,
// both K-major: row i of a (column j of b) at (i / 8) * stride + (i % 8) * 128 from its start,
// its 8 k elements the row's 32 bytes there.
static inline void wgmma_m64k8_tf32(float *d, int n, const void *a, unsigned a_stride, const void *b,
                                    unsigned b_stride)
{
    wgmma_check_operands(a, b);
    const int t = (int)(team.current % 128), warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    double A[2][8];
    for (int h = 0; h < 2; ++h) {
        const int row = 16 * warp + g + 8 * h;
        for (int k = 0; k < 8; ++k) A[h][k] = swizzled_tf32(a, (size_t)(row / 8) * a_stride + (row % 8) * 128 + k * 4);
    }
    for (int j = 0; j < n / 8; ++j)
        for (int e = 0; e < 2; ++e) {
            const int col = 8 * j + 2 * q + e;
            double B[8];
            for (int k = 0; k < 8; ++k) B[k] = swizzled_tf32(b, (size_t)(col / 8) * b_stride + (col % 8) * 128 + k * 4);
            for (int h = 0; h < 2; ++h) {
                double s = d[4 * j + 2 * h + e];
                for (int k = 0; k < 8; ++k) s += A[h][k] * B[k];
                d[4 * j + 2 * h + e] = (float)s;
            }
        }
}
} // namespace tocha_sim
