// pool2d.cu: 2-D max, average and adaptive average pooling of NCHW tensors, forward and
// backward. The window is baked in at construction: MODE (0 max, 1 average, 2 adaptive
// average), kernel KH x KW, stride SH x SW, padding PH x PW, dilation DH x DW (max only) and
// COUNT_PAD (average: the padding counts in the divisor, PyTorch's count_include_pad); the
// output size comes from the host (ceil mode decided there), and so does `plan`, the mapping
// the host picked for the shape. Halves compute in f32.
//
// Forward: a thread an output element. Max takes the first largest element of its window in
// row-major order, a NaN over any number (the last NaN, as PyTorch's kernel's `>` or isnan
// update does), so that the backward routes each gradient to the element PyTorch picks.
// Adaptive pooling to 1 x 1 (plan: the team's lanes, 1 to 32) is a row mean: a team a plane,
// reading it in 16-byte groups (tocha.cuh's row_each).
//
// Backward: gathered, never scattered (no atomics, so the sums are in one order on every device).
// - Max (plan: the tile's width in windows, 8, 16 or 32): a CTA a tile of POOL_TILE windows of
//   one plane. It first finds each window's pick once (its place in the window) and reads its
//   dy, both into shared memory, with the windows just above and left of the tile that reach
//   into its input; then each thread gathers, for input elements the tile owns, the dy of the
//   windows whose pick is that element. Each window's pick is found about once (the halo's
//   again by the next tile), not once per element it holds. Windows so large that the tile's
//   shared memory would not hold them (plan 0) take the thread-an-input-element walk below,
//   which recomputes each holding window's pick.
// - Adaptive pooling to 1 x 1 from planes of at least a 16-byte group (plan 2): a thread a
//   16-byte group of dx, one division for its plane. Other adaptive windows that do not overlap
//   (H % OH == 0 and W % OW == 0; plan 1): elementwise, a thread a 16-byte group of dx, each
//   element's window stepped from the group's first.
// - Otherwise a thread an input element, walking the windows that hold it.
template <typename A> __device__ __forceinline__ bool pool_nan(A v) { return v != v; }

// V channels of one pixel (channels-last): a 16-byte vector or, V = 1, one element (tocha.cuh's
// unit).
template <typename T, int V> using pool_unit = tocha::unit<T, V>;

// a / b for a >= 0, b > 0: a 32-bit division where a fits (a 64-bit one is several times
// longer, and these run a few times an element).
__device__ __forceinline__ long long pool_div(long long a, long long b)
{
    return ((unsigned long long)(a | b) >> 31) == 0 ? (long long)((unsigned)a / (unsigned)b) : a / b;
}

// The first and one-past-last rows (or columns) of adaptive window o of `out` over `in`.
__device__ __forceinline__ int pool_adaptive_start(int o, int in, int out) { return (int)pool_div((long long)o * in, out); }
__device__ __forceinline__ int pool_adaptive_end(int o, int in, int out)
{
    return (int)pool_div(((long long)o + 1) * in + out - 1, out);
}

// Element e of planes of h x w: its plane, row and column.
__device__ __forceinline__ void pool_place(long long e, int h, int w, long long *plane, int *row, int *col)
{
    const long long r = pool_div(e, w);
    *col = (int)(e - r * w);
    *plane = pool_div(r, h);
    *row = (int)(r - *plane * h);
}

// Element e of images of h x w pixels of C channels (NHWC): its image, row, column and channel.
__device__ __forceinline__ void pool_place_nhwc(long long e, int C, int h, int w, long long *image, int *row, int *col,
                                                int *channel)
{
    const long long q = pool_div(e, C);
    *channel = (int)(e - q * C);
    pool_place(q, h, w, image, row, col);
}

// The place (kh * KW + kw) in window (oh, ow) of its pick (max pooling), for each of V channels
// at p (at[e]; V > 1: consecutive channels of an NHWC image); -1 for a window of padding alone
// (never, as the host sizes the output). Pixels are C elements apart (1 for an NCHW plane; the
// channels for an NHWC image).
template <typename T, int V, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
__device__ __forceinline__ void pool_pick_units(const T *p, int H, int W, int oh, int ow, int C, int at[V])
{
    typedef typename tocha::compute<T>::type A;
    A best[V];
#pragma unroll
    for (int e = 0; e < V; ++e) at[e] = -1, best[e] = (A)0;
#pragma unroll
    for (int kh = 0; kh < KH; ++kh) {
        const int ih = oh * SH - PH + kh * DH;
        if (ih < 0 || ih >= H) continue;
        const T *row = p + (long long)ih * W * C;
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
            const int iw = ow * SW - PW + kw * DW;
            if (iw < 0 || iw >= W) continue;
            pool_unit<T, V> u;
            u.load(row + (long long)iw * C);
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const A v = u.at(e);
                if (at[e] < 0 || v > best[e] || pool_nan(v)) best[e] = v, at[e] = kh * KW + kw;
            }
        }
    }
}

