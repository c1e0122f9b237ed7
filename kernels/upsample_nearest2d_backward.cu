// upsample_nearest2d_backward.cu: the gradient of nearest-neighbour 2-D upsampling, NCHW or NHWC.
//
//   NCHW: dy [B, C, OH, OW] -> dx [B, C, H, W],
//         dx[b, c, ih, iw] = sum over i < SCALE_H, j < SCALE_W of dy[b, c, ih * SCALE_H + i, iw * SCALE_W + j]
//   NHWC: dy [B, OH, OW, C] -> dx [B, H, W, C], the same sum for each channel c.
//
// A gather: each dx element is the only reader of its SCALE_H x SCALE_W block of dy, so it is
// written once, with no atomics (dx needs no zeroing) and a fixed order of summation (i, then
// j: deterministic). Sums are kept in tocha::accumulator<D> (f32 for f16 and bf16).
//
// Rows of pixels as in the forward (upsample_plan.h, compiled ahead of this file). Mapping: dx
// is cut into runs of K consecutive elements on dx's grid of K-element boundaries (a partial
// run at each end); each thread sums and stores a batch of U runs per step of a grid-stride
// loop, BLOCK_IW runs apart; BLOCK_IW threads per CTA, grid.x = ceil(runs / (U * BLOCK_IW))
// (tocha_upsample_backward_runs, _batch: NCHW at 2048 threads per SM, U = 2 for scale_h 1,
// else 1; NHWC at 1024, U for about four loads). A batch of whole runs (below) issues all its
// loads before its first store, U * SCALE_H or more in flight per thread. Reading dy is
// most of the traffic, so K serves the loads (tocha_upsample_backward_run): NCHW, the run's
// share of each dy row, K * SCALE_W elements, is at most 16 bytes, so a warp reads consecutive
// dy bytes; NHWC, K is 16 bytes of one pixel's channels, each dy pixel read as 16 bytes.
// A run inside one dx row (NCHW) or pixel (NHWC) reads dy as the aligned 16-byte chunks
// around each share (tocha::load_chunks16: no branches, so that the loads of a batch can be
// issued together); any other run element by element, each element's loads together.
// dx is stored with the streaming hint (written once, never read here).

namespace tocha {

// Whether the run at element e0 of a dx row lies inside that row (NCHW) or pixel (NHWC).
template <int K, bool NHWC> __device__ __forceinline__ bool run_fits(const tocha_upsample_rows &g, int e0)
{
    return NHWC ? e0 % g.pixel + K <= g.pixel : e0 + K <= g.in_width;
}

// The sum of the run at element e0 of dx row q, which must fit (run_fits).
template <typename D, int K, int SCALE_H, int SCALE_W, bool NHWC>
__device__ __forceinline__ void run_sums(const D *dy, const tocha_upsample_rows &g, long long q, int e0,
                                         typename accumulator<D>::type sum[K])
{
    typedef typename accumulator<D>::type A;
    const int V = vec16<D>::n;
    const D *block = dy + q * SCALE_H * g.width;
    if (NHWC) {
        const int px = e0 / g.pixel, c = e0 - px * g.pixel;
        block += (long long)px * SCALE_W * g.pixel + c;
    } else {
        block += (long long)e0 * SCALE_W;
    }
#pragma unroll
    for (int j = 0; j < K; ++j) sum[j] = A(0);
    // NCHW unrolled, so that a batch's loads are issued together; NHWC a row at a time (its
    // SCALE_W pixels are loads enough, and more would spill).
#pragma unroll(NHWC ? 1 : SCALE_H)
    for (int i = 0; i < SCALE_H; ++i) {
        const D *row = block + (long long)i * g.width;
        if (NHWC) {
#pragma unroll
            for (int j = 0; j < SCALE_W; ++j) {
                unsigned c[8], w[4];
                load_chunks16(row + (long long)j * g.pixel, 16, c);
                shift_chunks16(row + (long long)j * g.pixel, c, w);
#pragma unroll
                for (int e = 0; e < K; ++e) sum[e] += widen<A>(element_of<D>(w, e));
            }
        } else {
            // The row's K * SCALE_W elements, 16 bytes at a time.
#pragma unroll
            for (int t = 0; t < K * SCALE_W; t += V) {
                const int n = K * SCALE_W - t < V ? K * SCALE_W - t : V;
                unsigned c[8], w[4];
                load_chunks16(row + t, n * (int)sizeof(D), c);
                shift_chunks16(row + t, c, w);
#pragma unroll
                for (int e = 0; e < V; ++e)
                    if (e < n) sum[(t + e) / SCALE_W] += widen<A>(element_of<D>(w, e));
            }
        }
    }
}

// Elements lo to hi - 1 of the run at flat dx element f, element by element; the others are
// left 0.
template <typename D, int K, int SCALE_H, int SCALE_W, bool NHWC>
__device__ __forceinline__ pack16<D> run_elements(const D *dy, const tocha_upsample_rows &g, long long f, int lo, int hi)
{
    typedef typename accumulator<D>::type A;
    pack16<D> p;
    f += lo;
    long long q = div_small(f, g.in_width);
    int e = (int)(f - q * g.in_width);
    int px = NHWC ? e / g.pixel : e, c = NHWC ? e - px * g.pixel : 0;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        if (k < lo || k >= hi) continue;
        const D *block = dy + q * SCALE_H * g.width + (long long)px * SCALE_W * g.pixel + c;
        A s = A(0);
        // Unrolled where the run's blocks are at most 32 loads, so that an element's loads
        // are issued together (this path is latency-bound: a run across rows or pixels).
#pragma unroll(K * SCALE_H * SCALE_W <= 32 ? SCALE_H : 1)
        for (int i = 0; i < SCALE_H; ++i)
#pragma unroll
            for (int j = 0; j < SCALE_W; ++j) s += widen<A>(load_element(block + (long long)i * g.width + (long long)j * g.pixel));
        p.set(k, narrow<D>(s));
        if (NHWC && ++c == g.pixel) c = 0, ++px;
        if (!NHWC) ++px;
        if (++e == g.in_width) e = px = c = 0, ++q;
    }
    return p;
}

