// softmax.cu: softmax and log-softmax of x viewed as [outer, n, inner] along n, and their
// gradients. LOG (0 softmax, 1 log-softmax) and the dtype T are compile-time constants; halves
// compute in f32, f64 in f64.
//
// Forward: a row of whole aligned 16-byte groups, at most 32 elements (f64: 16) a member of its
// team, is held in registers: one read of x, an exp an element (kept for softmax's output),
// one write (rows of up to 1024 elements by a warp's lanes, of 8 to 32 KB by a CTA). Another
// row of at most 8 KB takes its maximum m, then the sum s of exp(x - m), then writes
// exp(x - m) / s or x - m - log s: three reads (the later two from L1). A longer row, and a
// column (inner > 1), keep m and s as a running pair, rescaled when the maximum grows, and read
// their elements twice. Softmax divides by s as a product with 1 / s corrected by an fma
// (sm_div), so that no path carries a division's slow-path call and its registers.
// Backward, with y the forward's output: softmax dx = y (dy - sum(dy y)); log-softmax
// dx = dy - exp(y) sum(dy). Rows held as in the forward take one read of y and dy; others two,
// in 16-byte groups (row_walk).
//
// Mappings, chosen by the host from the shape (tensor_reduce.lua's softmax_mapping): rows 0, a
// thread a (outer, inner) column walking n with stride inner (inner > 1); rows 1 to 32, that
// many lanes of a warp a row (inner == 1, shorter rows; for rows it can hold, the fewest lanes
// that hold them); rows -1, a CTA a row (inner == 1, long rows, and rows of 2 to sm_most groups
// a thread, held). A team reads its row in 16-byte groups (tocha.cuh's row_each, row_map, row_walk) and
// combines its lanes' partials through shuffles (and shared memory across a CTA's warps).

__device__ __forceinline__ float sm_exp(float v) { return expf(v); }
__device__ __forceinline__ double sm_exp(double v) { return exp(v); }
__device__ __forceinline__ float sm_log(float v) { return logf(v); }
__device__ __forceinline__ double sm_log(double v) { return log(v); }

// a / b from r = 1 / b (rounded to nearest, computed once a row): the quotient a r corrected by
// its remainder a - q b, which an fma gives exactly, so that the result is a / b rounded to
// nearest (Markstein's correction; results under the smallest normal may differ in their last
// place). A division is a call into a slow path for the cases the quotient may under- or
// overflow, whose saved registers cost the whole kernel its occupancy; this is three
// instructions.
__device__ __forceinline__ float sm_div(float a, float b, float r)
{
    const float q = a * r;
    return fmaf(fmaf(-q, b, a), r, q);
}
__device__ __forceinline__ double sm_div(double a, double b, double r)
{
    const double q = a * r;
    return fma(fma(-q, b, a), r, q);
}

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

// An output element from d = x - maximum and the row's sum s, with log_s = log s (log-softmax)
// and r = 1 / s (softmax) taken once a row.
template <int LOG, typename A> __device__ __forceinline__ A sm_value(A d, A s, A log_s, A r)
{
    return LOG ? d - log_s : sm_div(sm_exp(d), s, r);
}

// ---- rows held in registers ----
//
// A row of a whole number of 16-byte groups that start on a 16-byte boundary (as do its
// output's), at most sm_most of them a member of its team (a warp's lanes or a CTA's threads),
// is held by its team in registers: member `member` holds groups member, member + team, ... up
// to G of them (G, 4 or sm_most, a compile-time constant, so that every index into the arrays
// is one too and they stay in registers, halves as their raw words until used). Each group is
// one 16-byte load, all of a member's issued before the first is used; the groups past the
// row's end hold a value that changes no result and are never stored. Other rows (an odd
// length, an unaligned view, more groups than its team holds) take the paths that read the row
// again. A CTA's member keeps 2 to 8 groups in flight (the host gives a CTA rows of 2 groups a
// thread and more), a warp's lanes up to 8.