// pool_pick_units for one channel.
template <typename T, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
__device__ __forceinline__ int pool_pick(const T *p, int H, int W, int oh, int ow, int C = 1)
{
    int at[1];
    pool_pick_units<T, 1, KH, KW, SH, SW, PH, PW, DH, DW>(p, H, W, oh, ow, C, at);
    return at[0];
}

// The input rows [h0, h1) and columns [w0, w1) an average (MODE 1) or adaptive average (MODE 2)
// window (oh, ow) sums, clipped to the plane, and its divisor (average: with COUNT_PAD the
// window's size inside the padded plane, PyTorch's count_include_pad, else the elements summed).
template <typename A, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int COUNT_PAD>
__device__ __forceinline__ A pool_mean_window(int oh, int ow, int H, int W, int OH, int OW, int *h0, int *h1,
                                              int *w0, int *w1)
{
    if (MODE == 2) {
        *h0 = pool_adaptive_start(oh, H, OH), *h1 = pool_adaptive_end(oh, H, OH);
        *w0 = pool_adaptive_start(ow, W, OW), *w1 = pool_adaptive_end(ow, W, OW);
        return (A)((*h1 - *h0) * (*w1 - *w0));
    }
    int a0 = oh * SH - PH, b0 = ow * SW - PW;
    int a1 = a0 + KH < H + PH ? a0 + KH : H + PH, b1 = b0 + KW < W + PW ? b0 + KW : W + PW;
    const int padded = (a1 - a0) * (b1 - b0);
    a0 = a0 > 0 ? a0 : 0, b0 = b0 > 0 ? b0 : 0, a1 = a1 < H ? a1 : H, b1 = b1 < W ? b1 : W;
    *h0 = a0, *h1 = a1, *w0 = b0, *w1 = b1;
    return (A)(COUNT_PAD ? padded : (a1 - a0) * (b1 - b0));
}

// Adaptive pooling to 1 x 1: a team of `team` lanes (a power of two up to 32) a plane of n
// elements; y = the plane's mean. Each warp takes 32 / team neighbouring planes at a time and
// strides over the rest, so that any grid covers the planes (the host sizes it from the output
// alone, not knowing the team).
template <typename T>
__device__ void pool_global_mean(const T *x, T *y, long long planes, long long n, int team)
{
    typedef typename tocha::compute<T>::type A;
    const unsigned member = threadIdx.x % (unsigned)team, per_warp = 32u / (unsigned)team;
    const long long warps = (long long)gridDim.x * (blockDim.x / 32);
    const long long warp = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    // the loop's trip count is the warp's, so every lane reaches each shuffle
    for (long long first = warp * per_warp; first < planes; first += warps * per_warp) {
        const long long plane = first + (threadIdx.x % 32) / (unsigned)team;
        const bool live = plane < planes;
        A sum = (A)0;
        if (live) tocha::row_each(x + plane * n, n, member, (unsigned)team, [&](T e, long long) { sum += tocha::to_compute(e); });
        sum = tocha::team_sum(sum, (unsigned)team, false);
        if (live && member == 0) y[plane] = tocha::from_compute<T>(sum / (A)n);
    }
}

