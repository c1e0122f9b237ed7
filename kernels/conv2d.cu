// conv2d.cu: 2-D convolution of x [n, c, h, w] by weight [co, c / G, KH, KW] (+ bias [co]) into
// y [n, co, oh, ow], images stored NCHW or, with NHWC, channels innermost ([n, h, w, c], PyTorch's
// channels_last); the weight keeps PyTorch's layout either way. PyTorch's: y[b, o, oy, ox] = bias[o] + the sum over the c / G input
// channels of o's group and the window of x[b, i, oy SH - PH + ky DH, ox SW - PW + kx DW] w[o, i,
// ky, kx] (zero outside x). The window (KH, KW), stride, padding, dilation and groups G are
// compile-time constants; T's compute type accumulates (f32 for halves, f64 for f64), one fma a
// term, in a fixed order (channel, then row, then column of the window), so that results are
// the same on every device, grid and layout. These are the direct kernels: one thread an output of y or
// dx, one CTA a weight or a bias gradient (its threads' strided partials combined in warp order,
// tocha::team_sum). A transposed convolution (ConvTranspose2d) runs the same kernels with the
// roles swapped: its forward is a convolution's dx, its dx a convolution's forward, its weight
// gradient the weight kernel with x and dy exchanged.

#define CONV_TEMPLATE                                                                                   \
    template <typename T, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int G,        \
              int NHWC>
#define CONV_ARGS T, KH, KW, SH, SW, PH, PW, DH, DW, G, NHWC

// The offset of element [b, ch, y, x] of a [*, c, h, w] image batch stored NCHW or, with NHWC,
// [*, h, w, c] (channels innermost).
template <int NHWC>
__device__ __forceinline__ long long conv_at(long long b, long long ch, long long y, long long x,
                                             long long c, long long h, long long w)
{
    return NHWC ? ((b * h + y) * w + x) * c + ch : ((b * c + ch) * h + y) * w + x;
}

// The flat index e of a [*, c, h, w] batch (in its stored order) as b, ch, y, x.
template <int NHWC>
__device__ __forceinline__ void conv_coords(long long e, long long c, long long h, long long w,
                                            long long *b, long long *ch, long long *y, long long *x)
{
    if (NHWC) {
        *ch = e % c, e /= c, *x = e % w, e /= w, *y = e % h, *b = e / h;
    } else {
        *x = e % w, e /= w, *y = e % h, e /= h, *ch = e % c, *b = e / c;
    }
}

// The forward writes y through the epilogue F (epilogue.cuh, after activation.cuh in the
// source): + bias, + residual (shaped as y, or null), then F, or with grad (shaped as y) the
// backward's dz = grad F'(z) in y's place.
template <typename T, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int G, int NHWC,
          typename F>
__device__ void tocha_conv2d_forward(const T *x, const T *w, const T *bias, T *y, long long n,
                                     long long c, long long h, long long wd, long long co, long long oh,
                                     long long ow, int has_bias, const T *residual, const T *grad,
                                     int epilogue)
{
    typedef typename tocha::compute<T>::type A;
    const tocha_epilogue<T, F> epi =
        tocha_epilogue_of<T, F>((const T *)0, 0, residual, grad, epilogue, 0);
    const long long cg = c / G, cog = co / G, total = n * co * oh * ow;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        long long b, o, oy, ox;
        conv_coords<NHWC>(e, co, oh, ow, &b, &o, &oy, &ox);
        const long long g = o / cog;
        A s = has_bias ? tocha::to_compute(bias[o]) : (A)0;
        for (long long i = 0; i < cg; ++i) {
            const T *wp = w + (o * cg + i) * KH * KW;
#pragma unroll
            for (int ky = 0; ky < KH; ++ky) {
                const long long iy = oy * SH - PH + ky * DH;
                if (iy < 0 || iy >= h) continue;
#pragma unroll
                for (int kx = 0; kx < KW; ++kx) {
                    const long long ix = ox * SW - PW + kx * DW;
                    if (ix < 0 || ix >= wd) continue;
                    s = fma(tocha::to_compute(x[conv_at<NHWC>(b, g * cg + i, iy, ix, c, h, wd)]),
                            tocha::to_compute(wp[ky * KW + kx]), s);
                }
            }
        }
        y[e] = tocha::from_compute<T>(epi.apply(s, e, o));
    }
}

