// strided_copy.cu: dst = src for tensors of one shape laid out with strides of their own (a
// view and a dense tensor, or two views). The copy moves units of W bytes (1, 2, 4, 8 or 16):
// an element, or where every run along the innermost dimension is dense and aligned in both,
// several elements at once (the host divides the sizes and strides by the elements a unit
// holds). The host gives at most 8 dimensions, sizes d0..d7 (1 past ndim), src strides s0..s7
// and dst strides t0..t7, in units, after merging the dimensions that are dense in both.
//
// Two mappings, three kernels, which the host picks:
// - element by element: one thread a unit, found in each tensor from its row-major index, four
//   or eight units in flight a thread; with 32-bit offsets and divisions by magic numbers
//   (tocha_strided_copy32) where everything fits below 2^31, else 64-bit (tocha_strided_copy);
// - a transpose through shared memory (tocha_tiled_copy): dimension 0 is dense in src (s0 == 1) and
//   dimension 1 in dst (t1 == 1), the host having put them there. A CTA of 256 threads copies
//   64 x 64 tiles of those two (for each index of the others): it reads a tile along dimension
//   0, rows of 64 units from consecutive addresses, and writes it along dimension 1, so that
//   both sides move whole sectors instead of one unit from each.

// Both kernels launch 256 threads a CTA (tocha_builtin_grid); at most 64 registers a thread keep
// four CTAs on an SM, twice the units in flight of three.
#define TOCHA_ENTRY_BOUNDS(W) __launch_bounds__(256, 4)

// W bytes as one value, loaded and stored with one instruction.
template <int W> struct copy_unit {
    typedef typename tocha::bits_of<W>::type type;
    static __device__ __forceinline__ type load(const unsigned char *p, long long i)
    {
        return ((const type *)p)[i];
    }
    static __device__ __forceinline__ void store(unsigned char *p, long long i, type v)
    {
        ((type *)p)[i] = v;
    }
};

template <> struct copy_unit<16> {
    typedef tocha::pack16<unsigned> type;
    static __device__ __forceinline__ type load(const unsigned char *p, long long i)
    {
        type v;
        tocha::load_words<16>(p + i * 16, v.w);
        return v;
    }
    static __device__ __forceinline__ void store(unsigned char *p, long long i, const type &v)
    {
        tocha::store_words<16>((unsigned *)(p + i * 16), v);
    }
};

// The offsets in src and dst of unit e (row-major over the sizes d). The loop is unrolled
// over all eight dimensions so that d, s and t stay in registers.
__device__ __forceinline__ void strided_offsets(long long e, int ndim, const long long *d,
                                                const long long *s, const long long *t, long long *from,
                                                long long *to)
{
    long long rest = e, a = 0, b = 0;
#pragma unroll
    for (int k = 7; k > 0; --k) {
        if (k >= ndim) continue;
        // 32-bit division where both fit (a 64-bit one is several times longer)
        const long long q = ((unsigned long long)(rest | d[k]) >> 32) == 0
                                ? (long long)((unsigned)rest / (unsigned)d[k])
                                : rest / d[k];
        const long long i = rest - q * d[k];
        a += i * s[k];
        b += i * t[k];
        rest = q;
    }
    *from = a + rest * s[0];
    *to = b + rest * t[0];
}

// Units a thread keeps in flight on the element path: 64 bytes for units of 8 and 16 bytes (4
// units), 32 or fewer for smaller ones (8 units). view.c sizes the grid by the same rule.
template <int W> struct copy_flight {
    static const int n = W >= 8 ? 4 : 8;
};

template <int W>
__device__ __forceinline__ void copy_elements(const unsigned char *src, unsigned char *dst, long long n,
                                              int ndim, const long long *d, const long long *s,
                                              const long long *t)
{
    typedef copy_unit<W> U;
    const int F = copy_flight<W>::n;
    const long long stride = (long long)blockDim.x * gridDim.x;
    // F units a thread at a time, all F loads issued before any store (the last round's
    // predicated), so that a thread keeps F reads in flight to the end instead of finishing
    // with one round trip a unit.
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += F * stride) {
        long long to[F];
        typename U::type v[F];
#pragma unroll
        for (int j = 0; j < F; ++j)
            if (e + j * stride < n) {
                long long from;
                strided_offsets(e + j * stride, ndim, d, s, t, &from, &to[j]);
                v[j] = U::load(src, from);
            }
#pragma unroll
        for (int j = 0; j < F; ++j)
            if (e + j * stride < n) U::store(dst, to[j], v[j]);
    }
}

