// conv2d_igemm.cu: 2-D convolution of NHWC halves on the tensor cores, as an implicit GEMM
// (after matmul.cu, whose wgmma main loop it runs): y [n, oh, ow, O] = x [n, h, w, C] convolved
// with the weight (+ bias [O]), groups 1. In GEMM terms the result's M = n oh ow rows are the
// output pixels, its N = O columns the output channels, and K = KH KW C runs over the window in
// the order (ky, kx, channel): A [M, K] is x's patches (im2col), never stored: each 16-byte
// chunk of a slice (8 channels of one pixel at one window position) is copied by cp.async
// straight from x, or zero-filled where the window falls in the padding. B [K, O] is the
// weight relaid out once a call (tocha_conv2d_weight_rsck) to [KH, KW, C, O], read MN-major; a
// 1 x 1 window's weight [O, C] is B as it lies (K-major), read without a relayout.
// Needs C and O multiples of 8 (whole chunks) and x, the relaid weight, 16-byte aligned; a
// forward whose C is not (a stem's 3 channels) runs on x and the weight padded with zero
// channels to the next multiple (tocha_conv2d_pad_channels, tocha_conv2d_weight_rsck); the host
// sends other convolutions to conv2d.cu's direct kernels. Window, stride, padding,
// dilation and both channel counts are compile-time constants, so a chunk's window position
// and channel come from a slice index by multiplications. Sums in f32 over the tensor cores'
// order (not conv2d.cu's), rounded once to T.
// On f32 (T float) the same kernel is TF32 (the opt-in, as matmul.cu's tocha_matmul_tc on f32):
// chunks of 4 channels, slices of 32 of k (128 bytes, as the halves' 64), tiles of 128 x 128,
// and B always K-major ([O, KH, KW, C]: tocha_conv2d_weight_orsc; for dx
// tocha_conv2d_weight_flip_kmajor), the only form tf32's wgmma reads.

// The weight [O, C, KH, KW] (PyTorch's layout) as [KH, KW, CP, O] (rsck): the implicit GEMM's B,
// O contiguous, its channels C padded with zeros to CP (a multiple of 8: a stem's 3 channels
// take 8, so that the GEMM reads whole 16-byte chunks). One thread an element, writes
// consecutive.
template <typename T, int C, int CP, int O, int KH, int KW>
__device__ void tocha_conv2d_weight_rsck(const T *w, T *rsck)
{
    const long long total = (long long)KH * KW * CP * O;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long o = e % O, k = e / O, c = k % CP, rs = k / CP;
        rsck[e] = c < C ? w[(o * C + c) * (KH * KW) + rs] : tocha::from_compute<T>(0.0f);
    }
}

// x [n, C, h, w] (NCHW) or [n, h, w, C] (NHWC) as NHWC with its channels padded with zeros to CP:
// the implicit GEMM's input where C is not a multiple of 8 (a network's stem, 3 channels). One
// thread a pixel (`pixels` = n h w in all, `plane` = h w), its reads of each channel coalesced
// across the warp in NCHW, its CP writes consecutive.
template <typename T, int C, int CP, int NCHW>
__device__ void tocha_conv2d_pad_channels(const T *x, T *padded, long long pixels, long long plane)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < pixels; q += stride) {
        const long long b = q / plane, p = q % plane;
#pragma unroll
        for (int c = 0; c < CP; ++c) {
            T v = tocha::from_compute<T>(0.0f);
            if (c < C) v = NCHW ? x[(b * C + c) * plane + p] : x[q * C + c];
            padded[q * CP + c] = v;
        }
    }
}

// The weight [O, C, KH, KW] as a stride-1 convolution's dx takes it, [KH, KW, O, C] with the
// window flipped: dx is that convolution of dy (channels O into C, padding DH (KH - 1) - PH and
// DW (KW - 1) - PW), whose B at (ky, kx, o, c) is w[o, c, KH - 1 - ky, KW - 1 - kx].
template <typename T, int C, int O, int KH, int KW>
__device__ void tocha_conv2d_weight_flip(const T *w, T *flipped)
{
    const long long total = (long long)KH * KW * O * C;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long c = e % C, k = e / C, o = k % O, rs = k / O;
        const int ky = (int)(rs / KW), kx = (int)(rs % KW);
        flipped[e] = w[((o * C + c) * KH + (KH - 1 - ky)) * KW + (KW - 1 - kx)];
    }
}

// The weight [O, C, KH, KW] as the K-major B of tf32 ([O, KH, KW, CP]: each output channel's
// window positions in (ky, kx, channel) order, channels padded with zeros to CP). One thread an
// element, writes consecutive.
template <typename T, int C, int CP, int O, int KH, int KW>
__device__ void tocha_conv2d_weight_orsc(const T *w, T *orsc)
{
    const long long total = (long long)O * KH * KW * CP;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long c = e % CP, t = e / CP, rs = t % (KH * KW), o = t / (KH * KW);
        orsc[e] = c < C ? w[(o * C + c) * (KH * KW) + rs] : tocha::from_compute<T>(0.0f);
    }
}

