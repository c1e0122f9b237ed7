// pool2d.cu: 2-D max, average and adaptive average pooling of NCHW tensors, forward and
// backward. The window is baked in at construction: MODE (0 max, 1 average, 2 adaptive
// average), kernel KH x KW, stride SH x SW, padding PH x PW, dilation DH x DW (max only) and
// COUNT_PAD (average: the padding counts in the divisor, PyTorch's count_include_pad); the
// output size comes from the host (ceil mode decided there). Halves compute in f32.
//
// Forward: a thread an output element. Max takes the first largest element of its window in
// row-major order, a NaN over any number (the last NaN, as PyTorch's kernel's `>` or isnan
// update does), so that the backward routes each gradient to the element PyTorch picks.
// Backward: a thread an input element, gathering from the windows that hold it (no atomics, so
// the sums are in one order on every device): for max it recomputes each such window's pick.

template <typename A> __device__ __forceinline__ bool pool_nan(A v) { return v != v; }

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

// The flat index (ih * W + iw) of window (oh, ow)'s pick in plane p (max pooling).
template <typename T, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
__device__ __forceinline__ int pool_pick(const T *p, int H, int W, int oh, int ow)
{
    typedef typename tocha::compute<T>::type A;
    int at = -1;
    A best = (A)0;
#pragma unroll
    for (int kh = 0; kh < KH; ++kh) {
        const int ih = oh * SH - PH + kh * DH;
        if (ih < 0 || ih >= H) continue;
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
            const int iw = ow * SW - PW + kw * DW;
            if (iw < 0 || iw >= W) continue;
            const A v = tocha::to_compute(p[ih * W + iw]);
            if (at < 0 || v > best || pool_nan(v)) best = v, at = ih * W + iw;
        }
    }
    return at;
}

template <typename T, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ void tocha_pool2d(const T *x, T *y, long long planes, int H, int W, int OH, int OW)
{
    typedef typename tocha::compute<T>::type A;
    const long long total = planes * OH * OW, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        long long plane;
        int oh, ow;
        pool_place(e, OH, OW, &plane, &oh, &ow);
        const T *p = x + plane * H * W;
        if (MODE == 0) {
            const int at = pool_pick<T, KH, KW, SH, SW, PH, PW, DH, DW>(p, H, W, oh, ow);
            y[e] = at < 0 ? tocha::from_compute<T>(-tocha::infinity<A>()) : p[at];
            continue;
        }
        int h0, h1, w0, w1;
        A divisor;
        if (MODE == 2) {
            h0 = pool_adaptive_start(oh, H, OH), h1 = pool_adaptive_end(oh, H, OH);
            w0 = pool_adaptive_start(ow, W, OW), w1 = pool_adaptive_end(ow, W, OW);
            divisor = (A)((h1 - h0) * (w1 - w0));
        } else {
            h0 = oh * SH - PH, w0 = ow * SW - PW;
            h1 = h0 + KH < H + PH ? h0 + KH : H + PH, w1 = w0 + KW < W + PW ? w0 + KW : W + PW;
            const int padded = (h1 - h0) * (w1 - w0);
            h0 = h0 > 0 ? h0 : 0, w0 = w0 > 0 ? w0 : 0, h1 = h1 < H ? h1 : H, w1 = w1 < W ? w1 : W;
            divisor = (A)(COUNT_PAD ? padded : (h1 - h0) * (w1 - w0));
        }
        A sum = (A)0;
        for (int ih = h0; ih < h1; ++ih)
            for (int iw = w0; iw < w1; ++iw) sum += tocha::to_compute(p[ih * W + iw]);
        y[e] = tocha::from_compute<T>(sum / divisor);
    }
}

template <typename T, int MODE, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int COUNT_PAD>
__device__ void tocha_pool2d_backward(const T *x, const T *dy, T *dx, long long planes, int H, int W, int OH, int OW)
{
    typedef typename tocha::compute<T>::type A;
    const long long total = planes * H * W, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        long long plane;
        int ih, iw;
        pool_place(e, H, W, &plane, &ih, &iw);
        const T *p = x + plane * H * W;
        const T *g = dy + plane * OH * OW;
        A sum = (A)0;
        if (MODE == 2) {
            // The windows holding row ih start at or before it and end after it.
            for (int oh = (int)pool_div((long long)ih * OH, H); oh < OH && pool_adaptive_start(oh, H, OH) <= ih; ++oh) {
                if (pool_adaptive_end(oh, H, OH) <= ih) continue;
                const int hn = pool_adaptive_end(oh, H, OH) - pool_adaptive_start(oh, H, OH);
                for (int ow = (int)pool_div((long long)iw * OW, W); ow < OW && pool_adaptive_start(ow, W, OW) <= iw; ++ow) {
                    if (pool_adaptive_end(ow, W, OW) <= iw) continue;
                    const int wn = pool_adaptive_end(ow, W, OW) - pool_adaptive_start(ow, W, OW);
                    sum += tocha::to_compute(g[oh * OW + ow]) / (A)(hn * wn);
                }
            }
            dx[e] = tocha::from_compute<T>(sum);
            continue;
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
                if (MODE == 0) {
                    if (pool_pick<T, KH, KW, SH, SW, PH, PW, DH, DW>(p, H, W, oh, ow) == ih * W + iw)
                        sum += tocha::to_compute(g[oh * OW + ow]);
                } else {
                    int h0 = oh * SH - PH, w0 = ow * SW - PW;
                    int h1 = h0 + KH < H + PH ? h0 + KH : H + PH, w1 = w0 + KW < W + PW ? w0 + KW : W + PW;
                    const int padded = (h1 - h0) * (w1 - w0);
                    h0 = h0 > 0 ? h0 : 0, w0 = w0 > 0 ? w0 : 0, h1 = h1 < H ? h1 : H, w1 = w1 < W ? w1 : W;
                    sum += tocha::to_compute(g[oh * OW + ow]) / (A)(COUNT_PAD ? padded : (h1 - h0) * (w1 - w0));
                }
            }
        }
        dx[e] = tocha::from_compute<T>(sum);
    }
}
