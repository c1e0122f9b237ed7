// class_loss.cu: cross entropy (LOG_INPUT 0: from logits, through log-softmax) and the negative
// log likelihood (LOG_INPUT 1: the input holds log-probabilities) of rows of C classes against
// 1-based i64 class indices, with an ignored index and label smoothing, and the gradient with
// respect to the input. A warp a row, read in 16-byte groups where aligned (tocha.cuh's
// row_each and row_walk); halves compute in f32.
//
// Row i with target t (1 <= t <= C) and smoothing e: loss_i = -(1 - e) logp[t] - (e / C)
// sum_c logp[c]; its gradient, for cross entropy, softmax - (1 - e) onehot(t) - e / C, and for
// NLL -(1 - e) onehot(t) - e / C. A row whose target is the ignored index has loss 0 and
// gradient 0 and does not count. A target outside 1..C and not ignored is an error: the
// kernel records it in `bad` (the row + 1, the first written wins) and the host raises.
//
// phase 0 writes each row's loss, whether it counts (valid, 1 or 0) and, for cross entropy, its
// log-softmax shift (max + log sum exp) in f32 (f64 for f64); phase 1 writes the gradient from
// that shift (one read of the row), each row's scaled by *scale (a device value: 1 / the number of
// rows that count for the mean, computed on the device between the phases) times dy_i for
// reduction none (dy: per-row upstream gradients, or null-free stand-in with dy_stride 0).

__device__ __forceinline__ float cl_exp(float v) { return expf(v); }
__device__ __forceinline__ double cl_exp(double v) { return exp(v); }
__device__ __forceinline__ float cl_log(float v) { return logf(v); }
__device__ __forceinline__ double cl_log(double v) { return log(v); }

template <typename A> __device__ __forceinline__ A cl_warp_sum(A v)
{
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <typename A> __device__ __forceinline__ A cl_warp_max(A v)
{
    for (int o = 16; o > 0; o /= 2) {
        const A w = __shfl_xor_sync(0xffffffffu, v, o);
        v = (w > v || w != w) ? w : v;
    }
    return v;
}

template <typename T, int LOG_INPUT>
__device__ void
tocha_class_loss(const T *x, const long long *target, typename tocha::compute<T>::type *row_loss,
                 typename tocha::compute<T>::type *valid, typename tocha::compute<T>::type *shift, T *dx,
                 const typename tocha::compute<T>::type *scale, const T *dy, long long dy_stride,
                 long long *bad, long long N, long long C, long long ignore_index, double smoothing,
                 int phase)
{
    typedef typename tocha::compute<T>::type A;
    const unsigned lane = threadIdx.x % 32;
    const long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    const T *p = x + row * C;
    const long long t = target[row];
    const bool ignored = t == ignore_index;
    if (!ignored && (t < 1 || t > C)) {
        if (lane == 0) atomicCAS((unsigned long long *)bad, 0ull, (unsigned long long)(row + 1));
        if (phase == 0 && lane == 0) row_loss[row] = (A)0, valid[row] = (A)0;
        return;
    }
    const A e = (A)smoothing;
    // The log-softmax's shift: the row's maximum and log of the sum of exp(x - max), found in
    // phase 0 and kept for phase 1.
    A m = (A)0, lse = (A)0;
    if (!LOG_INPUT && phase == 1) {
        m = shift[row];
    } else if (!LOG_INPUT) {
        A mx = -tocha::infinity<A>();
        tocha::row_each(p, C, lane, 32, [&](T el, long long) {
            const A v = tocha::to_compute(el);
            mx = (v > mx || v != v) ? v : mx;
        });
        m = cl_warp_max(mx);
        A s = (A)0;
        tocha::row_each(p, C, lane, 32,
                        [&](T el, long long) { s += cl_exp(tocha::to_compute(el) - m); });
        lse = cl_log(cl_warp_sum(s));
    }
    if (phase == 0) {
        A all = (A)0;
        if (e != (A)0)
            tocha::row_each(p, C, lane, 32,
                            [&](T v, long long) { all += tocha::to_compute(v) - m - lse; });
        all = cl_warp_sum(all);
        if (lane == 0) {
            if (!LOG_INPUT) shift[row] = m + lse;
            if (ignored) {
                row_loss[row] = (A)0, valid[row] = (A)0;
            } else {
                const A lp = tocha::to_compute(p[t - 1]) - m - lse;
                row_loss[row] = -((A)1 - e) * lp - e / (A)C * all;
                valid[row] = (A)1;
            }
        }
        return;
    }
    const A k = ignored ? (A)0 : *scale * (dy_stride ? tocha::to_compute(dy[row * dy_stride]) : (A)1);
    tocha::row_walk<1, true>(p, p, dx + row * C, C, lane, 32, [&](T v, T, long long c) {
        A g = -e / (A)C - (c == t - 1 ? (A)1 - e : (A)0);
        if (!LOG_INPUT) g += cl_exp(tocha::to_compute(v) - m - lse);
        return tocha::from_compute<T>(g * k);
    });
}