// The flipped weight of dx (tocha_conv2d_weight_flip) as the K-major B of tf32: [C, KH, KW, O],
// B at (c, ky, kx, o) = w[o, c, KH - 1 - ky, KW - 1 - kx]. One thread an element, writes
// consecutive.
template <typename T, int C, int O, int KH, int KW>
__device__ void tocha_conv2d_weight_flip_kmajor(const T *w, T *flipped)
{
    const long long total = (long long)C * KH * KW * O;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long o = e % O, t = e / O, rs = t % (KH * KW), c = t / (KH * KW);
        const int ky = (int)(rs / KW), kx = (int)(rs % KW);
        flipped[e] = w[((o * C + c) * KH + (KH - 1 - ky)) * KW + (KW - 1 - kx)];
    }
}

#ifdef TOCHA_MATMUL_WGMMA
// A's part of a thread in a slice's copies (mm_operand_copy's K-major layout: 128 rows of 128
// bytes, 128-byte swizzled): the thread's chunk column c8 (E channels from E c8 of the slice's
// SLICE of k: 8 of 64 for halves, 4 of 32 for f32) in rows r, r + 32, r + 64, r + 96 (r =
// thread / 8), each row an output pixel. A row keeps
// where its window starts in x (iy0, ix0 and that pixel's offset, which may lie outside x: it is
// only used for positions inside); a slice adds its window position, the same for the four.
template <typename T, int C, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
struct conv_patch_copy {
    static const int ROWS = 4, E = 16 / sizeof(T), SLICE = 8 * E;
    long long pixel[ROWS]; // offset of x[b, iy0, ix0, 0]
    int iy0[ROWS], ix0[ROWS];
    int h, w, c8, dst;
    unsigned inside; // bit i: row i is an output pixel (below n oh ow)

    __device__ __forceinline__ conv_patch_copy(long long n, int h_, int w_, int oh, int ow,
                                               long long row0)
        : h(h_), w(w_)
    {
        const int r = threadIdx.x / 8;
        c8 = threadIdx.x % 8;
        dst = tocha::swizzle128(r, c8);
        inside = 0;
        const long long plane = (long long)oh * ow, rows = n * plane;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            const long long p = row0 + r + 32 * i;
            const long long b = p / plane, q = p % plane;
            iy0[i] = (int)(q / ow) * SH - PH;
            ix0[i] = (int)(q % ow) * SW - PW;
            pixel[i] = ((b * h + iy0[i]) * w + ix0[i]) * C;
            inside |= (p < rows ? 1u : 0u) << i;
        }
    }

    // Starts slice s's copies (k from SLICE s; K = KH KW C in all) into A's part of a stage.
    __device__ __forceinline__ void start(unsigned char *stage, long long s, long long k,
                                          const T *x) const
    {
        const int kk = (int)s * SLICE + c8 * E; // this thread's first k of the slice
        const int c = kk % C, rs = kk / C;
        const int dy = rs / KW * DH, dx = rs % KW * DW;
        const long long step = ((long long)dy * w + dx) * C + c;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            const int iy = iy0[i] + dy, ix = ix0[i] + dx;
            const bool in =
                (inside >> i & 1u) && kk < k && (unsigned)iy < (unsigned)h && (unsigned)ix < (unsigned)w;
            tocha::cp_async16(stage + dst + i * 32 * 128, in ? x + pixel[i] + step : x, in ? 16 : 0);
        }
    }
};
#endif

// The weight gradient's B (the patches [m, K] of x, m along k of the GEMM) as a thread copies it
// in mm_operand_copy's MN-major layout: BN columns of K, its chunk column cc fixed, so its
// window position and channels (8 c .. 8 c + 7) are fixed for the whole kernel; rows (output
// pixels, 64 a slice) r, r + ROW_STEP, ..., each located by division (32-bit: the host keeps
// n oh ow below 2^31).
template <typename T, int C, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int BN>
struct conv_patch_rows_copy {
    static const int PER_ROW = BN / 8, ROW_STEP = 256 / PER_ROW, CHUNKS = 64 / ROW_STEP;
    static_assert(ROW_STEP % 8 == 0, "conv_patch_rows_copy: rows 8 apart keep their swizzle");
    int dst, r, dy, dx, c;
    bool column; // the chunk's k inside K
    int h, w, oh, ow;

    __device__ __forceinline__ conv_patch_rows_copy(int h_, int w_, int oh_, int ow_, long long col0)
        : h(h_), w(w_), oh(oh_), ow(ow_)
    {
        const int cc = threadIdx.x % PER_ROW;
        r = threadIdx.x / PER_ROW;
        dst = (cc / 8) * 8192 + tocha::swizzle128(r, cc % 8);
        const long long kk = col0 + cc * 8;
        column = kk < (long long)KH * KW * C;
        const int rs = (int)(kk / C);
        c = (int)(kk % C);
        dy = rs / KW * DH - PH;
        dx = rs % KW * DW - PW;
    }