// dx [n, c, h, w]: each element the sum over its group's output channels and the window
// positions that read it of dy w, in the order (output channel, ky, kx), plus bias[channel]
// where has_bias (a transposed convolution's forward).
CONV_TEMPLATE
__device__ __forceinline__ void conv_gather(const T *dy, const T *w, const T *bias, T *dx, long long n,
                                            long long c, long long h, long long wd, long long co,
                                            long long oh, long long ow, int has_bias)
{
    typedef typename tocha::compute<T>::type A;
    const long long cg = c / G, cog = co / G, total = n * c * h * wd;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        long long b, ci, iy, ix;
        conv_coords<NHWC>(e, c, h, wd, &b, &ci, &iy, &ix);
        const long long g = ci / cg, i = ci % cg;
        A s = has_bias ? tocha::to_compute(bias[ci]) : (A)0;
        for (long long o = g * cog; o < (g + 1) * cog; ++o) {
            const T *wp = w + (o * cg + i) * KH * KW;
#pragma unroll
            for (int ky = 0; ky < KH; ++ky) {
                const long long ty = iy + PH - ky * DH;
                if (ty < 0 || ty % SH != 0 || ty / SH >= oh) continue;
#pragma unroll
                for (int kx = 0; kx < KW; ++kx) {
                    const long long tx = ix + PW - kx * DW;
                    if (tx < 0 || tx % SW != 0 || tx / SW >= ow) continue;
                    s = fma(tocha::to_compute(dy[conv_at<NHWC>(b, o, ty / SH, tx / SW, co, oh, ow)]),
                            tocha::to_compute(wp[ky * KW + kx]), s);
                }
            }
        }
        dx[e] = tocha::from_compute<T>(s);
    }
}

CONV_TEMPLATE
__device__ void tocha_conv2d_backward_data(const T *dy, const T *w, T *dx, long long n, long long c,
                                           long long h, long long wd, long long co, long long oh,
                                           long long ow)
{
    conv_gather<CONV_ARGS>(dy, w, dx, dx, n, c, h, wd, co, oh, ow, 0);
}

// A transposed convolution's forward: y [n, c, h, w] (c its out_channels) from x [n, co, oh,
// ow] (co its in_channels) and weight [co, c / G, KH, KW], plus bias [c] where has_bias.
CONV_TEMPLATE
__device__ void tocha_conv_transpose2d_forward(const T *x, const T *w, const T *bias, T *y, long long n,
                                               long long c, long long h, long long wd, long long co,
                                               long long oh, long long ow, int has_bias)
{
    conv_gather<CONV_ARGS>(x, w, bias, y, n, c, h, wd, co, oh, ow, has_bias);
}

// Windows of up to this many taps keep a thread's sums of every tap in registers
// (tocha_conv2d_backward_weight); wider ones take a CTA a weight element.
#define CONV_DW_TAPS_IN_REGISTERS 64

// The direct weight gradient's windows held in registers: one CTA an (out, in) channel pair, its
// threads striding over the (sample, oy, ox) terms, each term's dy read once and multiplied
// into all KH x KW taps (x's neighbouring reads shared through the caches); each tap's sum
// reduced over the warp by shuffles and over the CTA's warps in warp order (deterministic).
CONV_TEMPLATE
__device__ void conv_weight_grad_pair(const T *x, const T *dy, T *dw, long long o, long long i, long long n,
                                      long long c, long long h, long long wd, long long co, long long oh,
                                      long long ow)
{
    typedef typename tocha::compute<T>::type A;
    // (1 where the window is too wide: that instance is never called, and holds nothing)
    constexpr int TAPS = KH * KW <= CONV_DW_TAPS_IN_REGISTERS ? KH * KW : 1;
    if (TAPS != KH * KW) return;
    __shared__ A part[32][TAPS];
    const long long cg = c / G, g = o / (co / G), terms = n * oh * ow;
    A acc[TAPS];
#pragma unroll
    for (int t = 0; t < TAPS; ++t) acc[t] = (A)0;
    for (long long e = threadIdx.x; e < terms; e += blockDim.x) {
        const long long ox = e % ow, r = e / ow, oy = r % oh, b = r / oh;
        const A d = tocha::to_compute(dy[conv_at<NHWC>(b, o, oy, ox, co, oh, ow)]);
        const long long iy0 = oy * SH - PH, ix0 = ox * SW - PW;
#pragma unroll
        for (int ky = 0; ky < KH; ++ky) {
            const long long iy = iy0 + ky * DH;
            if (iy < 0 || iy >= h) continue;
#pragma unroll
            for (int kx = 0; kx < KW; ++kx) {
                const long long ix = ix0 + kx * DW;
                if (ix < 0 || ix >= wd) continue;
                acc[(ky * KW + kx) % TAPS] = fma(
                    d, tocha::to_compute(x[conv_at<NHWC>(b, g * cg + i, iy, ix, c, h, wd)]), acc[(ky * KW + kx) % TAPS]);
            }
        }
    }
    const unsigned warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
    for (int t = 0; t < TAPS; ++t) {
        A v = acc[t];
        for (int s = 16; s > 0; s /= 2) v += tocha::shfl_xor(v, s);
        if (threadIdx.x % 32 == 0) part[warp][t] = v;
    }
    __syncthreads();
    for (unsigned t = threadIdx.x; t < (unsigned)TAPS; t += blockDim.x) {
        A v = part[0][t];
        for (unsigned w = 1; w < warps; ++w) v += part[w][t];
        dw[(o * cg + i) * TAPS + t] = tocha::from_compute<T>(v);
    }
    __syncthreads(); // part is reused by the CTA's next pair
}

