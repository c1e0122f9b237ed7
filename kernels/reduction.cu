// reduction.cu: sum, mean, max, min and product of x viewed as [outer, n, inner] over its middle
// dimension (one dimension of a tensor, or n = every element), and the gradients of the first
// four. MODE (0 sum, 1 mean, 2 max, 3 min, 4 prod) and the dtype T are compile-time constants;
// f16 and bf16 are reduced in f32, f64 in f64 (the accumulator A). max and min propagate NaN,
// as PyTorch's do.
//
// One kernel, tocha_reduce, does every pass of a reduction; the host plans the passes from the
// shape alone (never from the device), so that a result is the same on every device and on the
// simulator, bit for bit:
// - the rows mappings (inner == 1): a team, one CTA per (row, split) for long rows or 1 to 32
//   lanes of a warp per row for shorter ones (about four 16-byte groups a lane), strides over
//   its part of the row in 16-byte groups (the elements before the first boundary and after the
//   last group one by one), four groups in flight a thread, then a tree in shared memory;
// - the columns mapping (otherwise): one thread per (outer, split, 16-byte group of inner)
//   walks its part of n with stride inner, four rows in flight (one element along inner where
//   inner is not whole groups or x is not 16-byte aligned).
// splits > 1 divides n among CTAs or threads when there are too few outputs to fill the device;
// the pass then writes its partials (in A) to a workspace, and a second pass over that workspace
// viewed as [outer, splits, inner] finishes. Pointers are untyped (u8*): a pass reads T or A and
// writes T or A as x_acc and y_acc say. `copy`, unless it is x itself, gets every element of x
// the pass reads (the bias gradient: dx = dy while db is summed). A pass's output is its total
// divided by `divisor` (the mean's n; 1 otherwise).
//
// tocha_reduce_grad: dx for sum and mean (dy broadcast along n, divided by divisor), one thread a
// dx element; for max and min the whole dy of an output goes to the first element equal to the maximum
// (NaN to the first NaN) and zeros elsewhere, one thread an output.

template <int MODE, typename A> __device__ __forceinline__ A red_identity()
{
    return MODE == 2 ? -tocha::infinity<A>() : MODE == 3 ? tocha::infinity<A>() : MODE == 4 ? (A)1 : (A)0;
}

template <int MODE, typename A> __device__ __forceinline__ A red_combine(A a, A b)
{
    if (MODE == 2) return (b > a || b != b) ? b : a;
    if (MODE == 3) return (b < a || b != b) ? b : a;
    if (MODE == 4) return a * b;
    return a + b;
}

template <typename T> __device__ __forceinline__ typename tocha::compute<T>::type red_load(const T *p, long long i)
{
    return tocha::to_compute(tocha::load_element(p + i));
}

template <int MODE, typename A, typename TO> __device__ __forceinline__ void red_store(TO *y, long long i, A v, double divisor)
{
    if (MODE == 1) v = v / (A)divisor;
    y[i] = tocha::from_compute<TO>(v);
}

// acc combined, in order, with the elements of a 16-byte group of TI held as four words.
template <int MODE, typename TI, typename A> __device__ __forceinline__ A red_group(A acc, const unsigned w[4])
{
#pragma unroll
    for (int e = 0; e < tocha::vec16<TI>::n; ++e) acc = red_combine<MODE>(acc, (A)tocha::to_compute(tocha::element_of<TI>(w, e)));
    return acc;
}

template <typename TI> __device__ __forceinline__ void red_copy16(TI *dst, const unsigned w[4])
{
    tocha::pack16<TI> p;
    p.w[0] = w[0], p.w[1] = w[1], p.w[2] = w[2], p.w[3] = w[3];
    tocha::store_pack(dst, p);
}