    // Slice s: output pixels [64 s, 64 s + 64) of the m = k pixels.
    __device__ __forceinline__ void start(unsigned char *stage, long long s, long long k,
                                          const T *x) const
    {
        const unsigned plane = (unsigned)oh * ow;
#pragma unroll
        for (int i = 0; i < CHUNKS; ++i) {
            const unsigned p = (unsigned)(s * 64) + r + ROW_STEP * i;
            const unsigned b = p / plane, q = p % plane;
            const int iy = (int)(q / ow) * SH + dy, ix = (int)(q % ow) * SW + dx;
            const bool in = column && p < k && (unsigned)iy < (unsigned)h && (unsigned)ix < (unsigned)w;
            tocha::cp_async16(stage + dst + i * ROW_STEP * 128,
                              in ? x + (((long long)b * h + iy) * w + ix) * C + c : x, in ? 16 : 0);
        }
    }
};

#ifdef TOCHA_MATMUL_WGMMA
// tf32's weight gradient B (the patches [m, K] of x, m along k of the GEMM) copied into the
// K-major stages tf32's wgmma reads, as mm_operand_transpose copies a plain MN-major f32
// operand: a slice is 32 output pixels (128 bytes of each stage row), the stage's rows the
// tile's 128 columns of K. A thread's pixel (its row of k, k_row) is one per slice; its four
// chunks (4 channels of one window position, 16 bytes, gathered from x with zeros in the
// padding) are columns row + 32 i of the tile, whose window positions are fixed for the whole
// kernel; each chunk's four elements go to four stage rows through registers.
template <int C, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
struct conv_f32_patch_transpose {
    static const int CHUNKS = 4; // 128 columns / (4 elements x 8 warps)
    int k_row, row, h, w, oh, ow;
    int dy0[CHUNKS], dx0[CHUNKS], c[CHUNKS];
    unsigned column; // bit i: chunk i's columns inside K

    __device__ __forceinline__ conv_f32_patch_transpose(int h_, int w_, int oh_, int ow_, long long col0)
        : h(h_), w(w_), oh(oh_), ow(ow_)
    {
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        k_row = 8 * (warp % 4) + lane % 8;
        row = 16 * (warp / 4) + 4 * (lane / 8);
        column = 0;
#pragma unroll
        for (int i = 0; i < CHUNKS; ++i) {
            const long long kk = col0 + row + 32 * i;
            column |= (kk < (long long)KH * KW * C ? 1u : 0u) << i;
            const int rs = (int)(kk / C);
            c[i] = (int)(kk % C);
            dy0[i] = rs / KW * DH - PH;
            dx0[i] = rs % KW * DW - PW;
        }
    }

