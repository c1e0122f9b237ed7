// conv2d_depthwise.cu: depthwise 2-D convolution (groups = in = out channels) of NHWC images,
// memory-bound: y [n, oh, ow, C] = x [n, h, w, C] convolved channel by channel with the weight
// [C, 1, KH, KW] (+ bias [C]), its dx, and its weight and bias gradients. A thread takes V
// consecutive channels of one pixel (V = 16 / sizeof(T) where C is a multiple of it: one 16-byte
// load of x, dy or the weight; else 1), so a warp's loads are consecutive along the channels
// and a pixel's neighbours, which the other window positions read again, come from L1. The
// weight is relaid once a call to [KH, KW, C] (tocha_conv2d_dw_weight_rs), its channels
// consecutive like x's. Window, stride, padding and dilation are compile-time constants; sums
// in T's compute type (f32 for halves, f64 for f64) in the order (ky, kx), rounded once.
// After activation.cuh and epilogue.cuh (the forward's epilogue), in the source.

// V elements of T, loaded or stored whole (V sizeof(T) = 16, or V = 1).
template <typename T, int V> struct dw_vec {
    T v[V];
};
template <typename T, int V> __device__ __forceinline__ dw_vec<T, V> dw_load(const T *p)
{
    dw_vec<T, V> r;
    if (V * sizeof(T) == 16) {
        unsigned words[4];
        tocha::load_words<16>(p, words);
        memcpy(r.v, words, 16);
    } else {
#pragma unroll
        for (int i = 0; i < V; ++i) r.v[i] = p[i];
    }
    return r;
}
template <typename T, int V> __device__ __forceinline__ void dw_store(T *p, const dw_vec<T, V> &r)
{
    if (V * sizeof(T) == 16) {
        uint4 words;
        memcpy(&words, r.v, 16);
        *(uint4 *)p = words;
    } else {
#pragma unroll
        for (int i = 0; i < V; ++i) p[i] = r.v[i];
    }
}

// The weight [C, 1, KH, KW] as [KH, KW, C]: one thread an element, writes consecutive.
template <typename T, int KH, int KW> __device__ void tocha_conv2d_dw_weight_rs(const T *w, T *rs, int c)
{
    const long long total = (long long)KH * KW * c;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride)
        rs[e] = w[e % c * (KH * KW) + e / c];
}

// y through the epilogue F (bias, residual [n, oh, ow, C] and grad as epilogue.cuh's): a thread
// V channels of one output pixel, grid-striding over n oh ow C / V of them.
template <typename T, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int V, typename F>
__device__ void tocha_conv2d_dw_forward(const T *x, const T *rs, const T *bias, T *y, long long n, int c,
                                        int h, int w, int oh, int ow, int has_bias, const T *residual,
                                        const T *grad, int epilogue)
{
    typedef typename tocha::compute<T>::type A;
    const tocha_epilogue<T, F> epi =
        tocha_epilogue_of<T, F>(bias, has_bias, residual, grad, epilogue, 0);
    const int vectors = c / V;
    const long long total = n * oh * ow * vectors, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        const int c0 = (int)(e % vectors) * V;
        const long long p = e / vectors;
        const int ox = (int)(p % ow), oy = (int)(p / ow % oh);
        const long long b = p / ((long long)ow * oh);
        A acc[V];
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = (A)0;
#pragma unroll
        for (int ky = 0; ky < KH; ++ky) {
            const int iy = oy * SH - PH + ky * DH;
            if ((unsigned)iy >= (unsigned)h) continue;
#pragma unroll
            for (int kx = 0; kx < KW; ++kx) {
                const int ix = ox * SW - PW + kx * DW;
                if ((unsigned)ix >= (unsigned)w) continue;
                const dw_vec<T, V> xv = dw_load<T, V>(x + ((b * h + iy) * w + ix) * c + c0);
                const dw_vec<T, V> wv = dw_load<T, V>(rs + (ky * KW + kx) * c + c0);
#pragma unroll
                for (int i = 0; i < V; ++i)
                    acc[i] = fma(tocha::to_compute(xv.v[i]), tocha::to_compute(wv.v[i]), acc[i]);
            }
        }
        dw_vec<T, V> out;
#pragma unroll
        for (int i = 0; i < V; ++i)
            out.v[i] = tocha::from_compute<T>(epi.apply(acc[i], p * c + c0 + i, c0 + i));
        dw_store<T, V>(y + p * c + c0, out);
    }
}

// dx [n, h, w, C]: a thread V channels of one input pixel, the sum over the window positions
// whose output pixels read it of dy w, in the order (ky, kx).
template <typename T, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int V>
__device__ void tocha_conv2d_dw_backward_data(const T *dy, const T *rs, T *dx, long long n, int c, int h,
                                              int w, int oh, int ow)
{
    typedef typename tocha::compute<T>::type A;
    const int vectors = c / V;
    const long long total = n * h * w * vectors, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        const int c0 = (int)(e % vectors) * V;
        const long long p = e / vectors;
        const int ix = (int)(p % w), iy = (int)(p / w % h);
        const long long b = p / ((long long)w * h);
        A acc[V];
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = (A)0;
#pragma unroll
        for (int ky = 0; ky < KH; ++ky) {
            const int ty = iy + PH - ky * DH;
            if (ty < 0 || ty % SH != 0 || ty / SH >= oh) continue;
#pragma unroll
            for (int kx = 0; kx < KW; ++kx) {
                const int tx = ix + PW - kx * DW;
                if (tx < 0 || tx % SW != 0 || tx / SW >= ow) continue;
                const dw_vec<T, V> dv = dw_load<T, V>(dy + ((b * oh + ty / SH) * ow + tx / SW) * c + c0);
                const dw_vec<T, V> wv = dw_load<T, V>(rs + (ky * KW + kx) * c + c0);
#pragma unroll
                for (int i = 0; i < V; ++i)
                    acc[i] = fma(tocha::to_compute(dv.v[i]), tocha::to_compute(wv.v[i]), acc[i]);
            }
        }
        dw_vec<T, V> out;
#pragma unroll
        for (int i = 0; i < V; ++i) out.v[i] = tocha::from_compute<T>(acc[i]);
        dw_store<T, V>(dx + p * c + c0, out);
    }
}