template <typename T, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ void tocha_pool2d(const T *x, T *y, long long planes, int H, int W, int OH, int OW, int plan)
{
    typedef typename tocha::compute<T>::type A;
    if constexpr (MODE == 2) {
        if (plan != 0) {
            pool_global_mean(x, y, planes, (long long)H * W, plan);
            return;
        }
    }
    const long long total = planes * OH * OW, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        long long plane;
        int oh, ow;
        pool_place(e, OH, OW, &plane, &oh, &ow);
        const T *p = x + plane * H * W;
        if (MODE == 0) {
            const int at = pool_pick<T, KH, KW, SH, SW, PH, PW, DH, DW>(p, H, W, oh, ow);
            y[e] = at < 0 ? tocha::from_compute<T>(-tocha::infinity<A>())
                          : p[(long long)(oh * SH - PH + at / KW * DH) * W + ow * SW - PW + at % KW * DW];
            continue;
        }
        int h0, h1, w0, w1;
        const A divisor = pool_mean_window<A, MODE, KH, KW, SH, SW, PH, PW, COUNT_PAD>(oh, ow, H, W, OH, OW, &h0, &h1,
                                                                                     &w0, &w1);
        A sum = (A)0;
        for (int ih = h0; ih < h1; ++ih)
            for (int iw = w0; iw < w1; ++iw) sum += tocha::to_compute(p[(long long)ih * W + iw]);
        y[e] = tocha::from_compute<T>(sum / divisor);
    }
}

// The forward of channels-last x [n, H, W, C] into y [n, OH, OW, C] (layout nhwc) in units of
// V channels of one output pixel (a 16-byte vector where C is whole vectors and x, y are
// aligned to them, else one channel), a thread a unit, channels fastest, so that a warp's reads
// of each window element are consecutive 16-byte loads. The same windows and picks as
// tocha_pool2d (the first largest in row-major order, a NaN over any number), each channel of a
// unit its own; adaptive pooling to 1 x 1 walks the H W pixels of the unit's channels.
template <typename T, int V, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ __forceinline__ void pool_nhwc_units(const T *x, T *y, long long n, int C, int H, int W, int OH, int OW)
{
    typedef typename tocha::compute<T>::type A;
    const int CV = C / V;
    const long long total = n * OH * OW * CV, stride = (long long)blockDim.x * gridDim.x;
    for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; u < total; u += stride) {
        long long b;
        int oh, ow, cv;
        pool_place_nhwc(u, CV, OH, OW, &b, &oh, &ow, &cv);
        const T *p = x + b * H * W * C + cv * V; // the unit's channels: pixel (ih, iw) at (ih W + iw) C
        A out[V];
        if (MODE == 0) {
            const int h0 = oh * SH - PH, w0 = ow * SW - PW;
            bool any = false;
#pragma unroll
            for (int e = 0; e < V; ++e) out[e] = -tocha::infinity<A>();
            for (int ih = h0; ih < h0 + (KH - 1) * DH + 1; ih += DH) {
                if (ih < 0 || ih >= H) continue;
                for (int iw = w0; iw < w0 + (KW - 1) * DW + 1; iw += DW) {
                    if (iw < 0 || iw >= W) continue;
                    pool_unit<T, V> v;
                    v.load(p + ((long long)ih * W + iw) * C);
#pragma unroll
                    for (int e = 0; e < V; ++e) {
                        const A a = v.at(e);
                        if (!any || a > out[e] || pool_nan(a)) out[e] = a;
                    }
                    any = true;
                }
            }
        } else {
            int h0, h1, w0, w1;
            const A divisor = pool_mean_window<A, MODE, KH, KW, SH, SW, PH, PW, COUNT_PAD>(oh, ow, H, W, OH, OW, &h0,
                                                                                         &h1, &w0, &w1);
#pragma unroll
            for (int e = 0; e < V; ++e) out[e] = (A)0;
            for (int ih = h0; ih < h1; ++ih)
                for (int iw = w0; iw < w1; ++iw) {
                    pool_unit<T, V> v;
                    v.load(p + ((long long)ih * W + iw) * C);
#pragma unroll
                    for (int e = 0; e < V; ++e) out[e] += v.at(e);
                }
#pragma unroll
            for (int e = 0; e < V; ++e) out[e] = out[e] / divisor;
        }
        T *to = y + u * V;
        tocha::store_unit<T, V>(to, out);
    }
}

template <typename T, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ void tocha_pool2d_nhwc(const T *x, T *y, long long n, int C, int H, int W, int OH, int OW)
{
    const int V = tocha::vec16<T>::n;
    if (V > 1 && C % V == 0 && (((unsigned long long)x | (unsigned long long)y) & 15u) == 0)
        pool_nhwc_units<T, V, MODE, KH, KW, SH, SW, PH, PW, DH, DW, COUNT_PAD>(x, y, n, C, H, W, OH, OW);
    else
        pool_nhwc_units<T, 1, MODE, KH, KW, SH, SW, PH, PW, DH, DW, COUNT_PAD>(x, y, n, C, H, W, OH, OW);
}