// Stores a whole run of K elements of p at its K-element boundary.
template <typename D, int K> __device__ __forceinline__ void store_run(D *p, const pack16<D> &x)
{
    const int BYTES = K * (int)sizeof(D);
    if (BYTES == 4 || BYTES == 8 || BYTES == 16)
        store_words<BYTES == 4 || BYTES == 8 ? BYTES : 16, true>(p, x);
    else
        store_elements(p, x, 0, K);
}

// Stores a whole run's sums, rounded to D, at its K-element boundary.
template <typename D, int K>
__device__ __forceinline__ void store_sums(D *p, const typename accumulator<D>::type sum[K])
{
    pack16<D> x;
#pragma unroll
    for (int j = 0; j < K; ++j) x.set(j, narrow<D>(sum[j]));
    store_run<D, K>(p, x);
}

} // namespace tocha

#define TOCHA_ENTRY_BOUNDS(...) TOCHA_UPSAMPLE_BOUNDS(2048, 1024, __VA_ARGS__, 0)

template <typename D, int SCALE_H, int SCALE_W, int BLOCK_IW, bool NHWC = false>
__device__ void upsample_nearest2d_backward(const D *dy, D *dx, int B, int C, int H, int W, int OH, int OW)
{
    (void)OH, (void)OW; // teeny-kernels' Args; dy's shape follows from dx's and the scales
    typedef typename tocha::accumulator<D>::type A;
    constexpr int K = tocha_upsample_backward_run((int)sizeof(D), SCALE_W, NHWC);
    constexpr int U = tocha_upsample_backward_batch((int)sizeof(D), SCALE_H, SCALE_W, NHWC);
    const tocha_upsample_rows g = tocha_upsample_rows_of(NHWC, B, C, H, W, W * SCALE_W);
    const int head = (int)(((unsigned long long)dx % (K * sizeof(D))) / sizeof(D));
    const long long total = g.in_rows * g.in_width, n = tocha_upsample_backward_runs(g, K, head);
    const long long stride = (long long)gridDim.x * BLOCK_IW * U;
    for (long long i0 = (long long)blockIdx.x * BLOCK_IW * U + threadIdx.x; i0 < n; i0 += stride) {
        // The batch: runs i0 + k * BLOCK_IW, run k at flat dx element f[k], in dx row q[k].
        // When all lie inside the tensor and their rows or pixels, every load is issued
        // before the first store; else each run on its own, summed whole where it fits.
        long long f[U], q[U];
        bool whole = i0 + (long long)(U - 1) * BLOCK_IW < n;
#pragma unroll
        for (int k = 0; k < U; ++k) {
            f[k] = (i0 + (long long)k * BLOCK_IW) * K - head;
            q[k] = tocha::div_small(f[k] < 0 ? 0 : f[k], g.in_width);
            whole = whole && f[k] >= 0 && f[k] + K <= total && tocha::run_fits<K, NHWC>(g, (int)(f[k] - q[k] * g.in_width));
        }
        if (whole) {
            A sum[U][K];
#pragma unroll
            for (int k = 0; k < U; ++k)
                tocha::run_sums<D, K, SCALE_H, SCALE_W, NHWC>(dy, g, q[k], (int)(f[k] - q[k] * g.in_width), sum[k]);
#pragma unroll
            for (int k = 0; k < U; ++k) tocha::store_sums<D, K>(dx + f[k], sum[k]);
            continue;
        }
        // Unrolled, so that the batch's arrays stay in registers.
#pragma unroll
        for (int k = 0; k < U; ++k) {
            if (i0 + (long long)k * BLOCK_IW >= n) break;
            const int lo = f[k] < 0 ? (int)-f[k] : 0, hi = (int)tocha::min_ll(K, total - f[k]);
            const int e0 = (int)(f[k] - q[k] * g.in_width);
            if (lo == 0 && hi == K && tocha::run_fits<K, NHWC>(g, e0)) {
                A sum[K];
                tocha::run_sums<D, K, SCALE_H, SCALE_W, NHWC>(dy, g, q[k], e0, sum);
                tocha::store_sums<D, K>(dx + f[k], sum);
                continue;
            }
            const tocha::pack16<D> p = tocha::run_elements<D, K, SCALE_H, SCALE_W, NHWC>(dy, g, f[k], lo, hi);
            if (lo == 0 && hi == K)
                tocha::store_run<D, K>(dx + f[k], p);
            else
                tocha::store_elements(dx + f[k], p, lo, hi);
        }
    }
}