// One team's (a CTA's or a warp's) share of in[lo, hi): each lane's value, from the elements
// before the first 16-byte boundary and after the last whole group one by one, and the groups
// between four at a time (vec: in and copy share their alignment, so both take whole groups).
template <int MODE, typename TI, typename A>
__device__ __forceinline__ A red_segment(const TI *in, TI *copy, long long lo, long long hi, long long lane, long long team,
                                         bool vec)
{
    const int V = tocha::vec16<TI>::n;
    A acc[4] = {red_identity<MODE, A>(), red_identity<MODE, A>(), red_identity<MODE, A>(), red_identity<MODE, A>()};
    long long a = hi, b = hi;
    if (vec) {
        a = lo + (long long)(((16u - ((unsigned)(unsigned long long)(in + lo) & 15u)) & 15u) / sizeof(TI));
        if (a > hi) a = hi;
        b = a + (hi - a) / V * V;
    }
    for (long long k = lo + lane; k < a; k += team) {
        acc[0] = red_combine<MODE>(acc[0], (A)red_load(in, k));
        if (copy) copy[k] = in[k];
    }
    for (long long k = b + lane; k < hi; k += team) {
        acc[1] = red_combine<MODE>(acc[1], (A)red_load(in, k));
        if (copy) copy[k] = in[k];
    }
    const long long groups = (b - a) / V;
    long long g = lane;
    for (; g + 3 * team < groups; g += 4 * team) {
        unsigned w[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) tocha::load_words<16>(in + a + (g + j * team) * V, w[j]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            acc[j] = red_group<MODE, TI>(acc[j], w[j]);
            if (copy) red_copy16(copy + a + (g + j * team) * V, w[j]);
        }
    }
    // At most three groups are left a lane (fewer than four strides of the team): their loads
    // issued together.
    unsigned w[3][4];
#pragma unroll
    for (int j = 0; j < 3; ++j)
        if (g + j * team < groups) tocha::load_words<16>(in + a + (g + j * team) * V, w[j]);
#pragma unroll
    for (int j = 0; j < 3; ++j)
        if (g + j * team < groups) {
            acc[j] = red_group<MODE, TI>(acc[j], w[j]);
            if (copy) red_copy16(copy + a + (g + j * team) * V, w[j]);
        }
    return red_combine<MODE>(red_combine<MODE>(acc[0], acc[1]), red_combine<MODE>(acc[2], acc[3]));
}

// The team's combined value, in the tree order of a shared-memory reduction over buf (the
// team's slots); true in lane 0, which holds it. team is a power of two: the CTA, or a warp
// (cta false).
template <int MODE, typename A> __device__ __forceinline__ bool red_team(A v, A *buf, unsigned lane, unsigned team, bool cta, A *total)
{
    buf[lane] = v;
    if (cta) __syncthreads(); else __syncwarp();
    for (unsigned o = team / 2; o > 0; o /= 2) {
        if (lane < o) buf[lane] = red_combine<MODE>(buf[lane], buf[lane + o]);
        if (cta) __syncthreads(); else __syncwarp();
    }
    *total = buf[0];
    return lane == 0;
}