    // Slice s: output pixels [32 s, 32 s + 32) of the `pixels` (zeros past the last).
    __device__ __forceinline__ void start(unsigned char *stage, long long s, long long pixels, const float *x) const
    {
        float4 v[CHUNKS];
        const unsigned p = (unsigned)(s * 32) + (unsigned)k_row, plane = (unsigned)oh * ow;
        const bool in_k = p < pixels;
        const unsigned b = in_k ? p / plane : 0u, q = in_k ? p % plane : 0u;
        const int oy = (int)(q / ow) * SH, ox = (int)(q % ow) * SW;
#pragma unroll
        for (int i = 0; i < CHUNKS; ++i) {
            const int iy = oy + dy0[i], ix = ox + dx0[i];
            const bool in = in_k && (column >> i & 1u) && (unsigned)iy < (unsigned)h && (unsigned)ix < (unsigned)w;
            v[i] = in ? *(const float4 *)(x + (((long long)b * h + iy) * w + ix) * C + c[i])
                      : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        unsigned char *col = stage + (k_row % 4) * 4;
#pragma unroll
        for (int i = 0; i < CHUNKS; ++i) {
            const int r = row + 32 * i, cc = k_row / 4;
            *(float *)(col + tocha::swizzle128(r, cc)) = v[i].x;
            *(float *)(col + tocha::swizzle128(r + 1, cc)) = v[i].y;
            *(float *)(col + tocha::swizzle128(r + 2, cc)) = v[i].z;
            *(float *)(col + tocha::swizzle128(r + 3, cc)) = v[i].w;
        }
    }
};
#endif

// The convolution: CTAs of 256 threads, a 128 x BN tile of y each (BN 64, 128 or 256), numbered
// as matmul's (mm_tile_of) along grid.x; the launch gives MM_SHARED(BN) bytes of dynamic shared
// memory. Where the tiles are too few to fill the GPU, k is split over grid.y: CTA y sums
// slices [y per, (y + 1) per) of k (per = ceil(slices / grid.y), none empty: the host's
// choice) into its slab of `partial` (grid.y slabs of [m, O] f32), and tocha_conv2d_split_sum
// adds them. weight: B as [KH, KW, C, O] (the relaid or flipped weight, or a 1 x 1 window's [C,
// O] as dx takes it) or, with B_K_MAJOR, as [O, KH, KW, C] (a 1 x 1 window's PyTorch weight [O,
// C]). y is written through the epilogue F (epilogue.cuh: bias, residual [n, oh, ow, O] or
// null, and grad [n, oh, ow, O] or null for a forward); the slabs take the bare sums. Where
// wgmma is not (other GPUs), each thread sums its tile's outputs directly: correct, slow.
// With CONV_SLABS among the epilogue flags the sums go to the slabs even unsplit (an NCHW
// forward whose epilogue must see them in f32: tocha_conv2d_split_sum_nchw).
#define CONV_SLABS 4
template <typename T, int C, int O, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
          int BN, int B_K_MAJOR, typename F>
__device__ void tocha_conv2d_igemm(const T *x, const T *weight, const T *bias, T *y, float *partial,
                                   long long n, int h, int w, int oh, int ow, int has_bias,
                                   const T *residual, const T *grad, int epilogue)
{
    constexpr int E = 16 / sizeof(T); // elements a chunk
    static_assert(C % E == 0 && O % E == 0, "tocha_conv2d_igemm: channels in whole 16-byte chunks");
    static_assert(BN == 64 || BN == 128 || BN == 256, "tocha_conv2d_igemm: tiles of 64, 128 or 256");
    static_assert(sizeof(T) == 2 || (BN == 128 && B_K_MAJOR), "tocha_conv2d_igemm: tf32 reads a K-major B by 128");
    if (blockDim.x != 256) __trap();
    const long long m = n * oh * ow, k = (long long)KH * KW * C;
    if (m <= 0) return;
    long long row0, col0;
    mm_tile_of(m, O, BN, &row0, &col0);
    const tocha_epilogue<T, F> epi =
        tocha_epilogue_of<T, F>(bias, has_bias, residual, grad, epilogue, 0);
#ifdef TOCHA_MATMUL_WGMMA
    const int SLICE = 8 * E; // k a slice: 128 bytes
    const long long slices = (k + SLICE - 1) / SLICE, per = (slices + gridDim.y - 1) / gridDim.y;
    const long long first = blockIdx.y * per, count = slices - first < per ? slices - first : per;
    const conv_patch_copy<T, C, KH, KW, SH, SW, PH, PW, DH, DW> copy_a(n, h, w, oh, ow, row0);
    float *slab = gridDim.y > 1 || (epilogue & CONV_SLABS) ? partial + blockIdx.y * m * O : (float *)0;
    if constexpr (B_K_MAJOR != 0) {
        const mm_operand_copy<T, true, BN> copy_b(weight, k, O, col0);
        mm_wg_run<T, 0, 1, BN>(copy_a, copy_b, x, weight, epi, y, m, O, k, first, count, row0, col0,
                               slab);
    } else {
        const mm_operand_copy<T, false, BN> copy_b(weight, O, O, col0);
        mm_wg_run<T, 0, 0, BN>(copy_a, copy_b, x, weight, epi, y, m, O, k, first, count, row0, col0,
                               slab);
    }
#else
    // a split of k: the first slab takes the whole sums, the others zeros
    float *slab = gridDim.y > 1 || (epilogue & CONV_SLABS) ? partial + blockIdx.y * m * O : (float *)0;
    for (int e = threadIdx.x; e < 128 * BN; e += 256) {
        const long long p = row0 + e / BN, o = col0 + e % BN;
        if (p >= m || o >= O) continue;
        const long long b = p / ((long long)oh * ow), q = p % ((long long)oh * ow);
        const int oy = (int)(q / ow), ox = (int)(q % ow);
        if (slab && blockIdx.y > 0) {
            slab[p * O + o] = 0.0f;
            continue;
        }
        float s = 0.0f;
        for (int ky = 0; ky < KH; ++ky)
            for (int kx = 0; kx < KW; ++kx) {
                const int iy = oy * SH - PH + ky * DH, ix = ox * SW - PW + kx * DW;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                for (int c = 0; c < C; ++c)
                    s = fmaf(tocha::to_compute(x[((b * h + iy) * w + ix) * C + c]),
                             tocha::to_compute(B_K_MAJOR ? weight[((o * KH + ky) * KW + kx) * C + c]
                                                         : weight[((ky * KW + kx) * C + c) * O + o]),
                             s);
            }
        if (slab)
            slab[p * O + o] = s;
        else
            y[p * O + o] = tocha::from_compute<T>(epi.apply(s, p * O + o, o));
    }
#endif
}

// f32's implicit GEMM, on matmul.cu's f32 tiles (tocha_matmul_f32: a CTA of 256 threads a 128
// x BN tile of y, 8 x BN / 16 outputs a thread, slices of 8 of k through shared memory, sums in k
// order, one fma a product): A's chunks (4 channels of one pixel at one window position, 16
// bytes) gathered from x [n, h, w, C] as conv_patch_copy gathers the halves' (zeros in the
// padding), B the relaid weight as tocha_conv2d_igemm reads it. No TF32: the same f32 sums as
// a direct convolution, in another order. k splits over grid.y as tocha_conv2d_igemm's (in
// slices of 64, none empty), into the same slabs. Needs C and O multiples of 4 and x, the
// weight 16-byte aligned.
template <int C, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW> struct conv_f32_patch {
    const float *origin; // x[b, iy0, ix0, 0] (only read at positions inside x)
    int iy0, ix0, h, w, k_in_slice;

    // (a row past the last pixel starts its window far outside x: never read)
    __device__ __forceinline__ conv_f32_patch(const float *x, long long n, int h_, int w_, int oh,
                                              int ow, long long row0)
        : h(h_), w(w_)
    {
        const int t = threadIdx.x;
        const long long p = row0 + mm_f32_chunk<true>::row(t), plane = (long long)oh * ow;
        k_in_slice = mm_f32_chunk<true>::k(t);
        const long long b = p / plane, q = p % plane;
        iy0 = p < n * plane ? (int)(q / ow) * SH - PH : -(1 << 30);
        ix0 = (int)(q % ow) * SW - PW;
        origin = x + ((b * h + iy0) * w + ix0) * C;
    }

    // The chunk of slice s (8 of k from 8 s; zeros past k or x's edge).
    __device__ __forceinline__ float4 load(long long s, long long k) const
    {
        const int kk = (int)s * 8 + k_in_slice;
        if (kk < k) {
            const int rs = kk / C;
            const int dy = rs / KW * DH, dx = rs % KW * DW;
            if ((unsigned)(iy0 + dy) < (unsigned)h && (unsigned)(ix0 + dx) < (unsigned)w)
                return *(const float4 *)(origin + ((long long)dy * w + dx) * C + kk % C);
        }
        return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
};

template <typename T, int C, int O, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
          int BN, int B_K_MAJOR, typename F>
__device__ void tocha_conv2d_f32(const float *x, const float *weight, const float *bias, float *y,
                                 float *partial, long long n, int h, int w, int oh, int ow, int has_bias,
                                 const float *residual, const float *grad, int epilogue)
{
    static_assert(C % 4 == 0 && O % 4 == 0, "tocha_conv2d_f32: channels in whole 16-byte chunks");
    static_assert(BN == 128 || BN == 64, "tocha_conv2d_f32: tiles of 128 x 128 or 128 x 64");
    __shared__ __align__(16) float sa[2][8][128 + 4], sb[2][8][BN + 4];
    if (blockDim.x != 256) __trap(); // 16 x 16 threads
    const long long m = n * oh * ow;
    const int k = KH * KW * C;
    if (m <= 0) return;
    long long row0, col0;
    mm_tile_of(m, O, BN, &row0, &col0);
    // this CTA's slices of 8: its split's slices of 64
    const int per = ((k + 63) / 64 + (int)gridDim.y - 1) / (int)gridDim.y;
    const int slices = (k + 7) / 8, first = (int)blockIdx.y * per * 8;
    const int last = first + per * 8 < slices ? first + per * 8 : slices;
    const conv_f32_patch<C, KH, KW, SH, SW, PH, PW, DH, DW> op_a(x, n, h, w, oh, ow, row0);
    const mm_f32_operand<B_K_MAJOR != 0, BN> op_b(weight, B_K_MAJOR ? k : O, O, col0);
    float acc[8][BN / 16];
    mm_f32_run<true, B_K_MAJOR != 0, 128, BN>(op_a, op_b, first, last, k, sa, sb, acc);
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const tocha_epilogue<float, F> epi =
        tocha_epilogue_of<float, F>(bias, has_bias, residual, grad, epilogue, 0);
    float *slab = gridDim.y > 1 || (epilogue & CONV_SLABS) ? partial + blockIdx.y * m * O : (float *)0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const long long r = row0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
        if (r >= m) continue;
#pragma unroll
        for (int hh = 0; hh < BN / 64; ++hh) {
            const long long col = col0 + 64 * hh + 4 * tx;
            if (col >= O) continue; // O is a multiple of 4: a chunk is inside or past the edge
            float v[4];
#pragma unroll
            for (int j = 0; j < 4; ++j)
                v[j] =
                    slab ? acc[i][4 * hh + j] : epi.apply(acc[i][4 * hh + j], r * O + col + j, col + j);
            float *to = (slab ? slab : y) + r * O + col;
            if ((unsigned long long)to % 16 == 0) {
                *(float4 *)to = make_float4(v[0], v[1], v[2], v[3]);
            } else { // y a view at an odd offset
#pragma unroll
                for (int j = 0; j < 4; ++j) to[j] = v[j];
            }
        }
    }
}

// y = the sum of the `splits` slabs of partial ([splits, count] f32, in slab order) through
// the epilogue F (bias [column], y's rows `columns` long; residual and grad shaped as y, or
// null), rounded once to T.
template <typename T, typename F>
__device__ void tocha_conv2d_split_sum(const float *partial, const T *bias, T *y, long long count,
                                       int columns, int splits, int has_bias, const T *residual,
                                       const T *grad, int epilogue)
{
    const tocha_epilogue<T, F> epi =
        tocha_epilogue_of<T, F>(bias, has_bias, residual, grad, epilogue, 0);
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count; e += stride) {
        float s = 0.0f;
        for (int i = 0; i < splits; ++i) s += partial[i * count + e];
        y[e] = tocha::from_compute<T>(epi.apply(s, e, e % columns));
    }
}

