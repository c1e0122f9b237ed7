// variance.cu: the variance of x viewed as [outer, n, inner] along n, divided by n - correction,
// for each of the outer x inner outputs, in one launch. Halves compute in f32, f64 in f64.
// Rows (inner == 1) take one read: each lane keeps Welford's running count, mean and sum of
// squared deviations over its elements, and a team merges its lanes' triples (Chan's
// formula), which keeps the accuracy of the two-pass formula without a second read.
// Columns (inner > 1) take each output's mean, then the sum of squared deviations from it (the
// second read from cache).
//
// Mappings, chosen by the host from the shape (as softmax.cu's): rows 0, a thread an output
// walking n with stride inner; rows 1 to 32, that many lanes of a warp a row; rows -1, a CTA a
// row, reading it in 16-byte groups (tocha.cuh's row_each).

// A running (count, mean, sum of squared deviations from the mean), shuffled as three numbers.
template <typename A> struct var_moments {
    long long n;
    A mean, m2;
};
template <typename A> __device__ __forceinline__ var_moments<A> shfl_xor(var_moments<A> v, int o)
{
    var_moments<A> r;
    r.n = tocha::shfl_xor(v.n, o), r.mean = tocha::shfl_xor(v.mean, o), r.m2 = tocha::shfl_xor(v.m2, o);
    return r;
}

template <typename A> __device__ __forceinline__ var_moments<A> var_merge(var_moments<A> a, var_moments<A> b)
{
    if (b.n == 0) return a;
    if (a.n == 0) return b;
    var_moments<A> r;
    r.n = a.n + b.n;
    const A delta = b.mean - a.mean, share = (A)b.n / (A)r.n;
    r.mean = a.mean + delta * share;
    r.m2 = a.m2 + b.m2 + delta * delta * (A)a.n * share;
    return r;
}

template <typename T>
__device__ void tocha_variance(const T *x, T *y, long long outer, long long n, long long inner, double divisor, int rows)
{
    typedef typename tocha::compute<T>::type A;
    if (rows == 0) {
        const long long stride = (long long)blockDim.x * gridDim.x;
        for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < outer * inner; t += stride) {
            const long long o = t / inner, k = t - o * inner, base = o * n * inner + k;
            A s = (A)0;
            for (long long j = 0; j < n; ++j) s += tocha::to_compute(x[base + j * inner]);
            const A mean = s / (A)n;
            A q = (A)0;
            for (long long j = 0; j < n; ++j) {
                const A d = tocha::to_compute(x[base + j * inner]) - mean;
                q += d * d;
            }
            y[t] = tocha::from_compute<T>(q / (A)divisor);
        }
        return;
    }
    const bool cta = rows < 0;
    long long row;
    unsigned member, team;
    tocha::team_of(rows, &row, &member, &team);
    if (cta && row >= outer) return;
    const bool live = row < outer; // a team of a warp past the end stays for the shuffles
    var_moments<A> v;
    v.n = 0, v.mean = (A)0, v.m2 = (A)0;
    if (live)
        tocha::row_each(x + row * n, n, member, team, [&](T e, long long) {
            const A value = tocha::to_compute(e), d = value - v.mean;
            v.n += 1;
            v.mean += d / (A)v.n;
            v.m2 += d * (value - v.mean);
        });
    v = tocha::team_combine(v, team, cta, [](var_moments<A> a, var_moments<A> b) { return var_merge(a, b); });
    if (live && member == 0) y[row] = tocha::from_compute<T>(v.m2 / (A)divisor);
}