// dx of input element (ih, iw) for V channels at once: the sum of dy over the windows that hold
// it (max: those whose pick it is, each channel's own), one division a window (average: by its
// divisor, adaptive: by its size), into sum[e]. p and g are the first x and dy elements of its
// plane (NCHW: C = 1, V = 1) or of its V channels of one image (NHWC: pixels C apart).
template <typename T, int V, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ __forceinline__ void pool_gather_units(const T *p, const T *g, int H, int W, int OH, int OW, int ih, int iw,
                                                  int C, typename tocha::compute<T>::type sum[V])
{
    typedef typename tocha::compute<T>::type A;
#pragma unroll
    for (int e = 0; e < V; ++e) sum[e] = (A)0;
    if (MODE == 2) {
        // The windows holding row ih start at or before it and end after it.
        for (int oh = (int)pool_div((long long)ih * OH, H); oh < OH && pool_adaptive_start(oh, H, OH) <= ih; ++oh) {
            if (pool_adaptive_end(oh, H, OH) <= ih) continue;
            const int hn = pool_adaptive_end(oh, H, OH) - pool_adaptive_start(oh, H, OH);
            for (int ow = (int)pool_div((long long)iw * OW, W); ow < OW && pool_adaptive_start(ow, W, OW) <= iw; ++ow) {
                if (pool_adaptive_end(ow, W, OW) <= iw) continue;
                const int wn = pool_adaptive_end(ow, W, OW) - pool_adaptive_start(ow, W, OW);
                pool_unit<T, V> dy;
                dy.load(g + ((long long)oh * OW + ow) * C);
#pragma unroll
                for (int e = 0; e < V; ++e) sum[e] += dy.at(e) / (A)(hn * wn);
            }
        }
        return;
    }
    // Window oh holds row ih when ih = oh * SH - PH + kh * DH for a kh in [0, KH).
    const int eff_h = (KH - 1) * DH, eff_w = (KW - 1) * DW;
    int oh_lo = ih + PH - eff_h, ow_lo = iw + PW - eff_w;
    oh_lo = oh_lo <= 0 ? 0 : (oh_lo + SH - 1) / SH;
    ow_lo = ow_lo <= 0 ? 0 : (ow_lo + SW - 1) / SW;
    int oh_hi = (ih + PH) / SH, ow_hi = (iw + PW) / SW;
    oh_hi = oh_hi < OH - 1 ? oh_hi : OH - 1;
    ow_hi = ow_hi < OW - 1 ? ow_hi : OW - 1;
    for (int oh = oh_lo; oh <= oh_hi; ++oh) {
        if ((ih + PH - oh * SH) % DH != 0) continue;
        for (int ow = ow_lo; ow <= ow_hi; ++ow) {
            if ((iw + PW - ow * SW) % DW != 0) continue;
            pool_unit<T, V> dy;
            dy.load(g + ((long long)oh * OW + ow) * C);
            if (MODE == 0) {
                const int dh = (ih + PH - oh * SH) / DH, dw = (iw + PW - ow * SW) / DW;
                int at[V];
                pool_pick_units<T, V, KH, KW, SH, SW, PH, PW, DH, DW>(p, H, W, oh, ow, C, at);
#pragma unroll
                for (int e = 0; e < V; ++e)
                    if (at[e] == dh * KW + dw) sum[e] += dy.at(e);
            } else {
                int h0, h1, w0, w1;
                const A divisor =
                    pool_mean_window<A, 1, KH, KW, SH, SW, PH, PW, COUNT_PAD>(oh, ow, H, W, OH, OW, &h0, &h1, &w0, &w1);
#pragma unroll
                for (int e = 0; e < V; ++e) sum[e] += dy.at(e) / divisor;
            }
        }
    }
}

// pool_gather_units for one element.
template <typename T, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ __forceinline__ typename tocha::compute<T>::type pool_gather(const T *p, const T *g, int H, int W, int OH,
                                                                        int OW, int ih, int iw, int C)
{
    typename tocha::compute<T>::type sum[1];
    pool_gather_units<T, 1, MODE, KH, KW, SH, SW, PH, PW, DH, DW, COUNT_PAD>(p, g, H, W, OH, OW, ih, iw, C, sum);
    return sum[0];
}

