// variance.cu: the variance of x viewed as [outer, n, inner] along n, divided by n - correction,
// for each of the outer x inner outputs, in one launch: each output's mean, then the sum of
// squared deviations from it (two reads of its elements, the second from cache), as the
// two-pass formula keeps its accuracy. Halves compute in f32, f64 in f64.
//
// Mappings, chosen by the host from the shape (as softmax.cu's): rows 0, a thread an output
// walking n with stride inner; rows 32, a warp a row; rows -1, a CTA a row.

template <typename A> __device__ __forceinline__ A var_team_sum(A v, bool cta)
{
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (!cta) return v;
    __shared__ A part[32];
    const unsigned lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[0];
    for (unsigned w = 1; w < warps; ++w) v += part[w];
    __syncthreads();
    return v;
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
    const unsigned team = cta ? blockDim.x : 32u, member = cta ? threadIdx.x : threadIdx.x % 32;
    const long long row = cta ? (long long)blockIdx.x : (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= outer) return; // a whole CTA, or a whole warp
    const T *p = x + row * n;
    A s = (A)0;
    for (long long j = member; j < n; j += team) s += tocha::to_compute(p[j]);
    const A mean = var_team_sum(s, cta) / (A)n;
    A q = (A)0;
    for (long long j = member; j < n; j += team) {
        const A d = tocha::to_compute(p[j]) - mean;
        q += d * d;
    }
    q = var_team_sum(q, cta);
    if (member == 0) y[row] = tocha::from_compute<T>(q / (A)divisor);
}
