// reduction.cu: sum, mean and max of x viewed as [outer, n, inner] over its middle dimension
// (one dimension of a tensor, or n = every element), and their gradients. MODE (0 sum, 1 mean,
// 2 max) and the dtype T are compile-time constants; f16 and bf16 are summed in f32, f64 in f64
// (the accumulator A). max propagates NaN, as PyTorch does.
//
// One kernel, tocha_reduce, does every pass of a reduction; the host plans the passes from the
// shape alone (never from the device), so that a result is the same on every device and on the
// simulator, bit for bit:
// - the rows mapping (inner == 1 and long rows): one CTA per (row, split); its threads stride
//   over the split's part of the row, four partial values each, then a tree in shared memory;
// - the columns mapping (otherwise): one thread per (outer, split, inner) walks its part of n
//   with stride inner (coalesced along inner), four partial values each.
// splits > 1 divides n among CTAs or threads when there are too few outputs to fill the device;
// the pass then writes its partials (in A) to a workspace, and a second pass over that workspace
// viewed as [outer, splits, inner] finishes. Pointers are untyped (u8*): a pass reads T or A and
// writes T or A as x_acc and y_acc say. `copy`, unless it is x itself, gets every element of x
// the pass reads (the bias gradient: dx = dy while db is summed). A pass's output is its total
// divided by `divisor` (the mean's n; 1 otherwise).
//
// tocha_reduce_grad: dx for sum and mean (dy broadcast along n, divided by divisor), one thread a
// dx element; for max the whole dy of an output goes to the first element equal to the maximum
// (NaN to the first NaN) and zeros elsewhere, one thread an output.

template <int MODE, typename A> __device__ __forceinline__ A red_identity()
{
    return MODE == 2 ? -tocha::infinity<A>() : (A)0;
}

template <int MODE, typename A> __device__ __forceinline__ A red_combine(A a, A b)
{
    if (MODE == 2) return (b > a || b != b) ? b : a;
    return a + b;
}

template <typename T> __device__ __forceinline__ typename tocha::compute<T>::type red_load(const T *p, long long i)
{
    return tocha::to_compute(tocha::load_element(p + i));
}

// The CTA's combined value, in the tree order of a shared-memory reduction; true in the one
// thread that holds it (thread 0 on the GPU, the last thread on the simulator, whose threads run
// one after another, so the last one finds every other's value already in buf). blockDim.x is a
// power of two.
template <int MODE, typename A> __device__ __forceinline__ bool red_block(A v, A *buf, A *total)
{
    const unsigned t = threadIdx.x, n = blockDim.x;
    buf[t] = v;
#ifdef TOCHA_SIM
    if (t != n - 1) return false;
    for (unsigned o = n / 2; o > 0; o /= 2)
        for (unsigned i = 0; i < o; ++i) buf[i] = red_combine<MODE>(buf[i], buf[i + o]);
    *total = buf[0];
    return true;
#else
    __syncthreads();
    for (unsigned o = n / 2; o > 0; o /= 2) {
        if (t < o) buf[t] = red_combine<MODE>(buf[t], buf[t + o]);
        __syncthreads();
    }
    *total = buf[0];
    return t == 0;
#endif
}

template <int MODE, typename A, typename TO> __device__ __forceinline__ void red_store(TO *y, long long i, A v, double divisor)
{
    if (MODE == 1) v = v / (A)divisor;
    y[i] = tocha::from_compute<TO>(v);
}