// ---- max pooling's backward by tiles ----

// Windows a tile of the max backward covers (its width the host's plan, its height
// POOL_TILE / width), and the rows and columns of windows above and left of a tile whose
// windows reach into its input (the halo).
#define POOL_TILE 256
template <int K, int S, int D> struct pool_halo { static const int n = (K - 1) * D / S; };

// Shared-memory slots of a tile and its halo for any width of 8, 16 or 32; 0 where they
// would not fit in 24 KB (the walk takes those windows).
template <typename A, int KH, int KW, int SH, int SW, int DH, int DW> struct pool_slots {
    static const int hh = pool_halo<KH, SH, DH>::n, hw = pool_halo<KW, SW, DW>::n;
    static const long long want = (long long)(POOL_TILE + 32 * (hh + hw)) + (long long)hh * hw;
    static const int n = want * (long long)(sizeof(int) + sizeof(A)) <= 24576 ? (int)want : 0;
};

// The last window (oh) that holds input row ih (windows oh * S - P + k * D, k < K): clipped
// to the last one there is.
template <int S, int P> __device__ __forceinline__ int pool_last_window(int i, int O)
{
    const int o = (i + P) / S;
    return o < O - 1 ? o : O - 1;
}

// Tile `tile` (plane, row of tiles, column of tiles) of the max backward: dx of the input
// elements whose last holding window lies in it (its first row and column of tiles also take
// the elements before them, its last ones those after).
template <typename T, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int SLOTS>
__device__ __forceinline__ void pool_max_tile(const T *x, const T *dy, T *dx, long long plane, int th, int tw, int oh0, int ow0,
                                              int H, int W, int OH, int OW, int *pick, typename tocha::compute<T>::type *grad)
{
    typedef typename tocha::compute<T>::type A;
    const int HH = pool_halo<KH, SH, DH>::n, HW = pool_halo<KW, SW, DW>::n;
    const T *p = x + plane * H * W, *g = dy + plane * OH * OW;
    // The tile's windows and its halo: slot (a, b) is window (oh0 - HH + a, ow0 - HW + b).
    const int sw = tw + HW, slots = (th + HH) * sw;
    for (int s = threadIdx.x; s < slots; s += blockDim.x) {
        const int a = s / sw, oh = oh0 - HH + a, ow = ow0 - HW + (s - a * sw);
        const bool in = oh >= 0 && oh < OH && ow >= 0 && ow < OW;
        pick[s] = in ? pool_pick<T, KH, KW, SH, SW, PH, PW, DH, DW>(p, H, W, oh, ow) : -1;
        grad[s] = in ? tocha::to_compute(g[(long long)oh * OW + ow]) : (A)0;
    }
    __syncthreads();
    // The input the tile owns: rows r0..r1 - 1, columns c0..c1 - 1.
    const int r0 = oh0 == 0 ? 0 : tocha::max_int(oh0 * SH - PH, 0);
    const int r1 = oh0 + th >= OH ? H : tocha::min_int((oh0 + th) * SH - PH, H);
    const int c0 = ow0 == 0 ? 0 : tocha::max_int(ow0 * SW - PW, 0);
    const int c1 = ow0 + tw >= OW ? W : tocha::min_int((ow0 + tw) * SW - PW, W);
    const int nc = c1 - c0;
    if (nc > 0 && r1 > r0) {
        // Element (r, c) of the region stepped by blockDim.x without a division an element.
        const int step_r = (int)blockDim.x / nc, step_c = (int)blockDim.x - step_r * nc;
        int r = (int)threadIdx.x / nc, c = (int)threadIdx.x - r * nc;
        for (r += r0; r < r1;) {
            const int ih = r, iw = c0 + c;
            const int lh = pool_last_window<SH, PH>(ih, OH), lw = pool_last_window<SW, PW>(iw, OW);
            A sum = (A)0;
            // The holding windows in row-major order (as the walk sums them).
#pragma unroll
            for (int j = HH; j >= 0; --j) {
                const int oh = lh - j, dh = ih + PH - oh * SH;
                if (oh < 0 || dh % DH != 0 || dh / DH >= KH) continue;
#pragma unroll
                for (int i = HW; i >= 0; --i) {
                    const int ow = lw - i, dw = iw + PW - ow * SW;
                    if (ow < 0 || dw % DW != 0 || dw / DW >= KW) continue;
                    const int s = (oh - oh0 + HH) * sw + ow - ow0 + HW;
                    if (pick[s] == dh / DH * KW + dw / DW) sum += grad[s];
                }
            }
            dx[plane * H * W + (long long)ih * W + iw] = tocha::from_compute<T>(sum);
            r += step_r, c += step_c;
            if (c >= nc) c -= nc, ++r;
        }
    }
    __syncthreads(); // the slots are refilled for the next tile
}

