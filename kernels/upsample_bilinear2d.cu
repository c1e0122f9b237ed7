// upsample_bilinear2d.cu: 2-D bilinear (CUBIC = 0) or bicubic (CUBIC = 1) resizing of NCHW
// (NHWC = 0) or channels-last (NHWC = 1) tensors to any output size, forward and backward, as
// PyTorch's interpolate(mode="bilinear" / "bicubic") and ONNX's Resize(mode="linear" / "cubic")
// compute it. The dtype T and the layout are compile-time
// constants; halves compute in f32, f64 in f64 (A), as PyTorch's kernels do.
//
// Each axis maps output index o to the source coordinate src = ratio (o + half) - half, clamped
// to [0, in - 1]: half 0.5 for half-pixel centres (align_corners false), 0 for corner-aligned
// and asymmetric mappings; ratio from the host (in / out, 1 / scale, or (in - 1) / (out - 1)).
// The two neighbours are i0 = floor(src) and i1 = min(i0 + 1, in - 1), weighted 1 - l and l,
// l = src - i0.
//
// Backward: gathered, never scattered (no atomics: one summation order on every device). The
// outputs that read input row ih are those whose i0 <= ih <= i1, a run of consecutive rows
// (src never decreases along an axis), found by two binary searches over the same mapping the
// forward computes; a thread a dx element sums w_h w_w dy over the runs of both axes, rows then
// columns in increasing order.

template <typename A> struct bilinear_axis {
    A ratio, half;
    int in;
    // The neighbours of output index o and the weight of the second.
    __device__ __forceinline__ void at(int o, int *i0, int *i1, A *l) const
    {
        A src = ratio * ((A)o + half) - half;
        if (src < (A)0) src = (A)0;
        if (src > (A)(in - 1)) src = (A)(in - 1);
        const int f = (int)src;
        *i0 = f;
        *i1 = f < in - 1 ? f + 1 : f;
        *l = src - (A)f;
    }
    // The weight input index i has in output o (0 when o does not read it).
    __device__ __forceinline__ A weight(int o, int i) const
    {
        int i0, i1;
        A l;
        at(o, &i0, &i1, &l);
        return (i0 == i ? (A)1 - l : (A)0) + (i1 == i ? l : (A)0);
    }
    // The first output whose i1 >= i and the last whose i0 <= i, over `out` outputs (first > last
    // where none reads i).
    __device__ __forceinline__ void readers(int i, int out, int *first, int *last) const
    {
        int lo = 0, hi = out; // first o with i1(o) >= i
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            int a, b;
            A l;
            at(mid, &a, &b, &l);
            if (b >= i) hi = mid;
            else lo = mid + 1;
        }
        *first = lo;
        lo = 0, hi = out; // first o with i0(o) > i
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            int a, b;
            A l;
            at(mid, &a, &b, &l);
            if (a > i) hi = mid;
            else lo = mid + 1;
        }
        *last = lo - 1;
    }
};

// Bicubic (CUBIC = 1): output o reads the four inputs around src = ratio (o + half) - half, not
// clamped (PyTorch's cubic mapping, and ONNX's): f = floor(src), t = src - f, taps f - 1 .. f + 2
// each clamped to [0, in - 1] (the edge repeated), weighted by Keys' cubic convolution of
// coefficient a (PyTorch's -0.75; ONNX's cubic_coeff_a). The taps of consecutive outputs never
// move back, so the outputs that read input i are again one run, found by binary search.
template <typename A> struct bicubic_axis {
    A ratio, half, a;
    int in;
    __device__ __forceinline__ int clamped(int i) const { return i < 0 ? 0 : (i > in - 1 ? in - 1 : i); }
    // The first tap (unclamped) of output o and its four weights.
    __device__ __forceinline__ int at(int o, A w[4]) const
    {
        const A src = ratio * ((A)o + half) - half;
        const A fl = floor(src);
        const A t = src - fl;
        // Keys: |x| <= 1: (a + 2)|x|^3 - (a + 3)|x|^2 + 1; 1 < |x| < 2: a|x|^3 - 5a|x|^2 + 8a|x| - 4a
        const A near0 = t, near1 = (A)1 - t, far0 = t + (A)1, far1 = (A)2 - t;
        w[0] = ((a * far0 - (A)5 * a) * far0 + (A)8 * a) * far0 - (A)4 * a;
        w[1] = ((a + (A)2) * near0 - (a + (A)3)) * near0 * near0 + (A)1;
        w[2] = ((a + (A)2) * near1 - (a + (A)3)) * near1 * near1 + (A)1;
        w[3] = ((a * far1 - (A)5 * a) * far1 + (A)8 * a) * far1 - (A)4 * a;
        return (int)fl - 1;
    }
    // The weight input index i has in output o (0 when o does not read it).
    __device__ __forceinline__ A weight(int o, int i) const
    {
        A w[4];
        const int first = at(o, w);
        A sum = (A)0;
        for (int k = 0; k < 4; ++k)
            if (clamped(first + k) == i) sum += w[k];
        return sum;
    }
    // The first output whose last tap reaches i and the last whose first tap is at most i.
    __device__ __forceinline__ void readers(int i, int out, int *first, int *last) const
    {
        A w[4];
        int lo = 0, hi = out;
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            if (clamped(at(mid, w) + 3) >= i) hi = mid;
            else lo = mid + 1;
        }
        *first = lo;
        lo = 0, hi = out;
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            if (clamped(at(mid, w)) > i) hi = mid;
            else lo = mid + 1;
        }
        *last = lo - 1;
    }
};

