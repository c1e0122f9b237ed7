// softmax.cu: softmax and log-softmax of x viewed as [outer, n, inner] along n, and their
// gradients. LOG (0 softmax, 1 log-softmax) and the dtype T are compile-time constants; halves
// compute in f32, f64 in f64.
//
// Forward: one read computes each row's maximum m and sum s of exp(x - m) together (a running
// pair, rescaled when the maximum grows), a second read writes exp(x - m) / s or x - m - log s.
// Backward, with y the forward's output: softmax dx = y (dy - sum(dy y)); log-softmax
// dx = dy - exp(y) sum(dy).
//
// Mappings, chosen by the host from the shape: rows 0, a thread a (outer, inner) column walking
// n with stride inner (inner > 1); rows 32, a warp a row (inner == 1, shorter rows); rows -1, a
// CTA a row (inner == 1, long rows), the lanes' partials combined through shuffles and shared
// memory.

__device__ __forceinline__ float sm_exp(float v) { return expf(v); }
__device__ __forceinline__ double sm_exp(double v) { return exp(v); }
__device__ __forceinline__ float sm_log(float v) { return logf(v); }
__device__ __forceinline__ double sm_log(double v) { return log(v); }

// (m, s) merged with (m2, s2): the larger maximum, each sum rescaled to it. A pair with s == 0
// (no element yet) leaves the other as it is (and -inf - -inf never reaches exp).
template <typename A> __device__ __forceinline__ void sm_merge(A &m, A &s, A m2, A s2)
{
    if (s2 == (A)0 && !(m2 != m2)) return;
    if (s == (A)0 && !(m != m)) {
        m = m2, s = s2;
        return;
    }
    const A top = m2 > m || m2 != m2 ? m2 : m;
    s = s * sm_exp(m - top) + s2 * sm_exp(m2 - top);
    m = top;
}

// One element into the running pair.
template <typename A> __device__ __forceinline__ void sm_push(A &m, A &s, A v)
{
    if (s == (A)0 && !(m != m)) {
        m = v, s = (A)1;
        return;
    }
    if (v > m || v != v) {
        s = s * sm_exp(m - v) + (A)1;
        m = v;
    } else {
        s += sm_exp(v - m);
    }
}

// The team's merged pair, in every member (a warp: shuffles; a CTA: shuffles, then shared
// memory across warps).
template <typename A> __device__ __forceinline__ void sm_team_pair(A &m, A &s, bool cta)
{
    for (int o = 16; o > 0; o /= 2) sm_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (!cta) return;
    __shared__ A ms[32], ss[32];
    const unsigned lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) ms[threadIdx.x / 32] = m, ss[threadIdx.x / 32] = s;
    __syncthreads();
    m = ms[0], s = ss[0];
    for (unsigned w = 1; w < warps; ++w) sm_merge(m, s, ms[w], ss[w]);
    __syncthreads(); // the buffers are reused by the next row's call
}

// The team's sum of v, in every member.
template <typename A> __device__ __forceinline__ A sm_team_sum(A v, bool cta)
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

template <int LOG, typename A> __device__ __forceinline__ A sm_value(A v, A m, A s)
{
    return LOG ? v - m - sm_log(s) : sm_exp(v - m) / s;
}

template <typename T, int LOG>
__device__ void tocha_softmax(const T *x, T *y, long long outer, long long n, long long inner, int rows)
{
    typedef typename tocha::compute<T>::type A;
    if (rows == 0) {
        const long long stride = (long long)blockDim.x * gridDim.x;
        for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < outer * inner; t += stride) {
            const long long o = t / inner, k = t - o * inner, base = o * n * inner + k;
            A m = (A)0, s = (A)0;
            for (long long j = 0; j < n; ++j) sm_push(m, s, tocha::to_compute(x[base + j * inner]));
            for (long long j = 0; j < n; ++j)
                y[base + j * inner] = tocha::from_compute<T>(sm_value<LOG>(tocha::to_compute(x[base + j * inner]), m, s));
        }
        return;
    }
    const bool cta = rows < 0;
    const unsigned team = cta ? blockDim.x : 32u, member = cta ? threadIdx.x : threadIdx.x % 32;
    const long long row = cta ? (long long)blockIdx.x : (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= outer) return; // a whole CTA (cta) or a whole warp (the last CTA's spare warps)
    const T *in = x + row * n;
    T *out = y + row * n;
    A m = (A)0, s = (A)0;
    for (long long j = member; j < n; j += team) sm_push(m, s, tocha::to_compute(in[j]));
    sm_team_pair(m, s, cta);
    for (long long j = member; j < n; j += team) out[j] = tocha::from_compute<T>(sm_value<LOG>(tocha::to_compute(in[j]), m, s));
}

// dx from y (the forward's output) and dy.
template <typename T, int LOG>
__device__ void tocha_softmax_backward(const T *y, const T *dy, T *dx, long long outer, long long n, long long inner, int rows)
{
    typedef typename tocha::compute<T>::type A;
    if (rows == 0) {
        const long long stride = (long long)blockDim.x * gridDim.x;
        for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < outer * inner; t += stride) {
            const long long o = t / inner, k = t - o * inner, base = o * n * inner + k;
            A dot = (A)0;
            for (long long j = 0; j < n; ++j) {
                const A g = tocha::to_compute(dy[base + j * inner]);
                dot += LOG ? g : g * tocha::to_compute(y[base + j * inner]);
            }
            for (long long j = 0; j < n; ++j) {
                const A v = tocha::to_compute(y[base + j * inner]), g = tocha::to_compute(dy[base + j * inner]);
                dx[base + j * inner] = tocha::from_compute<T>(LOG ? g - sm_exp(v) * dot : v * (g - dot));
            }
        }
        return;
    }
    const bool cta = rows < 0;
    const unsigned team = cta ? blockDim.x : 32u, member = cta ? threadIdx.x : threadIdx.x % 32;
    const long long row = cta ? (long long)blockIdx.x : (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= outer) return;
    const T *yr = y + row * n, *gr = dy + row * n;
    T *out = dx + row * n;
    A dot = (A)0;
    for (long long j = member; j < n; j += team) {
        const A g = tocha::to_compute(gr[j]);
        dot += LOG ? g : g * tocha::to_compute(yr[j]);
    }
    dot = sm_team_sum(dot, cta);
    for (long long j = member; j < n; j += team) {
        const A v = tocha::to_compute(yr[j]), g = tocha::to_compute(gr[j]);
        out[j] = tocha::from_compute<T>(LOG ? g - sm_exp(v) * dot : v * (g - dot));
    }
}
