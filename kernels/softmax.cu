// softmax.cu: softmax and log-softmax of x viewed as [outer, n, inner] along n, and their
// gradients. LOG (0 softmax, 1 log-softmax) and the dtype T are compile-time constants; halves
// compute in f32, f64 in f64.
//
// Forward: a row of at most 8 KB takes its maximum m, then the sum s of exp(x - m), then writes
// exp(x - m) / s or x - m - log s: three reads (the later two from L1). A longer row, and a
// column (inner > 1), keep m and s as a running pair, rescaled when the maximum grows, and read
// their elements twice.
// Backward, with y the forward's output: softmax dx = y (dy - sum(dy y)); log-softmax
// dx = dy - exp(y) sum(dy).
//
// Mappings, chosen by the host from the shape (tensor_reduce.lua's team_mapping): rows 0, a
// thread a (outer, inner) column walking n with stride inner (inner > 1); rows 1 to 32, that
// many lanes of a warp a row (inner == 1, shorter rows); rows -1, a CTA a row (inner == 1, long
// rows). A team reads its row in 16-byte groups (tocha.cuh's row_each, row_map) and combines
// its lanes' partials through shuffles (and shared memory across a CTA's warps).

__device__ __forceinline__ float sm_exp(float v) { return expf(v); }
__device__ __forceinline__ double sm_exp(double v) { return exp(v); }
__device__ __forceinline__ float sm_log(float v) { return logf(v); }
__device__ __forceinline__ double sm_log(double v) { return log(v); }

// exp(a - b) for a <= b, where a and b both -inf (masked elements, none finite yet) give 1, as
// a == b does, not exp(-inf - -inf) = NaN: a row whose first elements are -inf (an attention
// mask) must not turn NaN before its first finite element arrives.
template <typename A> __device__ __forceinline__ A sm_scale(A a, A b)
{
    return a == b && a == -tocha::infinity<A>() ? (A)1 : sm_exp(a - b);
}

// (m, s) merged with (m2, s2): the larger maximum, each sum rescaled to it. A pair with s == 0
// (no element yet) leaves the other as it is.
template <typename A> __device__ __forceinline__ void sm_merge(A &m, A &s, A m2, A s2)
{
    if (s2 == (A)0 && !(m2 != m2)) return;
    if (s == (A)0 && !(m != m)) {
        m = m2, s = s2;
        return;
    }
    const A top = m2 > m || m2 != m2 ? m2 : m;
    s = s * sm_scale(m, top) + s2 * sm_scale(m2, top);
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
        s += sm_scale(v, m);
    }
}

// A running (maximum, sum of exp(x - maximum)) pair, shuffled as two numbers.
template <typename A> struct sm_pair {
    A m, s;
};
template <typename A> __device__ __forceinline__ sm_pair<A> shfl_xor(sm_pair<A> p, int o)
{
    sm_pair<A> r;
    r.m = tocha::shfl_xor(p.m, o), r.s = tocha::shfl_xor(p.s, o);
    return r;
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
    long long row;
    unsigned member, team;
    tocha::team_of(rows, &row, &member, &team);
    if (cta && row >= outer) return; // the whole CTA
    const bool live = row < outer;   // a team of a warp past the end stays for the shuffles
    const T *in = x + (live ? row : 0) * n;
    A top, total;
    if (n * (long long)sizeof(T) <= 8192) {
        // The row's maximum (a NaN sticks), then the sum of exp(x - maximum): three reads of the
        // row, the later two from L1 (a row of at most 8 KB a team stays there), whose exps do
        // not wait on one another as a running pair's do.
        top = -tocha::infinity<A>();
        if (live)
            tocha::row_each(in, n, member, team, [&](T v, long long) {
                const A a = tocha::to_compute(v);
                if (a > top || a != a) top = top != top ? top : a;
            });
        top = tocha::team_combine(top, team, cta, [](A u, A v) { return (v > u || v != v) && u == u ? v : u; });
        total = (A)0;
        if (live) tocha::row_each(in, n, member, team, [&](T v, long long) { total += sm_exp(tocha::to_compute(v) - top); });
        total = tocha::team_sum(total, team, cta);
    } else {
        // Longer rows: one read for the running (maximum, sum) pair, so that the output's read
        // is the only one that may miss L1. Measured on an H200: 16 KB rows of f32 faster so,
        // 8 KB rows of bf16 faster with three reads (docs/performance.md).
        sm_pair<A> p;
        p.m = (A)0, p.s = (A)0;
        if (live) tocha::row_each(in, n, member, team, [&](T v, long long) { sm_push(p.m, p.s, tocha::to_compute(v)); });
        p = tocha::team_combine(p, team, cta, [](sm_pair<A> u, sm_pair<A> v) {
            sm_merge(u.m, u.s, v.m, v.s);
            return u;
        });
        top = p.m, total = p.s;
    }
    if (!live) return;
    // log(sum) once a row, not once an element
    const A m = top, sum = total, log_sum = LOG ? sm_log(sum) : (A)0;
    tocha::row_map(in, y + row * n, n, member, team, [=](T v) {
        const A d = tocha::to_compute(v) - m;
        return tocha::from_compute<T>(LOG ? d - log_sum : sm_exp(d) / sum);
    });
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
    long long row;
    unsigned member, team;
    tocha::team_of(rows, &row, &member, &team);
    if (cta && row >= outer) return;
    const bool live = row < outer;
    const T *yr = y + (live ? row : 0) * n, *gr = dy + (live ? row : 0) * n;
    A dot = (A)0;
    if (live)
        for (long long j = member; j < n; j += team) {
            const A g = tocha::to_compute(gr[j]);
            dot += LOG ? g : g * tocha::to_compute(yr[j]);
        }
    dot = tocha::team_sum(dot, team, cta);
    if (!live) return;
    T *out = dx + row * n;
    for (long long j = member; j < n; j += team) {
        const A v = tocha::to_compute(yr[j]), g = tocha::to_compute(gr[j]);
        out[j] = tocha::from_compute<T>(LOG ? g - sm_exp(v) * dot : v * (g - dot));
    }
}