// An NCHW forward with an activation or a residual: y [n, columns, plane] (NCHW) = the sum of
// the slabs (partial [splits][n plane][columns] f32, NHWC) through the epilogue F (bias;
// residual and grad shaped as y), rounded once, so that the epilogue sees the f32 sums as in
// NHWC rather than an NHWC y rounded before a transpose. A thread an element of y, consecutive
// threads writing consecutive pixels.
template <typename T, typename F>
__device__ void tocha_conv2d_split_sum_nchw(const float *partial, const T *bias, T *y, long long count,
                                            int columns, int splits, int has_bias, const T *residual,
                                            const T *grad, int epilogue, long long plane)
{
    const tocha_epilogue<T, F> epi =
        tocha_epilogue_of<T, F>(bias, has_bias, residual, grad, epilogue, 0);
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count; e += stride) {
        const long long p = e % plane, t = e / plane;
        const int o = (int)(t % columns);
        const long long at = (t / columns * plane + p) * columns + o;
        float s = 0.0f;
        for (int i = 0; i < splits; ++i) s += partial[i * count + at];
        y[e] = tocha::from_compute<T>(epi.apply(s, e, o));
    }
}

// dst [z][c][r] = src [z][r][c] for `batches` rows x cols matrices: NCHW x to NHWC (rows the
// channels, cols the pixels) and NHWC y back to NCHW, for the tensor cores' forward on NCHW
// tensors. 32 x 32 tiles through shared memory (a column of padding, so that the transposed
// reads fall on distinct banks), both sides read and written along rows; 256 threads, tiles
// along grid.x (columns), grid.y (rows) and grid.z (matrices), the last two striding past
// 65535. dst is written through the epilogue F (no bias; residual and grad shaped as dst, or
// null): the NCHW forward's last step.
template <typename T, typename F>
__device__ void tocha_conv2d_transpose(const T *src, T *dst, long long rows, long long cols,
                                       long long batches, const T *residual, const T *grad, int epilogue)
{
    __shared__ T tile[32][33];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const long long c0 = (long long)blockIdx.x * 32;
    for (long long z = blockIdx.z; z < batches; z += gridDim.z) {
        const long long batch = z * rows * cols;
        const tocha_epilogue<T, F> epi =
            tocha_epilogue_of<T, F>((const T *)0, 0, residual, grad, epilogue, batch);
        const T *from = src + batch;
        T *to = dst + batch;
        for (long long r0 = (long long)blockIdx.y * 32; r0 < rows; r0 += 32LL * gridDim.y) {
            for (int i = ty; i < 32; i += 8)
                if (r0 + i < rows && c0 + tx < cols) tile[i][tx] = from[(r0 + i) * cols + c0 + tx];
            __syncthreads();
            for (int i = ty; i < 32; i += 8)
                if (c0 + i < cols && r0 + tx < rows) {
                    const long long at = (c0 + i) * rows + r0 + tx;
                    to[at] = tocha::from_compute<T>(epi.apply(tocha::to_compute(tile[tx][i]), at, 0));
                }
            __syncthreads();
        }
    }
}