// The most groups a lane holds: 32 elements (16 of f64, whose 32 would take 128 registers).
template <typename T> struct sm_most {
    static const int groups = sizeof(T) == 8 ? 8 : 32 / tocha::vec16<T>::n;
};

// The groups a member of a team of `team` must hold for rows of n elements at p, q and r (rows
// start at p + k n), or 0 where those rows cannot be held (not whole aligned groups, or more
// than sm_most a member). Uniform over the grid, so that every lane of a warp takes one path.
template <typename T>
__device__ __forceinline__ long long sm_groups_a_lane(const T *p, const T *q, const T *r, long long n,
                                                      unsigned team)
{
    const int V = tocha::vec16<T>::n;
    const unsigned long long at = (unsigned long long)p | (unsigned long long)q | (unsigned long long)r;
    if (n % V != 0 || (at & 15u) != 0 || n / V > (long long)sm_most<T>::groups * team) return 0;
    return ((unsigned)n / V + team - 1) / team; // 32-bit: n is at most 2^16 here
}

// w[j] = the lane's group j of row (n elements, whole aligned groups); a group of `fill`
// past the row's end or where the lane's row is not live.
template <int G, typename T>
__device__ __forceinline__ void sm_hold(const T *row, int n, unsigned member, unsigned team, bool live,
                                        T fill, unsigned (&w)[G][4])
{
    const int V = tocha::vec16<T>::n, groups = n / V;
    tocha::pack16<T> f;
#pragma unroll
    for (int e = 0; e < V; ++e) f.set(e, fill);
#pragma unroll
    for (int j = 0; j < G; ++j) {
        const int g = (int)(member + j * team);
        if (live && g < groups)
            tocha::load_words<16>(row + g * V, w[j]);
        else
            w[j][0] = f.w[0], w[j][1] = f.w[1], w[j][2] = f.w[2], w[j][3] = f.w[3];
    }
}

// Element e of a held group, in compute precision.
template <typename T>
__device__ __forceinline__ typename tocha::compute<T>::type sm_at(const unsigned (&w)[4], int e)
{
    return tocha::to_compute(tocha::element_of<T>(w, e));
}

// out's group j of the lane (see sm_hold): element e = fn(j, e), one 16-byte store a group.
template <int G, typename T, typename F>
__device__ __forceinline__ void sm_put(T *out, int n, unsigned member, unsigned team, F fn)
{
    const int V = tocha::vec16<T>::n, groups = n / V;
#pragma unroll
    for (int j = 0; j < G; ++j) {
        const int g = (int)(member + j * team);
        if (g >= groups) continue;
        tocha::pack16<T> r;
#pragma unroll
        for (int e = 0; e < V; ++e) r.set(e, tocha::from_compute<T>(fn(j, e)));
        tocha::store_pack(out + g * V, r);
    }
}

// The maximum of two (a NaN sticks).
template <typename A> __device__ __forceinline__ A sm_max(A u, A v)
{
    return (v > u || v != v) && u == u ? v : u;
}

// Softmax of a row held in registers: one read of x, an exp an element (kept for the output in
// softmax), one write. Every lane of the warp calls it (live false past the last row).
template <int G, int LOG, typename T>
__device__ __forceinline__ void sm_forward_held(const T *in, T *out, int n, unsigned member,
                                                unsigned team, bool cta, bool live)
{
    typedef typename tocha::compute<T>::type A;
    const int V = tocha::vec16<T>::n;
    unsigned w[G][4];
    sm_hold<G>(in, n, member, team, live, tocha::from_compute<T>(-tocha::infinity<A>()), w);
    A top = -tocha::infinity<A>();
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
        for (int e = 0; e < V; ++e) top = sm_max(top, sm_at<T>(w[j], e));
    top = tocha::team_combine(top, team, cta, [](A u, A v) { return sm_max(u, v); });
    // Groups past the row hold -inf: exp(-inf - top) adds 0 (a row whose maximum is -inf, all
    // -inf, is NaN throughout, as PyTorch's).
    A sum = (A)0, p[G][V];
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
        for (int e = 0; e < V; ++e) {
            p[j][e] = LOG ? (A)0 : sm_exp(sm_at<T>(w[j], e) - top);
            sum += LOG ? sm_exp(sm_at<T>(w[j], e) - top) : p[j][e];
        }
    sum = tocha::team_sum(sum, team, cta);
    if (!live) return;
    const A log_sum = LOG ? sm_log(sum) : (A)0, r = (A)1 / sum;
    sm_put<G>(out, n, member, team, [&](int j, int e) {
        return LOG ? sm_at<T>(w[j], e) - top - log_sum : sm_div(p[j][e], sum, r);
    });
}