// Tiles of 64 x 64 units, 256 threads: thread (column c, row r0) moves rows r0, r0 + 4, ...,
// sixteen loads in flight before the barrier. Dimension 0 (P, dense in src) runs along a tile's
// columns when read, dimension 1 (Q, dense in dst) along them when written; the rest index
// the tiles (fixed places, so that the sizes and strides stay in registers).
template <int W>
__device__ __forceinline__ void copy_tiles(const unsigned char *src, unsigned char *dst, int ndim,
                                           const long long *d, const long long *s, const long long *t)
{
    typedef copy_unit<W> U;
    // One column of padding: a warp reading a column of the tile meets 32 different banks
    // (4-byte units; 8-byte units two ways).
    __shared__ typename U::type tile[64][65];
    const int col = threadIdx.x % 64, row = threadIdx.x / 64;
    const long long P = d[0], Q = d[1], sq = s[1], tp = t[0], tiles_p = (P + 63) / 64,
                    tiles_q = (Q + 63) / 64;
    long long batch = 1;
#pragma unroll
    for (int k = 2; k < 8; ++k)
        if (k < ndim) batch *= d[k];
    const long long tiles = tiles_p * tiles_q * batch;
    for (long long at = blockIdx.x; at < tiles; at += gridDim.x) {
        long long rest = at;
        const long long q0 = rest % tiles_q * 64;
        rest /= tiles_q;
        const long long p0 = rest % tiles_p * 64;
        rest /= tiles_p;
        long long from = 0, to = 0;
#pragma unroll
        for (int k = 7; k >= 2; --k) {
            if (k >= ndim) continue;
            const long long i = rest % d[k];
            rest /= d[k];
            from += i * s[k];
            to += i * t[k];
        }
        // Read along dimension 0: tile row r is q0 + r, column c is p0 + c.
        typename U::type v[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const int r = row + 4 * j;
            if (q0 + r < Q && p0 + col < P) v[j] = U::load(src, from + (q0 + r) * sq + p0 + col);
        }
#pragma unroll
        for (int j = 0; j < 16; ++j) tile[row + 4 * j][col] = v[j];
        __syncthreads();
        // Write along dimension 1: p0 + r, q0 + c.
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const int r = row + 4 * j;
            if (p0 + r < P && q0 + col < Q) U::store(dst, to + (p0 + r) * tp + q0 + col, tile[col][r]);
        }
        __syncthreads();
    }
}

// The element path: n units.
template <int W>
__device__ void tocha_strided_copy(const unsigned char *src, unsigned char *dst, long long n, int ndim,
                                   long long d0, long long d1, long long d2, long long d3, long long d4,
                                   long long d5, long long d6, long long d7, long long s0, long long s1,
                                   long long s2, long long s3, long long s4, long long s5, long long s6,
                                   long long s7, long long t0, long long t1, long long t2, long long t3,
                                   long long t4, long long t5, long long t6, long long t7)
{
    const long long d[8] = {d0, d1, d2, d3, d4, d5, d6, d7};
    const long long s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    const long long t[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
    copy_elements<W>(src, dst, n, ndim, d, s, t);
}

// The element path with 32-bit offsets, for copies whose units and offsets all stay below
// 2^31 (the host checks). Each dimension's division is a multiply-high, an add and a shift by
// the host's magic numbers (m, h: view.c's divider), offsets 32-bit multiply-adds: a few
// instructions a unit where the 64-bit path spends a division and 64-bit products a dimension.
__device__ __forceinline__ unsigned divide_magic(unsigned n, unsigned m, unsigned h)
{
    return (__umulhi(n, m) + n) >> h;
}

template <int W>
__device__ __forceinline__ void copy_elements32(const unsigned char *src, unsigned char *dst, unsigned n,
                                                int ndim, const unsigned *d, const unsigned *m,
                                                const unsigned *h, const unsigned *s, const unsigned *t)
{
    typedef copy_unit<W> U;
    const int F = copy_flight<W>::n;
    const unsigned stride = blockDim.x * gridDim.x;
    for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += F * stride) {
        unsigned to[F];
        typename U::type v[F];
#pragma unroll
        for (int j = 0; j < F; ++j)
            if (e + j * stride < n) {
                unsigned rest = e + j * stride, a = 0, b = 0;
#pragma unroll
                for (int k = 7; k > 0; --k) {
                    if (k >= ndim) continue;
                    const unsigned q = divide_magic(rest, m[k], h[k]), i = rest - q * d[k];
                    a += i * s[k];
                    b += i * t[k];
                    rest = q;
                }
                to[j] = b + rest * t[0];
                v[j] = U::load(src, a + rest * s[0]);
            }
#pragma unroll
        for (int j = 0; j < F; ++j)
            if (e + j * stride < n) U::store(dst, to[j], v[j]);
    }
}

template <int W>
__device__ void tocha_strided_copy32(const unsigned char *src, unsigned char *dst, unsigned n, int ndim,
                                     unsigned d0, unsigned d1, unsigned d2, unsigned d3, unsigned d4,
                                     unsigned d5, unsigned d6, unsigned d7, unsigned m1, unsigned m2,
                                     unsigned m3, unsigned m4, unsigned m5, unsigned m6, unsigned m7,
                                     unsigned h1, unsigned h2, unsigned h3, unsigned h4, unsigned h5,
                                     unsigned h6, unsigned h7, unsigned s0, unsigned s1, unsigned s2,
                                     unsigned s3, unsigned s4, unsigned s5, unsigned s6, unsigned s7,
                                     unsigned t0, unsigned t1, unsigned t2, unsigned t3, unsigned t4,
                                     unsigned t5, unsigned t6, unsigned t7)
{
    const unsigned d[8] = {d0, d1, d2, d3, d4, d5, d6, d7};
    const unsigned m[8] = {0, m1, m2, m3, m4, m5, m6, m7};
    const unsigned h[8] = {0, h1, h2, h3, h4, h5, h6, h7};
    const unsigned s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    const unsigned t[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
    copy_elements32<W>(src, dst, n, ndim, d, m, h, s, t);
}

// The tiled path, a kernel of its own so that the element path's register count does not carry
// the tiles' sixteen loads in flight. Units of at most 8 bytes (single elements).
template <int W>
__device__ void tocha_tiled_copy(const unsigned char *src, unsigned char *dst, int ndim, long long d0,
                                 long long d1, long long d2, long long d3, long long d4, long long d5,
                                 long long d6, long long d7, long long s0, long long s1, long long s2,
                                 long long s3, long long s4, long long s5, long long s6, long long s7,
                                 long long t0, long long t1, long long t2, long long t3, long long t4,
                                 long long t5, long long t6, long long t7)
{
    const long long d[8] = {d0, d1, d2, d3, d4, d5, d6, d7};
    const long long s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    const long long t[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
    copy_tiles<W>(src, dst, ndim, d, s, t);
}