// The weight gradient of an NHWC convolution on the tensor cores, as the GEMM dw[o, K] = the sum
// over the m = n oh ow output pixels of dy[m, o] patches[m, K] (K = (ky, kx, c)): A = dy read
// column-major (o along its rows), B the patches (conv_patch_rows_copy), k of the GEMM the
// pixels, always split over grid.y into f32 slabs [O, K] that tocha_conv2d_dw_sum adds
// into PyTorch's layout. CTAs of 256 threads, 128 x BN tiles of [O, K] along grid.x.
template <typename T, int C, int O, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
          int BN>
__device__ void tocha_conv2d_igemm_dw(const T *x, const T *dy, float *partial, long long n, int h, int w,
                                      int oh, int ow)
{
    constexpr int E = 16 / sizeof(T); // elements a chunk
    static_assert(C % E == 0 && O % E == 0, "tocha_conv2d_igemm_dw: channels in whole 16-byte chunks");
    static_assert(sizeof(T) == 2 || BN == 128, "tocha_conv2d_igemm_dw: tf32 tiles of 128");
    if (blockDim.x != 256) __trap();
    const long long pixels = n * oh * ow, kw = (long long)KH * KW * C;
    long long row0, col0;
    mm_tile_of(O, kw, BN, &row0, &col0);
    float *slab = partial + blockIdx.y * O * kw;
#ifdef TOCHA_MATMUL_WGMMA
    const int SLICE = 8 * E; // pixels a slice: 64 (halves), 32 (tf32)
    const long long slices = (pixels + SLICE - 1) / SLICE, per = (slices + gridDim.y - 1) / gridDim.y;
    const long long first = blockIdx.y * per;
    const long long count = slices - first < per ? (slices > first ? slices - first : 0) : per;
    const tocha_epilogue<T, ew_fn_identity> none = {(const T *)0, (const T *)0, (const T *)0};
    if constexpr (sizeof(T) == 4) {
        // tf32: both operands MN-major as stored (dy along the channels, the patches along
        // theirs), each transposed into the K-major stages through registers
        const mm_operand_transpose<128> copy_a(dy, O, O, row0);
        const conv_f32_patch_transpose<C, KH, KW, SH, SW, PH, PW, DH, DW> copy_b(h, w, oh, ow, col0);
        mm_wg_run<T, 0, 1, BN>(copy_a, copy_b, dy, x, none, (T *)0, O, kw, pixels, first, count, row0, col0, slab);
    } else {
        const mm_operand_copy<T, false, 128> copy_a(dy, O, O, row0);
        const conv_patch_rows_copy<T, C, KH, KW, SH, SW, PH, PW, DH, DW, BN> copy_b(h, w, oh, ow, col0);
        mm_wg_run<T, 1, 0, BN>(copy_a, copy_b, dy, x, none, (T *)0, O, kw, pixels, first, count, row0, col0,
                               slab);
    }
#else
    for (int e = threadIdx.x; e < 128 * BN; e += 256) {
        const long long o = row0 + e / BN, kk = col0 + e % BN;
        if (o >= O || kk >= kw) continue;
        const int c = (int)(kk % C), rs = (int)(kk / C), ky = rs / KW, kx = rs % KW;
        float s = 0.0f;
        if (blockIdx.y == 0)
            for (long long p = 0; p < pixels; ++p) {
                const long long b = p / ((long long)oh * ow), q = p % ((long long)oh * ow);
                const int iy = (int)(q / ow) * SH - PH + ky * DH, ix = (int)(q % ow) * SW - PW + kx * DW;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                s = fmaf(tocha::to_compute(dy[p * O + o]),
                         tocha::to_compute(x[((b * h + iy) * w + ix) * C + c]), s);
            }
        slab[o * kw + kk] = s;
    }
#endif
}