// Element e of [planes, h, w] (NHWC 0) or [images, h, w, C] (NHWC 1): its plane (NCHW) or image
// and channel, row and column.
template <int NHWC>
__device__ __forceinline__ void bilinear_place(long long e, int C, int h, int w, long long *plane, int *channel, int *row,
                                               int *col)
{
    if (NHWC) {
        *channel = (int)(e % C);
        e /= C;
    } else {
        *channel = 0;
    }
    *col = (int)(e % w);
    e /= w;
    *row = (int)(e % h);
    *plane = e / h;
}

// Element (plane, row, col, channel) of a tensor of h x w pixels, C channels (C 1 for NCHW planes).
__device__ __forceinline__ long long bilinear_at(long long plane, int row, int col, int channel, int C, int h, int w)
{
    return ((plane * h + row) * (long long)w + col) * C + channel;
}

// y [planes, OH, OW] from x [planes, H, W] (NHWC: [images, OH, OW, C] from [images, H, W, C]):
// a thread an output element.
template <typename T, int NHWC, int CUBIC>
__device__ void tocha_upsample_bilinear2d(const T *x, T *y, long long total, int C, int H, int W, int OH, int OW,
                                          double ratio_h, double ratio_w, double half, double cubic_a)
{
    typedef typename tocha::compute<T>::type A;
    const bilinear_axis<A> ah = {(A)ratio_h, (A)half, H}, aw = {(A)ratio_w, (A)half, W};
    const bicubic_axis<A> ch = {(A)ratio_h, (A)half, (A)cubic_a, H}, cw = {(A)ratio_w, (A)half, (A)cubic_a, W};
    const int c_ = NHWC ? C : 1;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)blockDim.x * gridDim.x) {
        long long plane;
        int c, oh, ow, h0, h1, w0, w1;
        bilinear_place<NHWC>(e, c_, OH, OW, &plane, &c, &oh, &ow);
        if (CUBIC) { // rows of four taps each, weighted, then the rows weighted (PyTorch's order)
            A wh[4], ww[4];
            const int fh = ch.at(oh, wh), fw = cw.at(ow, ww);
            A v = (A)0;
            for (int i = 0; i < 4; ++i) {
                const int row = ch.clamped(fh + i);
                A r = (A)0;
                for (int j = 0; j < 4; ++j)
                    r += ww[j] * tocha::to_compute(x[bilinear_at(plane, row, cw.clamped(fw + j), c, c_, H, W)]);
                v += wh[i] * r;
            }
            y[e] = tocha::from_compute<T>(v);
            continue;
        }
        A lh, lw;
        ah.at(oh, &h0, &h1, &lh);
        aw.at(ow, &w0, &w1, &lw);
        const A x00 = tocha::to_compute(x[bilinear_at(plane, h0, w0, c, c_, H, W)]);
        const A x01 = tocha::to_compute(x[bilinear_at(plane, h0, w1, c, c_, H, W)]);
        const A x10 = tocha::to_compute(x[bilinear_at(plane, h1, w0, c, c_, H, W)]);
        const A x11 = tocha::to_compute(x[bilinear_at(plane, h1, w1, c, c_, H, W)]);
        const A v = ((A)1 - lh) * (((A)1 - lw) * x00 + lw * x01) + lh * (((A)1 - lw) * x10 + lw * x11);
        y[e] = tocha::from_compute<T>(v);
    }
}

// The gradient of input pixel (ih, iw) of plane and channel c: the sum of w_h w_w dy over the
// outputs that read it along both axes (Axis::readers: a run each), rows then columns in
// increasing order.
template <typename T, typename A, typename Axis>
__device__ __forceinline__ A upsample_gather(const T *dy, const Axis &ah, const Axis &aw, long long plane, int ih,
                                             int iw, int c, int c_, int OH, int OW)
{
    int oh0, oh1, ow0, ow1;
    ah.readers(ih, OH, &oh0, &oh1);
    aw.readers(iw, OW, &ow0, &ow1);
    A sum = (A)0;
    for (int oh = oh0; oh <= oh1; ++oh) {
        const A wh = ah.weight(oh, ih);
        A row = (A)0;
        for (int ow = ow0; ow <= ow1; ++ow)
            row += aw.weight(ow, iw) * tocha::to_compute(dy[bilinear_at(plane, oh, ow, c, c_, OH, OW)]);
        sum += wh * row;
    }
    return sum;
}

// dx [planes, H, W] (or [images, H, W, C]) from dy: a thread a dx element, gathering the outputs
// that read it (upsample_gather), never scattering.
template <typename T, int NHWC, int CUBIC>
__device__ void tocha_upsample_bilinear2d_backward(const T *dy, T *dx, long long total, int C, int H, int W, int OH,
                                                   int OW, double ratio_h, double ratio_w, double half, double cubic_a)
{
    typedef typename tocha::compute<T>::type A;
    const bilinear_axis<A> ah = {(A)ratio_h, (A)half, H}, aw = {(A)ratio_w, (A)half, W};
    const bicubic_axis<A> ch = {(A)ratio_h, (A)half, (A)cubic_a, H}, cw = {(A)ratio_w, (A)half, (A)cubic_a, W};
    const int c_ = NHWC ? C : 1;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)blockDim.x * gridDim.x) {
        long long plane;
        int c, ih, iw;
        bilinear_place<NHWC>(e, c_, H, W, &plane, &c, &ih, &iw);
        const A sum = CUBIC ? upsample_gather<T, A>(dy, ch, cw, plane, ih, iw, c, c_, OH, OW)
                            : upsample_gather<T, A>(dy, ah, aw, plane, ih, iw, c, c_, OH, OW);
        dx[e] = tocha::from_compute<T>(sum);
    }
}