template <int MODE, typename TI, typename TO>
__device__ void red_pass(const TI *x, TO *y, TI *copy, long long outer, long long n, long long inner, long long splits,
                         double divisor, int rows)
{
    typedef typename tocha::compute<TI>::type A;
    const long long part = (n + splits - 1) / splits;
    if (rows) {
#ifdef TOCHA_SIM
        A *buf = (A *)tocha_sim::shared_buffer(1024 * sizeof(A));
#else
        __shared__ A buf[1024];
#endif
        const long long b = blockIdx.x, row = b / splits, s = b - row * splits;
        if (row >= outer) return;
        const long long lo = s * part, hi = lo + part < n ? lo + part : n;
        const TI *in = x + row * n;
        A acc[4] = {red_identity<MODE, A>(), red_identity<MODE, A>(), red_identity<MODE, A>(), red_identity<MODE, A>()};
        const long long step = blockDim.x;
        long long k = lo + threadIdx.x;
        for (; k + 3 * step < hi; k += 4 * step) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                acc[j] = red_combine<MODE>(acc[j], red_load(in, k + j * step));
                if (copy) copy[row * n + k + j * step] = in[k + j * step];
            }
        }
        for (int j = 0; k < hi; k += step, ++j) {
            acc[j & 3] = red_combine<MODE>(acc[j & 3], red_load(in, k));
            if (copy) copy[row * n + k] = in[k];
        }
        A total;
        const A mine = red_combine<MODE>(red_combine<MODE>(acc[0], acc[1]), red_combine<MODE>(acc[2], acc[3]));
        if (red_block<MODE>(mine, buf, &total)) red_store<MODE>(y, row * splits + s, total, divisor);
        return;
    }
    const long long outputs = outer * splits * inner, stride = (long long)blockDim.x * gridDim.x;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < outputs; t += stride) {
        const long long i = t % inner, r = t / inner, s = r % splits, o = r / splits;
        const long long lo = s * part, hi = lo + part < n ? lo + part : n;
        const TI *in = x + o * n * inner + i;
        TI *out = copy ? copy + o * n * inner + i : 0;
        A acc[4] = {red_identity<MODE, A>(), red_identity<MODE, A>(), red_identity<MODE, A>(), red_identity<MODE, A>()};
        long long k = lo;
        for (; k + 3 < hi; k += 4) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                acc[j] = red_combine<MODE>(acc[j], red_load(in, (k + j) * inner));
                if (out) out[(k + j) * inner] = in[(k + j) * inner];
            }
        }
        for (int j = 0; k < hi; ++k, ++j) {
            acc[j] = red_combine<MODE>(acc[j], red_load(in, k * inner));
            if (out) out[k * inner] = in[k * inner];
        }
        const A total = red_combine<MODE>(red_combine<MODE>(acc[0], acc[1]), red_combine<MODE>(acc[2], acc[3]));
        red_store<MODE>(y, (o * splits + s) * inner + i, total, divisor);
    }
}

template <typename T, int MODE>
__device__ void tocha_reduce(const unsigned char *x, int x_acc, unsigned char *y, int y_acc, T *copy, long long outer,
                             long long n, long long inner, long long splits, double divisor, int rows)
{
    typedef typename tocha::compute<T>::type A;
    if ((const unsigned char *)copy == x) copy = 0; // no copy (launch pointers are never null)
    if (!x_acc && !y_acc)
        red_pass<MODE>((const T *)x, (T *)y, copy, outer, n, inner, splits, divisor, rows);
    else if (!x_acc)
        red_pass<MODE>((const T *)x, (A *)y, copy, outer, n, inner, splits, divisor, rows);
    else if (!y_acc)
        red_pass<MODE>((const A *)x, (T *)y, (A *)0, outer, n, inner, splits, divisor, rows);
    else
        red_pass<MODE>((const A *)x, (A *)y, (A *)0, outer, n, inner, splits, divisor, rows);
}

template <typename T, int MODE>
__device__ void tocha_reduce_grad(const T *x, const T *y, const T *dy, T *dx, long long outer, long long n, long long inner,
                                  double divisor)
{
    typedef typename tocha::compute<T>::type A;
    const long long stride = (long long)blockDim.x * gridDim.x, first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (MODE != 2) {
        const long long total = outer * n * inner;
        for (long long e = first; e < total; e += stride) {
            const long long o = e / (n * inner), i = e % inner;
            A g = tocha::to_compute(dy[o * inner + i]);
            if (MODE == 1) g = g / (A)divisor;
            dx[e] = tocha::from_compute<T>(g);
        }
        return;
    }
    const T zero = tocha::from_compute<T>((A)0);
    for (long long t = first; t < outer * inner; t += stride) {
        const long long o = t / inner, i = t % inner;
        const A m = tocha::to_compute(y[t]);
        const bool nan = m != m;
        long long at = n;
        for (long long k = 0; k < n && at == n; ++k) {
            const A v = tocha::to_compute(x[(o * n + k) * inner + i]);
            if (nan ? v != v : v == m) at = k;
        }
        for (long long k = 0; k < n; ++k) dx[(o * n + k) * inner + i] = k == at ? dy[t] : zero;
    }
}
