// variance.cu: the variance of x viewed as [outer, n, inner] along n, divided by n - correction,
// for each of the outer x inner outputs, in one launch: each output's mean, then the sum of
// squared deviations from it (two reads of its elements, the second from cache), as the
// two-pass formula keeps its accuracy. Halves compute in f32, f64 in f64.
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
    const T *p = x + (live ? row : 0) * n;
    A s = (A)0;
    if (live) tocha::row_each(p, n, member, team, [&](T v, long long) { s += tocha::to_compute(v); });
    const A mean = tocha::team_sum(s, team, cta) / (A)n;
    A q = (A)0;
    if (live)
        tocha::row_each(p, n, member, team, [&](T v, long long) {
            const A d = tocha::to_compute(v) - mean;
            q += d * d;
        });
    q = tocha::team_sum(q, team, cta);
    if (live && member == 0) y[row] = tocha::from_compute<T>(q / (A)divisor);
}