// f32's weight gradient, on matmul.cu's f32 tiles as tocha_conv2d_f32 is: dw [O, K] = dy^T
// [O, pixels] by the patches [pixels, K], A read from dy [pixels, O] 4 channels a chunk, B's
// chunks (4 channels of one window position, 16 bytes) gathered from x for each output pixel of
// a slice; the pixels split over grid.y in slices of 64 (the host's plan, as the halves'), each
// split's sums into its slab of `partial` ([splits][O, K] f32) for tocha_conv2d_dw_sum. Needs C
// and O multiples of 4, x and dy 16-byte aligned, fewer than 2^31 output pixels (the host's
// check).
template <int C, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
struct conv_f32_patch_rows {
    const float *x;
    int dy0, dx0, c, k_in_slice, h, w, oh, ow;
    bool column; // the chunk's k inside K

    __device__ __forceinline__ conv_f32_patch_rows(const float *x_, int h_, int w_, int oh_, int ow_,
                                                   long long col0)
        : x(x_), h(h_), w(w_), oh(oh_), ow(ow_)
    {
        const int t = threadIdx.x;
        const long long kk = col0 + mm_f32_chunk<false>::row(t);
        k_in_slice = mm_f32_chunk<false>::k(t);
        column = kk < (long long)KH * KW * C;
        const int rs = (int)(kk / C);
        c = (int)(kk % C);
        dy0 = rs / KW * DH - PH;
        dx0 = rs % KW * DW - PW;
    }

