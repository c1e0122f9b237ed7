// batch_norm.cu: 2-D batch normalisation of x [N, C, plane...] per channel, forward and
// backward, in training mode (the batch's statistics; the running ones updated) or in
// inference mode (the running statistics). AFFINE (weight and bias) and RUNNING (running mean
// and variance kept) are compile-time constants; halves compute in f32. The workspace `ws`
// holds 4 values of A a channel: mean, rstd and, in the backward, sum(dy) and sum(dy xhat).
//
// Forward, two launches of one kernel: phase 0 (training only), a CTA a channel, the channel's
// mean and biased variance over N x plane (two reads), kept as mean and rstd = 1 / sqrt(var +
// eps), and the running statistics moved by momentum towards the mean and the unbiased
// variance (PyTorch's rule); phase 1, a thread an element, y = (x - mean) rstd w + b, with the
// batch's statistics (training) or the running ones (inference).
// Backward: phase 0, a CTA a channel, the statistics again (training; the running ones in
// inference), sum(dy) and sum(dy xhat), the weight's and bias's gradients; phase 1, a thread an
// element: training dx = w rstd (dy - sum(dy) / M - xhat sum(dy xhat) / M) with M = N x plane;
// inference dx = w rstd dy.

__device__ __forceinline__ float bn_rsqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double bn_rsqrt(double v) { return 1.0 / sqrt(v); }

template <typename A> __device__ __forceinline__ A bn_block_sum(A v)
{
    __shared__ A part[32];
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    const unsigned lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[0];
    for (unsigned w = 1; w < warps; ++w) v += part[w];
    __syncthreads();
    return v;
}

// The sum over channel c's elements of f(value) (a CTA's threads striding N x plane).
#define BN_CHANNEL_LOOP(i, value, expr)                                                             \
    for (long long k = threadIdx.x; k < N * plane; k += blockDim.x) {                               \
        const long long i = (k / plane) * C * plane + c * plane + k % plane;                        \
        const A value = tocha::to_compute(x[i]);                                                    \
        expr;                                                                                       \
    }

template <typename T, int AFFINE, int RUNNING>
__device__ void tocha_batch_norm(const T *x, const T *w, const T *b, T *running_mean, T *running_var, T *y,
                                 unsigned char *ws, long long N, long long C, long long plane, double eps,
                                 double momentum, int training, int phase)
{
    typedef typename tocha::compute<T>::type A;
    A *st = (A *)ws;
    if (phase == 0) {
        const long long c = blockIdx.x;
        if (c >= C) return;
        const long long M = N * plane;
        A s = (A)0;
        BN_CHANNEL_LOOP(i, v, s += v)
        const A mean = bn_block_sum(s) / (A)M;
        A q = (A)0;
        BN_CHANNEL_LOOP(i, v, q += (v - mean) * (v - mean))
        const A var = bn_block_sum(q) / (A)M;
        if (threadIdx.x == 0) {
            st[4 * c] = mean, st[4 * c + 1] = bn_rsqrt(var + (A)eps);
            if (RUNNING) {
                const A m = (A)momentum, unbiased = M > 1 ? var * (A)M / (A)(M - 1) : var;
                running_mean[c] = tocha::from_compute<T>(((A)1 - m) * tocha::to_compute(running_mean[c]) + m * mean);
                running_var[c] = tocha::from_compute<T>(((A)1 - m) * tocha::to_compute(running_var[c]) + m * unbiased);
            }
        }
        return;
    }
    const long long total = N * C * plane, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long c = (e / plane) % C;
        A mean, rstd;
        if (training) {
            mean = st[4 * c], rstd = st[4 * c + 1];
        } else {
            mean = tocha::to_compute(running_mean[c]), rstd = bn_rsqrt(tocha::to_compute(running_var[c]) + (A)eps);
        }
        A v = (tocha::to_compute(x[e]) - mean) * rstd;
        if (AFFINE) v = v * tocha::to_compute(w[c]) + tocha::to_compute(b[c]);
        y[e] = tocha::from_compute<T>(v);
    }
}

template <typename T, int AFFINE, int RUNNING>
__device__ void tocha_batch_norm_backward(const T *x, const T *w, const T *running_mean, const T *running_var, const T *dy,
                                          T *dx, T *dw, T *db, unsigned char *ws, long long N, long long C,
                                          long long plane, double eps, int training, int phase)
{
    typedef typename tocha::compute<T>::type A;
    A *st = (A *)ws;
    const long long M = N * plane;
    if (phase == 0) {
        const long long c = blockIdx.x;
        if (c >= C) return;
        A mean, rstd;
        if (training) {
            A s = (A)0;
            BN_CHANNEL_LOOP(i, v, s += v)
            mean = bn_block_sum(s) / (A)M;
            A q = (A)0;
            BN_CHANNEL_LOOP(i, v, q += (v - mean) * (v - mean))
            rstd = bn_rsqrt(bn_block_sum(q) / (A)M + (A)eps);
        } else {
            mean = tocha::to_compute(running_mean[c]), rstd = bn_rsqrt(tocha::to_compute(running_var[c]) + (A)eps);
        }
        A sg = (A)0, sgx = (A)0;
        BN_CHANNEL_LOOP(i, v, {
            const A g = tocha::to_compute(dy[i]);
            sg += g;
            sgx += g * (v - mean) * rstd;
        })
        sg = bn_block_sum(sg);
        sgx = bn_block_sum(sgx);
        if (threadIdx.x == 0) {
            st[4 * c] = mean, st[4 * c + 1] = rstd, st[4 * c + 2] = sg, st[4 * c + 3] = sgx;
            if (AFFINE) dw[c] = tocha::from_compute<T>(sgx), db[c] = tocha::from_compute<T>(sg);
        }
        return;
    }
    const long long total = N * C * plane, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long c = (e / plane) % C;
        const A mean = st[4 * c], rstd = st[4 * c + 1];
        const A scale = AFFINE ? tocha::to_compute(w[c]) * rstd : rstd;
        const A g = tocha::to_compute(dy[e]);
        A d;
        if (training) {
            const A xhat = (tocha::to_compute(x[e]) - mean) * rstd;
            d = scale * (g - st[4 * c + 2] / (A)M - xhat * st[4 * c + 3] / (A)M);
        } else {
            d = scale * g;
        }
        dx[e] = tocha::from_compute<T>(d);
    }
}