// dw [co, c / G, KH, KW]: CTAs stride over the weight's (out, in) pairs (conv_weight_grad_pair:
// windows of up to CONV_DW_TAPS_IN_REGISTERS taps, a launch of at most a CTA a pair and a bias
// sum) or its elements (each CTA's threads over the (sample, oy, ox) terms dy x: wider windows,
// and too few pairs to fill the GPU, the launch's grid a CTA an element); with has_bias, the
// CTAs past those take the bias gradient, the sum of dy over (sample, oy, ox) an output
// channel. Either way each sum's terms come in the same order. The launch's CTAs:
// tocha.ops.conv2d's weight_grad_ctas.
CONV_TEMPLATE
__device__ void tocha_conv2d_backward_weight(const T *x, const T *dy, T *dw, T *dbias, long long n,
                                             long long c, long long h, long long wd, long long co,
                                             long long oh, long long ow, int has_bias)
{
    typedef typename tocha::compute<T>::type A;
    // The launch says which: a grid of at most the pairs (and bias sums) asks for pairs.
    const long long cg = c / G, cog = co / G;
    const bool pairs = KH * KW <= CONV_DW_TAPS_IN_REGISTERS && gridDim.x <= co * cg + (has_bias ? co : 0);
    const long long weights = co * cg * (pairs ? 1 : KH * KW);
    const long long items = weights + (has_bias ? co : 0), terms = n * oh * ow;
    for (long long q = blockIdx.x; q < items; q += gridDim.x) {
        if (pairs && q < weights) {
            conv_weight_grad_pair<CONV_ARGS>(x, dy, dw, q / cg, q % cg, n, c, h, wd, co, oh, ow);
            continue;
        }
        A s = (A)0;
        if (q < weights) {
            const int kx = (int)(q % KW), ky = (int)(q / KW % KH);
            const long long i = q / (KH * KW) % cg, o = q / (KH * KW * cg), g = o / cog;
            for (long long e = threadIdx.x; e < terms; e += blockDim.x) {
                const long long ox = e % ow, t = e / ow, oy = t % oh, b = t / oh;
                const long long iy = oy * SH - PH + ky * DH, ix = ox * SW - PW + kx * DW;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                s = fma(tocha::to_compute(dy[conv_at<NHWC>(b, o, oy, ox, co, oh, ow)]),
                        tocha::to_compute(x[conv_at<NHWC>(b, g * cg + i, iy, ix, c, h, wd)]), s);
            }
        } else {
            const long long o = q - weights;
            for (long long e = threadIdx.x; e < terms; e += blockDim.x) {
                const long long ox = e % ow, t = e / ow, oy = t % oh, b = t / oh;
                s += tocha::to_compute(dy[conv_at<NHWC>(b, o, oy, ox, co, oh, ow)]);
            }
        }
        s = tocha::team_sum(s, blockDim.x, true);
        if (threadIdx.x == 0) {
            if (q < weights)
                dw[q] = tocha::from_compute<T>(s);
            else
                dbias[q - weights] = tocha::from_compute<T>(s);
        }
    }
}

// dbias [co]: one CTA an output channel, the sum of dy [n, co, plane] (NHWC: [n, plane, co]) over
// its samples and plane (a transposed convolution's bias gradient, whose dy is not the weight
// kernel's).
template <typename T, int NHWC>
__device__ void tocha_conv2d_backward_bias(const T *dy, T *dbias, long long n, long long co,
                                           long long plane)
{
    typedef typename tocha::compute<T>::type A;
    const long long terms = n * plane;
    for (long long o = blockIdx.x; o < co; o += gridDim.x) {
        A s = (A)0;
        for (long long e = threadIdx.x; e < terms; e += blockDim.x) {
            const long long b = e / plane, p = e % plane;
            s += tocha::to_compute(dy[NHWC ? (b * plane + p) * co + o : (b * co + o) * plane + p]);
        }
        s = tocha::team_sum(s, blockDim.x, true);
        if (threadIdx.x == 0) dbias[o] = tocha::from_compute<T>(s);
    }
}

// dst = src, count elements: the backward's d residual of a convolution whose epilogue adds a
// residual and no activation (dz = dy).
template <typename T> __device__ void tocha_conv2d_copy(const T *src, T *dst, long long count)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count; e += stride)
        dst[e] = src[e];
}