// The max backward over every tile: tiles of tw x (POOL_TILE / tw) windows, a CTA a tile.
template <typename T, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
__device__ void pool_max_backward_tiles(const T *x, const T *dy, T *dx, long long planes, int H, int W, int OH, int OW, int tw)
{
    typedef typename tocha::compute<T>::type A;
    const int SLOTS = pool_slots<A, KH, KW, SH, SW, DH, DW>::n;
    __shared__ int pick[SLOTS > 0 ? SLOTS : 1];
    __shared__ A grad[SLOTS > 0 ? SLOTS : 1];
    const int th = POOL_TILE / tw;
    const int rows = (OH + th - 1) / th, cols = (OW + tw - 1) / tw;
    const long long tiles = planes * rows * cols;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long rc = t / cols;
        const int col = (int)(t - rc * cols);
        const long long plane = rc / rows;
        const int row = (int)(rc - plane * rows);
        pool_max_tile<T, KH, KW, SH, SW, PH, PW, DH, DW, SLOTS>(x, dy, dx, plane, th, tw, row * th, col * tw, H, W, OH, OW,
                                                                pick, grad);
    }
}

// Adaptive windows that do not overlap (kh = H / OH rows and kw = W / OW columns each): dx in
// 16-byte groups, a thread a group (the elements before dx's first 16-byte boundary and after
// its last whole group one by one), each group's place found once and stepped an element.
template <typename T>
__device__ void pool_adaptive_backward_flat(const T *dy, T *dx, long long planes, int H, int W, int OH, int OW)
{
    typedef typename tocha::compute<T>::type A;
    const int V = tocha::vec16<T>::n, kh = H / OH, kw = W / OW;
    const A count = (A)(kh * kw);
    const long long total = planes * H * W;
    long long a = (long long)(((16u - ((unsigned)(unsigned long long)dx & 15u)) & 15u) / sizeof(T));
    if (a > total) a = total;
    const long long groups = (total - a) / V, loose = total - groups * V;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; u < groups + loose; u += stride) {
        // Unit u: group u, else one loose element (the head's, then the tail's).
        const long long k = u - groups, e0 = k < 0 ? a + u * V : (k < a ? k : k + groups * V);
        const int n = u < groups ? V : 1;
        long long plane;
        int ih, iw;
        pool_place(e0, H, W, &plane, &ih, &iw);
        int oh = ih / kh, ow = iw / kw, rh = ih - oh * kh, rw = iw - ow * kw;
        const T *g = dy + plane * OH * OW;
        tocha::pack16<T> r;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            if (e < n) r.set(e, tocha::from_compute<T>(tocha::to_compute(g[(long long)oh * OW + ow]) / count));
            // The next element's place.
            if (++rw == kw) rw = 0, ++ow;
            if (++iw == W) {
                iw = 0, ow = 0, rw = 0;
                if (++rh == kh) rh = 0, ++oh;
                if (++ih == H) ih = 0, oh = 0, rh = 0, g += (long long)OH * OW;
            }
        }
        if (n == V)
            tocha::store_pack(dx + e0, r);
        else
            dx[e0] = tocha::element_of<T>(r.w, 0);
    }
}