template <typename T, int LOG>
__device__ void tocha_softmax(const T *x, T *y, long long outer, long long n, long long inner, int rows)
{
    typedef typename tocha::compute<T>::type A;
    if (rows == 0) {
        const long long stride = (long long)blockDim.x * gridDim.x;
        for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < outer * inner;
             t += stride) {
            const long long o = t / inner, k = t - o * inner, base = o * n * inner + k;
            A m = (A)0, s = (A)0;
            for (long long j = 0; j < n; ++j) sm_push(m, s, tocha::to_compute(x[base + j * inner]));
            const A log_s = LOG ? sm_log(s) : (A)0, r = (A)1 / s;
            for (long long j = 0; j < n; ++j) {
                const A d = tocha::to_compute(x[base + j * inner]) - m;
                y[base + j * inner] = tocha::from_compute<T>(sm_value<LOG>(d, s, log_s, r));
            }
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
    {
        const long long g = sm_groups_a_lane(x, y, y, n, team);
        const int MOST = sm_most<T>::groups;
        if (g > 0 && g <= 4)
            return sm_forward_held<4, LOG>(in, y + row * n, (int)n, member, team, cta, live);
        if (MOST > 4 && g > 0 && g <= MOST)
            return sm_forward_held<(MOST > 4 ? MOST : 4), LOG>(in, y + row * n, (int)n, member, team,
                                                               cta, live);
    }
    A top, total;
    if (n * (long long)sizeof(T) <= 8192) {
        // The row's maximum (a NaN sticks), then the sum of exp(x - maximum): three reads of the
        // row, the later two from L1 (a row of at most 8 KB a team stays there), whose exps do
        // not wait on one another as a running pair's do.
        top = -tocha::infinity<A>();
        if (live)
            tocha::row_each(in, n, member, team,
                            [&](T v, long long) { top = sm_max(top, tocha::to_compute(v)); });
        top = tocha::team_combine(top, team, cta, [](A u, A v) { return sm_max(u, v); });
        total = (A)0;
        if (live)
            tocha::row_each(in, n, member, team,
                            [&](T v, long long) { total += sm_exp(tocha::to_compute(v) - top); });
        total = tocha::team_sum(total, team, cta);
    } else {
        // Longer rows: one read for the running (maximum, sum) pair, so that the output's read
        // is the only one that may miss L1. Measured on an H200: 16 KB rows of f32 faster so,
        // 8 KB rows of bf16 faster with three reads (docs/performance.md).
        sm_pair<A> p;
        p.m = (A)0, p.s = (A)0;
        if (live)
            tocha::row_each(in, n, member, team,
                            [&](T v, long long) { sm_push(p.m, p.s, tocha::to_compute(v)); });
        p = tocha::team_combine(p, team, cta, [](sm_pair<A> u, sm_pair<A> v) {
            sm_merge(u.m, u.s, v.m, v.s);
            return u;
        });
        top = p.m, total = p.s;
    }
    if (!live) return;
    // log(sum) once a row, not once an element
    const A m = top, sum = total, log_sum = LOG ? sm_log(sum) : (A)0, r = (A)1 / sum;
    tocha::row_map(in, y + row * n, n, member, team, [=](T v) {
        return tocha::from_compute<T>(sm_value<LOG>(tocha::to_compute(v) - m, sum, log_sum, r));
    });
}

// The two halves of a word, widened: bf16 by moving its bits into the top of an f32 (exact),
// f16 through the pair conversion.
template <typename T> __device__ __forceinline__ void sm_widen_pair(unsigned w, float &lo, float &hi);
template <>
__device__ __forceinline__ void sm_widen_pair<__nv_bfloat16>(unsigned w, float &lo, float &hi)
{
    lo = __uint_as_float(w << 16), hi = __uint_as_float(w & 0xffff0000u);
}
template <> __device__ __forceinline__ void sm_widen_pair<__half>(unsigned w, float &lo, float &hi)
{
    __half2 h;
    memcpy(&h, &w, 4);
    const float2 f = __half22float2(h);
    lo = f.x, hi = f.y;
}

// A group's sum(dy y) (sum(dy) in log-softmax) from its words y and g. Halves are widened
// here by an expression of their own (a word's pair at once) rather than sm_at's: were the
// two the same, the compiler would keep every widened element from this sum to the output's
// write (64 registers a lane in bf16) instead of the packed words (32).
template <int LOG, typename T>
__device__ __forceinline__ typename tocha::compute<T>::type sm_group_dot(const unsigned (&y)[4],
                                                                         const unsigned (&g)[4])
{
    typedef typename tocha::compute<T>::type A;
    A dot = (A)0;
    if constexpr (sizeof(T) == 2) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float y0, y1, g0, g1;
            sm_widen_pair<T>(y[i], y0, y1);
            sm_widen_pair<T>(g[i], g0, g1);
            dot += LOG ? g0 + g1 : g0 * y0 + g1 * y1;
        }
    } else {
#pragma unroll
        for (int e = 0; e < tocha::vec16<T>::n; ++e)
            dot += LOG ? sm_at<T>(g, e) : sm_at<T>(g, e) * sm_at<T>(y, e);
    }
    return dot;
}