    // The chunk of slice s: output pixel 8 s + k_in_slice (zeros past the last or in the padding).
    __device__ __forceinline__ float4 load(long long s, long long pixels) const
    {
        const unsigned p = (unsigned)(s * 8) + (unsigned)k_in_slice, plane = (unsigned)oh * ow;
        if (column && p < pixels) {
            const unsigned b = p / plane, q = p % plane;
            const int iy = (int)(q / ow) * SH + dy0, ix = (int)(q % ow) * SW + dx0;
            if ((unsigned)iy < (unsigned)h && (unsigned)ix < (unsigned)w)
                return *(const float4 *)(x + (((long long)b * h + iy) * w + ix) * C + c);
        }
        return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
};

template <typename T, int C, int O, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
          int BN, int BM = 128>
__device__ void tocha_conv2d_f32_dw(const float *x, const float *dy, float *partial, long long n, int h,
                                    int w, int oh, int ow)
{
    static_assert(C % 4 == 0 && O % 4 == 0, "tocha_conv2d_f32_dw: channels in whole 16-byte chunks");
    static_assert(BN == 128 && (BM == 128 || BM == 64), "tocha_conv2d_f32_dw: tiles of 128 or 64 (O) x 128");
    __shared__ __align__(16) float sa[2][8][BM + 4], sb[2][8][128 + 4];
    if (blockDim.x != 256) __trap();
    const long long pixels = n * oh * ow;
    const int kw = KH * KW * C;
    long long row0, col0;
    mm_tile_of_rows(O, kw, BM, 128, &row0, &col0);
    float *slab = partial + blockIdx.y * (long long)O * kw;
    // this CTA's slices of 8 pixels: its split's slices of 64
    const long long per = ((pixels + 63) / 64 + gridDim.y - 1) / gridDim.y;
    const long long slices = (pixels + 7) / 8, first = blockIdx.y * per * 8;
    const long long last = first + per * 8 < slices ? first + per * 8 : slices;
    const mm_f32_operand<false, BM> op_a(dy, O, O, row0);
    const conv_f32_patch_rows<C, KH, KW, SH, SW, PH, PW, DH, DW> op_b(x, h, w, oh, ow, col0);
    float acc[BM / 16][8];
    mm_f32_run<false, false, BM, 128>(op_a, op_b, first, last, pixels, sa, sb, acc);
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
    for (int i = 0; i < BM / 16; ++i) {
        const long long o = row0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
        if (o >= O) continue;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const long long col = col0 + 64 * hh + 4 * tx;
            if (col >= kw) continue; // K is a multiple of 4: a chunk is inside or past the edge
            *(float4 *)(slab + o * kw + col) =
                make_float4(acc[i][4 * hh], acc[i][4 * hh + 1], acc[i][4 * hh + 2], acc[i][4 * hh + 3]);
        }
    }
}

// The bias gradient's partial sums of dy [m, O] (NHWC) for tocha_conv2d_dw_sum: CTA (x, y) takes
// channels 32 x .. 32 x + 31 over rows y, y + grid.y, ... (8 row phases of 32 lanes, the lanes
// along consecutive channels so that a warp reads 64 contiguous bytes), its f32 partials to
// bias_partial[y, O] in a fixed order.
template <typename T>
__device__ void tocha_conv2d_db_partial(const T *dy, float *bias_partial, long long m, int O)
{
    __shared__ float sums[8][32];
    const int lane = threadIdx.x % 32, phase = threadIdx.x / 32;
    const long long o = (long long)blockIdx.x * 32 + lane;
    float s = 0.0f;
    if (o < O)
        for (long long r = blockIdx.y + (long long)gridDim.y * phase; r < m; r += 8LL * gridDim.y)
            s += tocha::to_compute(dy[r * O + o]);
    sums[phase][lane] = s;
    __syncthreads();
    if (phase == 0 && o < O) {
        for (int i = 1; i < 8; ++i) s += sums[i][lane];
        bias_partial[blockIdx.y * (long long)O + o] = s;
    }
}

// dw [O, C, KH, KW] = the sum of the `splits` slabs [O, (KH, KW, C)] of partial, in slab order,
// rounded once to T; with db, also db [O] = the sum of the `bias_splits` rows of bias_partial.
template <typename T, int C, int O, int KH, int KW>
__device__ void tocha_conv2d_dw_sum(const float *partial, T *dw, int splits, const float *bias_partial,
                                    T *db, int bias_splits, int has_bias)
{
    const long long kw = (long long)KH * KW * C, count = O * kw;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count; e += stride) {
        float s = 0.0f;
        for (int i = 0; i < splits; ++i) s += partial[i * count + e];
        const long long o = e / kw, k = e % kw, c = k % C, rs = k / C;
        dw[(o * C + c) * (KH * KW) + rs] = tocha::from_compute<T>(s);
        if (has_bias && e < O) {
            float b = 0.0f;
            for (int i = 0; i < bias_splits; ++i) b += bias_partial[(long long)i * O + e];
            db[e] = tocha::from_compute<T>(b);
        }
    }
}

// dst [n, dh, dw, c] = src [n, h, w, c] spread out by the stride (SH, SW): dst[b, y, x] =
// src[b, y / SH, x / SW] where SH divides y and SW divides x, else zeros; dh = (h - 1) SH + 1,
// dw likewise. A strided convolution's dx is the stride-1 convolution of dy so spread. 16
// bytes (8 channels of halves, 4 of f32; c holds whole chunks) a thread a step.
template <typename T, int SH, int SW>
__device__ void tocha_conv2d_spread(const T *src, T *dst, long long n, long long h, long long w,
                                    long long dh, long long dw, long long c)
{
    const long long chunks = c * (long long)sizeof(T) / 16, total = n * dh * dw * chunks;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long q = e % chunks, t = e / chunks, x = t % dw, t2 = t / dw, y = t2 % dh,
                        b = t2 / dh;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (y % SH == 0 && x % SW == 0)
            v = ((const uint4 *)(src + ((b * h + y / SH) * w + x / SW) * c))[q];
        ((uint4 *)dst)[e] = v;
    }
}