// Adaptive pooling to 1 x 1, backward: dx = dy[plane] / n for planes of n elements, a thread a
// 16-byte group of dx (the elements before the first group boundary and after the last one by
// one). A group lies in at most two planes (n >= V, which the host checks), so a thread divides
// its first element's index by n once and reads at most two values of dy: a few instructions
// an element, where finding each element's window was compute-bound.
template <typename T>
__device__ void pool_global_mean_backward(const T *dy, T *dx, long long planes, long long n)
{
    typedef typename tocha::compute<T>::type A;
    const int V = tocha::vec16<T>::n;
    const long long total = planes * n;
    long long a = (long long)(((16u - ((unsigned)(unsigned long long)dx & 15u)) & 15u) / sizeof(T));
    if (a > total) a = total;
    const long long groups = (total - a) / V, loose = total - groups * V;
    const long long stride = (long long)blockDim.x * gridDim.x;
    const A count = (A)n;
    for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; u < groups + loose; u += stride) {
        if (u >= groups) {
            const long long k = u - groups, e = k < a ? k : k + groups * V; // the head's, then the tail's
            dx[e] = tocha::from_compute<T>(tocha::to_compute(dy[pool_div(e, n)]) / count);
            continue;
        }
        const long long e0 = a + u * V, plane = pool_div(e0, n), next = (plane + 1) * n;
        const T first = tocha::from_compute<T>(tocha::to_compute(dy[plane]) / count);
        const T second = e0 + V > next ? tocha::from_compute<T>(tocha::to_compute(dy[plane + 1]) / count) : first;
        tocha::pack16<T> r;
#pragma unroll
        for (int e = 0; e < V; ++e) r.set(e, e0 + e < next ? first : second);
        tocha::store_pack(dx + e0, r);
    }
}

template <typename T, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ void tocha_pool2d_backward(const T *x, const T *dy, T *dx, long long planes, int H, int W, int OH, int OW, int plan)
{
    typedef typename tocha::compute<T>::type A;
    if constexpr (MODE == 0 && pool_slots<A, KH, KW, SH, SW, DH, DW>::n > 0) {
        if (plan != 0) {
            pool_max_backward_tiles<T, KH, KW, SH, SW, PH, PW, DH, DW>(x, dy, dx, planes, H, W, OH, OW, plan);
            return;
        }
    }
    if constexpr (MODE == 2) {
        if (plan == 2) {
            pool_global_mean_backward(dy, dx, planes, (long long)H * W);
            return;
        }
        if (plan != 0) {
            pool_adaptive_backward_flat(dy, dx, planes, H, W, OH, OW);
            return;
        }
    }
    const long long total = planes * H * W, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        long long plane;
        int ih, iw;
        pool_place(e, H, W, &plane, &ih, &iw);
        dx[e] = tocha::from_compute<T>(pool_gather<T, MODE, KH, KW, SH, SW, PH, PW, DH, DW, COUNT_PAD>(
            x + plane * H * W, dy + plane * OH * OW, H, W, OH, OW, ih, iw, 1));
    }
}

// The backward of tocha_pool2d_nhwc: a thread a unit of V channels of a dx pixel of x [n, H, W,
// C] (16-byte vectors where C is whole vectors and x, dy, dx are aligned to them, else one
// channel), channels fastest (a warp's reads of each window's dy are consecutive), gathering as
// the NCHW walk does.
template <typename T, int V, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ __forceinline__ void pool_nhwc_backward_units(const T *x, const T *dy, T *dx, long long n, int C, int H,
                                                         int W, int OH, int OW)
{
    typedef typename tocha::compute<T>::type A;
    const int CV = C / V;
    const long long total = n * H * W * CV, stride = (long long)blockDim.x * gridDim.x;
    for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; u < total; u += stride) {
        long long b;
        int ih, iw, cv;
        pool_place_nhwc(u, CV, H, W, &b, &ih, &iw, &cv);
        A sum[V];
        pool_gather_units<T, V, MODE, KH, KW, SH, SW, PH, PW, DH, DW, COUNT_PAD>(
            x + b * H * W * C + cv * V, dy + b * OH * OW * C + cv * V, H, W, OH, OW, ih, iw, C, sum);
        T *to = dx + u * V;
        tocha::store_unit<T, V>(to, sum);
    }
}

template <typename T, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ void tocha_pool2d_nhwc_backward(const T *x, const T *dy, T *dx, long long n, int C, int H, int W, int OH,
                                           int OW)
{
    const int V = tocha::vec16<T>::n;
    const unsigned long long at = (unsigned long long)x | (unsigned long long)dy | (unsigned long long)dx;
    if (V > 1 && C % V == 0 && (at & 15u) == 0)
        pool_nhwc_backward_units<T, V, MODE, KH, KW, SH, SW, PH, PW, DH, DW, COUNT_PAD>(x, dy, dx, n, C, H, W, OH, OW);
    else
        pool_nhwc_backward_units<T, 1, MODE, KH, KW, SH, SW, PH, PW, DH, DW, COUNT_PAD>(x, dy, dx, n, C, H, W, OH, OW);
}