// The weight and bias gradients' partial sums: CTAs of 256 threads, 32 lanes of U consecutive
// channels (U = V, or fewer so that a thread's KH KW U + U sums fit in registers) by 8 rows of
// output pixels; CTA (x, y) takes channels [32 U x, 32 U (x + 1)) and the pixels p = y + k
// gridDim.y (k = 0, 1, ...), each row of threads every eighth of those. The 8 rows' sums are
// added in shared memory in row order and the CTA writes partial [gridDim.y][KH KW + 1][C]
// (T's compute type; the last row of each slab dbias's), which tocha_conv2d_dw_grad_sum adds.
template <typename T, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW, int U>
__device__ void tocha_conv2d_dw_grad_partial(const T *x, const T *dy,
                                             typename tocha::compute<T>::type *partial, long long n,
                                             int c, int h, int w, int oh, int ow)
{
    typedef typename tocha::compute<T>::type A;
    __shared__ A rows[8][32 * U];
    const int lane = threadIdx.x % 32, row = threadIdx.x / 32;
    const int c0 = (blockIdx.x * 32 + lane) * U;
    const bool channels = c0 < c;
    const long long pixels = n * oh * ow;
    A acc[KH * KW + 1][U];
#pragma unroll
    for (int k = 0; k < KH * KW + 1; ++k)
#pragma unroll
        for (int i = 0; i < U; ++i) acc[k][i] = (A)0;
    if (channels) {
        for (long long p = blockIdx.y + (long long)row * gridDim.y; p < pixels; p += 8LL * gridDim.y) {
            const int ox = (int)(p % ow), oy = (int)(p / ow % oh);
            const long long b = p / ((long long)ow * oh);
            const dw_vec<T, U> dv = dw_load<T, U>(dy + p * c + c0);
#pragma unroll
            for (int i = 0; i < U; ++i) acc[KH * KW][i] += tocha::to_compute(dv.v[i]);
#pragma unroll
            for (int ky = 0; ky < KH; ++ky) {
                const int iy = oy * SH - PH + ky * DH;
                if ((unsigned)iy >= (unsigned)h) continue;
#pragma unroll
                for (int kx = 0; kx < KW; ++kx) {
                    const int ix = ox * SW - PW + kx * DW;
                    if ((unsigned)ix >= (unsigned)w) continue;
                    const dw_vec<T, U> xv = dw_load<T, U>(x + ((b * h + iy) * w + ix) * c + c0);
#pragma unroll
                    for (int i = 0; i < U; ++i)
                        acc[ky * KW + kx][i] = fma(tocha::to_compute(dv.v[i]),
                                                   tocha::to_compute(xv.v[i]), acc[ky * KW + kx][i]);
                }
            }
        }
    }
    A *slab = partial + (long long)blockIdx.y * (KH * KW + 1) * c;
#pragma unroll
    for (int k = 0; k < KH * KW + 1; ++k) {
#pragma unroll
        for (int i = 0; i < U; ++i) rows[row][lane * U + i] = acc[k][i];
        __syncthreads();
        for (int j = threadIdx.x; j < 32 * U; j += blockDim.x) {
            A s = rows[0][j];
            for (int r = 1; r < 8; ++r) s += rows[r][j];
            const int ch = blockIdx.x * 32 * U + j;
            if (ch < c) slab[(long long)k * c + ch] = s;
        }
        __syncthreads();
    }
}

// dweight [C, 1, KH, KW] and, where has_bias, dbias [C]: the sums of the `splits` slabs of
// partial in slab order, rounded once; a thread an element of either.
template <typename T, int KH, int KW>
__device__ void tocha_conv2d_dw_grad_sum(const typename tocha::compute<T>::type *partial, T *dweight,
                                         T *dbias, int c, int splits, int has_bias)
{
    typedef typename tocha::compute<T>::type A;
    const long long weights = (long long)c * KH * KW, total = weights + (has_bias ? c : 0);
    const long long slab = (long long)(KH * KW + 1) * c, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += stride) {
        // dweight[ch, k] is row k, channel ch of a slab; dbias[ch] its last row
        const long long at =
            e < weights ? e % (KH * KW) * c + e / (KH * KW) : KH * KW * (long long)c + (e - weights);
        A s = (A)0;
        for (int i = 0; i < splits; ++i) s += partial[i * slab + at];
        if (e < weights)
            dweight[e] = tocha::from_compute<T>(s);
        else
            dbias[e - weights] = tocha::from_compute<T>(s);
    }
}