// The gradient of a row held in registers: one read of y and of dy, one write of dx.
template <int G, int LOG, typename T>
__device__ __forceinline__ void sm_backward_held(const T *yr, const T *gr, T *out, int n,
                                                 unsigned member, unsigned team, bool cta, bool live)
{
    typedef typename tocha::compute<T>::type A;
    const int V = tocha::vec16<T>::n;
    unsigned v[G][4], g[G][4];
    sm_hold<G>(yr, n, member, team, live, tocha::from_compute<T>((A)0), v);
    sm_hold<G>(gr, n, member, team, live, tocha::from_compute<T>((A)0), g);
    A dot = (A)0;
#pragma unroll
    for (int j = 0; j < G; ++j) dot += sm_group_dot<LOG, T>(v[j], g[j]);
    dot = tocha::team_sum(dot, team, cta);
    if (!live) return;
    sm_put<G>(out, n, member, team, [&](int j, int e) {
        const A y = sm_at<T>(v[j], e), d = sm_at<T>(g[j], e);
        return LOG ? d - sm_exp(y) * dot : y * (d - dot);
    });
}

// dx from y (the forward's output) and dy.
template <typename T, int LOG>
__device__ void tocha_softmax_backward(const T *y, const T *dy, T *dx, long long outer, long long n,
                                       long long inner, int rows)
{
    typedef typename tocha::compute<T>::type A;
    if (rows == 0) {
        const long long stride = (long long)blockDim.x * gridDim.x;
        for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < outer * inner;
             t += stride) {
            const long long o = t / inner, k = t - o * inner, base = o * n * inner + k;
            A dot = (A)0;
            for (long long j = 0; j < n; ++j) {
                const A g = tocha::to_compute(dy[base + j * inner]);
                dot += LOG ? g : g * tocha::to_compute(y[base + j * inner]);
            }
            for (long long j = 0; j < n; ++j) {
                const A v = tocha::to_compute(y[base + j * inner]),
                        g = tocha::to_compute(dy[base + j * inner]);
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
    // Held in registers where the rows allow it.
    {
        const long long g = sm_groups_a_lane(y, dy, dx, n, team);
        const int MOST = sm_most<T>::groups;
        if (g > 0 && g <= 4)
            return sm_backward_held<4, LOG>(yr, gr, dx + row * n, (int)n, member, team, cta, live);
        if (MOST > 4 && g > 0 && g <= MOST)
            return sm_backward_held<(MOST > 4 ? MOST : 4), LOG>(yr, gr, dx + row * n, (int)n, member,
                                                                team, cta, live);
    }
    // Longer rows: sum(dy y) (sum(dy)) in one read, then dx in a second, both in 16-byte groups.
    A dot = (A)0;
    if (live) {
        if (LOG)
            tocha::row_walk<1, false>(gr, gr, (T *)0, n, member, team,
                                      [&](T d, T, long long) { dot += tocha::to_compute(d); });
        else
            tocha::row_walk<2, false>(yr, gr, (T *)0, n, member, team, [&](T v, T d, long long) {
                dot += tocha::to_compute(d) * tocha::to_compute(v);
            });
    }
    dot = tocha::team_sum(dot, team, cta);
    if (!live) return;
    tocha::row_walk<2, true>(yr, gr, dx + row * n, n, member, team, [&](T e, T d, long long) {
        const A v = tocha::to_compute(e), g = tocha::to_compute(d);
        return tocha::from_compute<T>(LOG ? g - sm_exp(v) * dot : v * (g - dot));
    });
}

// ---- logsumexp ----

// log(sum(exp(x))) of a row from its maximum m and the sum s of exp(x - shift): shift is m where
// m is finite, else 0, so that a row of -inf gives log 0 = -inf, one holding +inf gives +inf, and
// a NaN stays.
template <typename A> __device__ __forceinline__ A lse_shift(A m) { return m - m == (A)0 ? m : (A)0; }

// y[o, i] = log(sum over n of exp(x[o, :, i])) of x viewed as [outer, n, inner], in one launch,
// on team_mapping's `rows` (0: a thread a column; 1 to 32 lanes of a warp, or -1 a CTA, a row).
// A row of at most 8 KB is read twice, its maximum then the sum of exp(x - shift), the second
// read from L1; a longer row, and a column, once, as a running (maximum, sum) pair, whose
// maximum +inf gives +inf whatever its sum (inf - inf made it NaN) and NaN gives NaN.
template <typename T>
__device__ void tocha_logsumexp(const T *x, T *y, long long outer, long long n, long long inner, int rows)
{
    typedef typename tocha::compute<T>::type A;
    const A inf = tocha::infinity<A>();
    if (rows == 0) {
        const long long stride = (long long)blockDim.x * gridDim.x;
        for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < outer * inner; t += stride) {
            const long long o = t / inner, k = t - o * inner, base = o * n * inner + k;
            A m = (A)0, s = (A)0;
            for (long long j = 0; j < n; ++j) sm_push(m, s, tocha::to_compute(x[base + j * inner]));
            y[t] = tocha::from_compute<T>(m != m || m == inf ? m : m + sm_log(s));
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
    A result;
    if (n * (long long)sizeof(T) <= 8192) {
        A top = -inf;
        if (live) tocha::row_each(in, n, member, team, [&](T v, long long) { top = sm_max(top, tocha::to_compute(v)); });
        top = tocha::team_combine(top, team, cta, [](A u, A v) { return sm_max(u, v); });
        const A shift = lse_shift(top);
        A total = (A)0;
        if (live) tocha::row_each(in, n, member, team, [&](T v, long long) { total += sm_exp(tocha::to_compute(v) - shift); });
        total = tocha::team_sum(total, team, cta);
        result = sm_log(total) + shift;
    } else {
        sm_pair<A> p;
        p.m = (A)0, p.s = (A)0;
        if (live) tocha::row_each(in, n, member, team, [&](T v, long long) { sm_push(p.m, p.s, tocha::to_compute(v)); });
        p = tocha::team_combine(p, team, cta, [](sm_pair<A> u, sm_pair<A> v) {
            sm_merge(u.m, u.s, v.m, v.s);
            return u;
        });
        result = p.m != p.m || p.m == inf ? p.m : p.m + sm_log(p.s);
    }
    if (live && member == 0) y[row] = tocha::from_compute<T>(result);
}
