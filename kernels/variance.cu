// variance.cu: the variance of x viewed as [outer, n, inner] along n, divided by n - correction,
// for each of the outer x inner outputs, in one launch. Halves compute in f32, f64 in f64.
// Rows (inner == 1) take one read: each lane keeps Welford's running count, mean and sum of
// squared deviations over its elements, and a team merges its lanes' triples (Chan's
// formula; tocha.cuh's moments), which keeps the accuracy of the two-pass formula without a
// second read.
// Columns (inner > 1) take each output's mean, then the sum of squared deviations from it (the
// second read from cache).
//
// Mappings, chosen by the host from the shape (as softmax.cu's): rows 0, a thread an output
// walking n with stride inner; rows 1 to 32, that many lanes of a warp a row; rows -1, a CTA a
// row, reading it in 16-byte groups (tocha.cuh's row_each).

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
    tocha::moments<A> v = tocha::no_moments<A>();
    if (live) tocha::row_each(x + row * n, n, member, team, [&](T e, long long) { tocha::moments_push(v, tocha::to_compute(e)); });
    v = tocha::team_combine(v, team, cta, [](tocha::moments<A> a, tocha::moments<A> b) { return tocha::moments_merge(a, b); });
    if (live && member == 0) y[row] = tocha::from_compute<T>(v.m2 / (A)divisor);
}