// rows: 0 the columns mapping; -1 a CTA a (row, split); 1 to 32 (a power of two) that many
// lanes of a warp a (row, split).
template <int MODE, typename TI, typename TO>
__device__ void red_pass(const TI *x, TO *y, TI *copy, long long outer, long long n, long long inner, long long splits,
                         double divisor, int rows)
{
    typedef typename tocha::compute<TI>::type A;
    const int V = tocha::vec16<TI>::n;
    // Splits start on whole groups, so that every split but the last holds whole groups.
    long long part = (n + splits - 1) / splits;
    part = (part + V - 1) / V * V;
    if (rows) {
        __shared__ A buf[1024];
        const bool cta = rows < 0;
        const unsigned team = cta ? blockDim.x : (unsigned)rows, lane = threadIdx.x % team;
        const long long item = blockIdx.x * (long long)(blockDim.x / team) + threadIdx.x / team;
        const bool live = item < outer * splits;
        if (cta && !live) return; // the whole CTA (a smaller team stays for its warp's __syncwarp)
        const long long row = live ? item / splits : 0, s = live ? item - row * splits : 0;
        long long lo = s * part < n ? s * part : n, hi = lo + part < n ? lo + part : n;
        if (!live) lo = hi = 0;
        const bool vec = !copy || (((unsigned long long)x ^ (unsigned long long)copy) & 15u) == 0;
        const A mine = red_segment<MODE, TI, A>(x + row * n, copy ? copy + row * n : 0, lo, hi, lane, team, vec);
        A total;
        if (red_team<MODE>(mine, buf + (threadIdx.x - lane), lane, team, cta, &total) && live)
            red_store<MODE>(y, item, total, divisor);
        return;
    }
    const long long stride = (long long)blockDim.x * gridDim.x, first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const bool vec = inner % V == 0 && ((unsigned long long)x & 15u) == 0 &&
                     (!copy || ((unsigned long long)copy & 15u) == 0);
    if (vec && V > 1) {
        // A thread a 16-byte group along inner: V outputs, four rows of n in flight.
        const long long groups = inner / V, outputs = outer * splits * groups;
        for (long long t = first; t < outputs; t += stride) {
            const long long ig = t % groups, r = t / groups, s = r % splits, o = r / splits;
            const long long lo = s * part < n ? s * part : n, hi = lo + part < n ? lo + part : n;
            const TI *in = x + o * n * inner + ig * V;
            TI *out = copy ? copy + o * n * inner + ig * V : 0;
            A acc[tocha::vec16<TI>::n];
#pragma unroll
            for (int e = 0; e < V; ++e) acc[e] = red_identity<MODE, A>();
            long long k = lo;
            for (; k + 3 < hi; k += 4) {
                unsigned w[4][4];
#pragma unroll
                for (int j = 0; j < 4; ++j) tocha::load_words<16>(in + (k + j) * inner, w[j]);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
#pragma unroll
                    for (int e = 0; e < V; ++e) acc[e] = red_combine<MODE>(acc[e], (A)tocha::to_compute(tocha::element_of<TI>(w[j], e)));
                    if (out) red_copy16(out + (k + j) * inner, w[j]);
                }
            }
            for (; k < hi; ++k) {
                unsigned w[4];
                tocha::load_words<16>(in + k * inner, w);
#pragma unroll
                for (int e = 0; e < V; ++e) acc[e] = red_combine<MODE>(acc[e], (A)tocha::to_compute(tocha::element_of<TI>(w, e)));
                if (out) red_copy16(out + k * inner, w);
            }
#pragma unroll
            for (int e = 0; e < V; ++e) red_store<MODE>(y, (o * splits + s) * inner + ig * V + e, acc[e], divisor);
        }
        return;
    }
    const long long outputs = outer * splits * inner;
    for (long long t = first; t < outputs; t += stride) {
        const long long i = t % inner, r = t / inner, s = r % splits, o = r / splits;
        const long long lo = s * part < n ? s * part : n, hi = lo + part < n ? lo + part : n;
        const TI *in = x + o * n * inner + i;
        TI *out = copy ? copy + o * n * inner + i : 0;
        A acc[4] = {red_identity<MODE, A>(), red_identity<MODE, A>(), red_identity<MODE, A>(), red_identity<MODE, A>()};
        long long k = lo;
        for (; k + 3 < hi; k += 4) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                acc[j] = red_combine<MODE>(acc[j], (A)red_load(in, (k + j) * inner));
                if (out) out[(k + j) * inner] = in[(k + j) * inner];
            }
        }
#pragma unroll
        for (int j = 0; j < 3; ++j)
            if (k < hi) {
                acc[j] = red_combine<MODE>(acc[j], (A)red_load(in, k * inner));
                if (out) out[k * inner] = in[k * inner];
                ++k;
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
    if (MODE < 2) {
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
