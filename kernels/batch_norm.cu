// batch_norm.cu: 2-D batch normalisation of x [N, C, plane] per channel, forward and backward,
// in training mode (the batch's statistics; the running ones updated) or inference mode (the
// running statistics). AFFINE (weight and bias) and RUNNING (running mean and variance kept)
// are compile-time constants; halves compute in f32, f64 in f64 (the type A).
//
// Each direction is one kernel in three phases (launches), planned by the host from the shape
// alone, so that a result is the same on every run and device:
// - phase 0, the statistics as a split reduction: a CTA a (channel, split) walks its share of the
//   channel's N planes in units (16-byte groups where the plane is whole groups and the tensors
//   are 16-byte aligned, else 8-byte groups likewise, else elements: bn_width), 64 bytes in
//   flight a thread (four 16-byte units, eight 8-byte ones; four elements), each thread keeping a
//   running (count, mean, sum of squared deviations) and, in the backward, sum(dy) and
//   sum(dy (x - mean)), merged a batch of units at a time (Chan's formulas) and then across the
//   CTA; the CTA's partial goes to the workspace. No float atomics: the order is fixed.
// - phase 1, a warp a channel merges the channel's partials in a fixed order and writes the
//   channel's coefficients to the workspace: the forward's mean, scale and shift (and the
//   running statistics, moved by momentum towards the mean and the unbiased variance, PyTorch's
//   rule); the backward's mean, a = w rstd, a sum(dy) / M and a rstd sum(dy xhat) / M (and the
//   weight's and bias's gradients, sum(dy xhat) and sum(dy)).
// - phase 2, elementwise over the whole tensor in units, four in flight a thread, each unit's
//   channel stepped rather than divided anew: y = (x - mean) scale + shift; training
//   dx = w rstd (dy - sum(dy) / M - xhat sum(dy xhat) / M), inference dx = w rstd dy.
//
// Group norm's split path (norm.cu) runs phases 0 and 2 over x viewed as [1, N C, plane]: a
// (sample, channel) plane is a "channel" here. With the
//   running statistics (inference) the coefficients come from them directly and phases 0 and 1
//   are skipped (the backward runs them only for the parameters' gradients).
//
// Workspace (A values): C x splits partials of 4 (mean, m2, sum dy, sum dy (x - mean)), then C
// x 4 coefficients. A partial's count is not stored: phase 1 recomputes it from the plan.

// 16-byte units a thread has in flight (batch_norm.lua sizes the grids by the same number): four
// of x, or two of x and two of dy.
#define BN_UNITS 4
// The CTA size batch_norm.lua launches (the channels-last statistics' shared memory is sized by it).
#define BN_BLOCK 256

// Units: 16 bytes where the plane is whole 16-byte groups and the tensors are aligned to them;
// else 8 bytes where the plane is whole 8-byte groups (a 14x14 plane of halves: 392 bytes), so
// that small planes of halves still read whole words, twice as many units in flight; else one
// element. A unit never crosses a plane. bn_width picks the width (V16 or VH below, or 1).
template <typename T> struct bn_widths {
    static const int V16 = tocha::vec16<T>::n, VH = V16 >= 4 ? V16 / 2 : 1;
};
// The units in flight a thread for units of V elements: U 16-byte units' worth of bytes.
template <typename T, int V, int U> struct bn_flight {
    static const int value = V == 1 ? U : U * tocha::vec16<T>::n / V;
};

__device__ __forceinline__ float bn_rsqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double bn_rsqrt(double v) { return 1.0 / sqrt(v); }

// n / d and n % d, in 32 bits where both fit (a 64-bit division is several times longer).
__device__ __forceinline__ long long bn_div(long long n, long long d)
{
    return (((unsigned long long)n | (unsigned long long)d) >> 32) == 0
               ? (long long)((unsigned)n / (unsigned)d)
               : n / d;
}

// A running count, mean, sum of squared deviations from the mean, sum of dy and sum of
// dy (x - mean): the forward uses the first three.
template <typename A> struct bn_moments {
    long long n;
    A mean, m2, g, h;
};
template <typename A> __device__ __forceinline__ bn_moments<A> shfl_xor(bn_moments<A> v, int o)
{
    bn_moments<A> r;
    r.n = tocha::shfl_xor(v.n, o), r.mean = tocha::shfl_xor(v.mean, o), r.m2 = tocha::shfl_xor(v.m2, o);
    r.g = tocha::shfl_xor(v.g, o), r.h = tocha::shfl_xor(v.h, o);
    return r;
}

template <typename A> __device__ __forceinline__ bn_moments<A> bn_empty()
{
    bn_moments<A> r;
    r.n = 0, r.mean = r.m2 = r.g = r.h = (A)0;
    return r;
}

// The moments of a and b together (Chan's merge; h moved to the merged mean).
template <typename A> __device__ __forceinline__ bn_moments<A> bn_merge(bn_moments<A> a, bn_moments<A> b)
{
    if (b.n == 0) return a;
    if (a.n == 0) return b;
    bn_moments<A> r;
    r.n = a.n + b.n;
    const A na = (A)a.n, nb = (A)b.n, inv = (A)1 / (A)r.n, delta = b.mean - a.mean;
    r.mean = a.mean + delta * nb * inv;
    r.m2 = a.m2 + b.m2 + delta * delta * na * nb * inv;
    r.g = a.g + b.g;
    r.h = a.h + b.h + delta * (na * b.g - nb * a.g) * inv;
    return r;
}

// One unit of T: V elements (a 16- or 8-byte group) or one element (tocha.cuh's unit).
template <typename T, int V> using bn_unit = tocha::unit<T, V>;

// The moments of N values (N a power of two) of x, xv(i), and with DY of dy, dv(i), merged into
// acc. One pass over the values, shifted by K: the thread's running mean (or the batch's first
// value at the start), so that sum((x - K)^2) - sum(x - K)^2 / B loses at most about log2(B)
// bits to cancellation (K lies within the data) and, once the mean has settled, next to none.
template <int N, bool DY, typename A, typename X, typename D>
__device__ __forceinline__ bn_moments<A> bn_batch_of(bn_moments<A> acc, X xv, D dv)
{
    const A K = acc.n ? acc.mean : xv(0), inv = (A)(1.0 / N); // N is a power of two: exact
    A s = (A)0, q = (A)0, g = (A)0, h = (A)0;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const A d = xv(i) - K;
        s += d, q += d * d;
        if (DY) {
            const A dvi = dv(i);
            g += dvi, h += dvi * d;
        }
    }
    bn_moments<A> b;
    b.n = N;
    b.mean = K + s * inv;
    b.m2 = q - s * s * inv;
    if (b.m2 < (A)0) b.m2 = (A)0; // rounding: a variance is never negative
    b.g = g;
    b.h = h - s * inv * g; // sum(dy (x - K)) moved to the batch's mean
    return bn_merge(acc, b);
}

// The moments of J units (J x V elements) of x and, with DY, of dy, merged into acc.
template <int J, int V, bool DY, typename T, typename A>
__device__ __forceinline__ bn_moments<A> bn_batch(bn_moments<A> acc, const bn_unit<T, V> *xs,
                                                  const bn_unit<T, V> *ds)
{
    return bn_batch_of<J * V, DY>(
        acc, [&](int i) -> A { return xs[i / V].at(i % V); }, [&](int i) -> A { return ds[i / V].at(i % V); });
}

// Channel c's units [lo, hi) (a unit: V elements of one plane; the channel's planes are N
// apart by C x plane), the share of `member` of a team of `team` threads: U units in flight, a
// stride of the team apart.
template <int U, int V, bool DY, typename T, typename A>
__device__ __forceinline__ bn_moments<A> bn_walk(const T *x, const T *dy, long long C, long long plane,
                                                 long long c, long long lo, long long hi, unsigned member,
                                                 long long team)
{
    const long long upp = plane / V;
    // Stepping a unit index by `team`: q planes and r units on, then a carry of one plane.
    const long long q = bn_div(team, upp), r = team - q * upp, step = q * C * plane + r * V,
                    carry = (C - 1) * plane;
    bn_moments<A> acc = bn_empty<A>();
    for (long long u = lo + member; u < hi; u += U * team) {
        const long long n = bn_div(u, upp);
        long long k = u - n * upp, at = (n * C + c) * plane + k * V;
        bn_unit<T, V> xs[U], ds[U];
        int got = 0;
#pragma unroll
        for (int j = 0; j < U; ++j)
            if (u + j * team < hi) {
                xs[j].load(x + at);
                if (DY) ds[j].load(dy + at);
                ++got;
                k += r, at += step;
                if (k >= upp) k -= upp, at += carry;
            }
        if (got == U) {
            acc = bn_batch<U, V, DY>(acc, xs, ds);
        } else {
#pragma unroll
            for (int j = 0; j < U - 1; ++j)
                if (j < got) acc = bn_batch<1, V, DY>(acc, xs + j, ds + j);
        }
    }
    return acc;
}

// The unit width in elements for planes of `plane` and the tensors a, b, c (see bn_w).
template <typename T>
__device__ __forceinline__ int bn_width(long long plane, const void *a, const void *b, const void *c)
{
    const int V = tocha::vec16<T>::n;
    const unsigned long long at = (unsigned long long)a | (unsigned long long)b | (unsigned long long)c;
    if (V > 1 && plane % V == 0 && (at & 15u) == 0) return V;
    if (V >= 4 && plane % (V / 2) == 0 && (at & 7u) == 0) return V / 2;
    return 1;
}

// BN_EACH_WIDTH(V, CALL): CALL(W) with W the compile-time width equal to V (bn_width's).
#define BN_EACH_WIDTH(T, V, CALL)                                                                  \
    do {                                                                                           \
        if (bn_widths<T>::V16 > 1 && (V) == bn_widths<T>::V16)                                     \
            CALL(bn_widths<T>::V16);                                                               \
        else if (bn_widths<T>::VH > 1 && (V) == bn_widths<T>::VH)                                  \
            CALL(bn_widths<T>::VH);                                                                \
        else                                                                                       \
            CALL(1);                                                                               \
    } while (0)

// Split s of a channel of `units` units among `splits`: its first unit and the one past its last.
__device__ __forceinline__ void bn_split(long long units, long long splits, long long s, long long *lo,
                                         long long *hi)
{
    const long long part = (units + splits - 1) / splits;
    *lo = tocha::min_ll(s * part, units);
    *hi = tocha::min_ll(*lo + part, units);
}

// Phase 0: item (c, s)'s partial into ws[(c splits + s) 4 ...], an item a CTA or, with
// `warps`, an item a warp (for items of few units: group norm's planes, norm.cu), which
// combines by shuffles alone.
template <bool DY, typename T, typename A>
__device__ __forceinline__ void bn_partials(const T *x, const T *dy, A *ws, long long N, long long C,
                                            long long plane, long long splits, int V, bool warps = false)
{
    const long long item = warps ? ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32 : (long long)blockIdx.x;
    if (item >= C * splits) return; // the whole CTA or warp
    const unsigned member = warps ? threadIdx.x % 32 : threadIdx.x, team = warps ? 32u : blockDim.x;
    const long long c = item / splits, s = item - c * splits;
    long long lo, hi;
    bn_split(N * (plane / V), splits, s, &lo, &hi);
    bn_moments<A> m;
#define BN_WALK(W)                                                                                 \
    m = bn_walk<bn_flight<T, W, DY ? BN_UNITS / 2 : BN_UNITS>::value, W, DY, T, A>(x, dy, C, plane, c, lo, hi, \
                                                                                  member, team)
    BN_EACH_WIDTH(T, V, BN_WALK);
#undef BN_WALK
    m = tocha::team_combine(m, team, !warps, [](bn_moments<A> a, bn_moments<A> b) { return bn_merge(a, b); });
    if (member == 0) {
        A *p = ws + 4 * item;
        p[0] = m.mean, p[1] = m.m2, p[2] = m.g, p[3] = m.h;
    }
}

// The column tile of the channels-last statistics: a CTA's columns (channels), 32 16-byte units
// of them at most, all of C where fewer (batch_norm.lua's M.tile computes the same).
template <typename T> __device__ __forceinline__ long long bn_tile(long long C)
{
    return tocha::min_ll(C, 32 * tocha::vec16<T>::n);
}

// Phase 0 channels-last, x [R, C]: a CTA a (column tile g, row split s), the partial of each of
// the tile's channels c into ws[(c splits + s) 4 ...]. A thread reads units of V channels of one
// row (TC threads across the tile, RT row teams down it, U rows in flight). Each of its V
// channels keeps sums shifted by K, the mean of the channel's first U values the thread reads,
// over the thread's whole share, made moments once at the end: a unit's elements are V
// channels, so merging moments a batch of rows at a time (as the NCHW walk does with a batch of
// one channel's values) would cost a division every few elements and make the pass
// compute-bound. sum((x - K)^2) = m2 + n (mean - K)^2, so sum((x - K)^2) - sum(x - K)^2 / n
// loses log2(1 + (mean - K)^2 / variance) bits: a few where K is a mean of typical values, at
// worst log2(n) (one of the U values holding nearly all of the variance). The row teams'
// moments of each channel are then merged through shared memory in team order.
template <bool DY, int V, typename T, typename A>
__device__ __forceinline__ void bn_partials_nhwc(const T *x, const T *dy, A *ws, long long R, long long C,
                                                 long long splits)
{
    const int U = bn_flight<T, V, DY ? BN_UNITS / 2 : BN_UNITS>::value;
    const long long CT = bn_tile<T>(C), g = blockIdx.x / splits, s = blockIdx.x - g * splits;
    const unsigned TC = (unsigned)(CT / V), RT = blockDim.x / TC, tc = threadIdx.x % TC, rt = threadIdx.x / TC;
    const long long c0 = g * CT + tc * V;
    long long lo, hi;
    bn_split(R, splits, s, &lo, &hi);
    bn_moments<A> acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = bn_empty<A>();
    if (rt < RT && c0 < C && lo + rt < hi) {
        A K[V], sx[V], sq[V], sg[V], sh[V];
        {
            // K: the mean of the first U rows' values (as many as the share holds)
            int got = 0;
#pragma unroll
            for (int e = 0; e < V; ++e) K[e] = (A)0, sx[e] = sq[e] = sg[e] = sh[e] = (A)0;
#pragma unroll
            for (int j = 0; j < U; ++j)
                if (lo + rt + (long long)j * RT < hi) {
                    bn_unit<T, V> first;
                    first.load(x + (lo + rt + (long long)j * RT) * C + c0);
                    ++got;
#pragma unroll
                    for (int e = 0; e < V; ++e) K[e] += first.at(e);
                }
            const A share = (A)1 / (A)got;
#pragma unroll
            for (int e = 0; e < V; ++e) K[e] *= share;
        }
        long long n = 0;
        for (long long r = lo + rt; r < hi; r += (long long)U * RT) {
            bn_unit<T, V> xs[U], ds[U];
#pragma unroll
            for (int j = 0; j < U; ++j)
                if (r + (long long)j * RT < hi) {
                    const long long at = (r + (long long)j * RT) * C + c0;
                    xs[j].load(x + at);
                    if (DY) ds[j].load(dy + at);
                }
#pragma unroll
            for (int j = 0; j < U; ++j)
                if (r + (long long)j * RT < hi) {
                    ++n;
#pragma unroll
                    for (int e = 0; e < V; ++e) {
                        const A d = (A)xs[j].at(e) - K[e];
                        sx[e] += d, sq[e] += d * d;
                        if (DY) {
                            const A dv = ds[j].at(e);
                            sg[e] += dv, sh[e] += dv * d;
                        }
                    }
                }
        }
        const A inv = (A)1 / (A)n;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            acc[e].n = n;
            acc[e].mean = K[e] + sx[e] * inv;
            acc[e].m2 = sq[e] - sx[e] * sx[e] * inv;
            if (acc[e].m2 < (A)0) acc[e].m2 = (A)0; // rounding: a variance is never negative
            acc[e].g = sg[e];
            acc[e].h = sh[e] - sx[e] * inv * sg[e]; // sum(dy (x - K)) moved to the mean
        }
    }
    __shared__ bn_moments<A> teams[BN_BLOCK];
#pragma unroll
    for (int e = 0; e < V; ++e) {
        teams[threadIdx.x] = acc[e];
        __syncthreads();
        const long long c = g * CT + (long long)threadIdx.x * V + e;
        if (threadIdx.x < TC && c < C) {
            bn_moments<A> m = bn_empty<A>();
            for (unsigned k = 0; k < RT; ++k) m = bn_merge(m, teams[k * TC + threadIdx.x]);
            A *p = ws + 4 * (c * splits + s);
            p[0] = m.mean, p[1] = m.m2, p[2] = m.g, p[3] = m.h;
        }
        __syncthreads();
    }
}

// Phase 0 of either layout: x [N, C, plane] (bn_partials) or, NHWC, channels-last x [N, C] (N
// the rows, bn_partials_nhwc), in units of V (bn_width's).
template <bool DY, int NHWC, typename T, typename A>
__device__ __forceinline__ void bn_phase0(const T *x, const T *dy, A *part, long long N, long long C, long long plane,
                                          long long splits, int V)
{
#define BN_PARTIALS_NHWC(W) bn_partials_nhwc<DY, W>(x, dy, part, N, C, splits)
    if (NHWC)
        BN_EACH_WIDTH(T, V, BN_PARTIALS_NHWC);
    else
        bn_partials<DY>(x, dy, part, N, C, plane, splits, V);
#undef BN_PARTIALS_NHWC
}

// Partial `item` (split s of a run cut into `splits` of `units` units of V elements) as moments,
// its count recomputed from the plan.
template <typename A>
__device__ __forceinline__ bn_moments<A> bn_partial(const A *ws, long long item, long long units, long long splits,
                                                    long long s, int V)
{
    const A *p = ws + 4 * item;
    long long lo, hi;
    bn_split(units, splits, s, &lo, &hi);
    bn_moments<A> r;
    r.n = (hi - lo) * V, r.mean = p[0], r.m2 = p[1], r.g = p[2], r.h = p[3];
    return r;
}

// Phase 1's merge: channel c's moments (every lane of the warp returns them), or false for a
// warp past the last channel (the whole warp).
template <typename A>
__device__ __forceinline__ bool bn_channel(const A *ws, long long N, long long C, long long plane,
                                           long long splits, int V, long long *c, bn_moments<A> *out)
{
    *c = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (*c >= C) return false;
    const long long units = N * (plane / V);
    bn_moments<A> m = bn_empty<A>();
    for (long long s = threadIdx.x % 32; s < splits; s += 32)
        m = bn_merge(m, bn_partial(ws, *c * splits + s, units, splits, s, V));
    *out = tocha::team_combine(m, 32u, false,
                               [](bn_moments<A> a, bn_moments<A> b) { return bn_merge(a, b); });
    return true;
}

// Phase 2's walk over the tensor's units: a CTA a span of U x blockDim units, each thread U of
// them a stride of the CTA apart (their channels stepped from the first's), all U loaded
// before any is used. load(j, at) issues unit j's loads (at: its first element), fn(j, at, c)
// computes and stores it (c: its channel).
template <int U, int V, typename L, typename F>
__device__ __forceinline__ void bn_each_unit(long long N, long long C, long long plane, L load, F fn)
{
    const long long upp = plane / V, units = N * C * upp, team = blockDim.x, span = U * team;
    const long long q = bn_div(team, upp), r = team - q * upp, qc = q - bn_div(q, C) * C;
    for (long long u = blockIdx.x * span + threadIdx.x; u < units; u += (long long)gridDim.x * span) {
        const long long row = bn_div(u, upp);
        long long k = u - row * upp, c = row - bn_div(row, C) * C, cs[U];
#pragma unroll
        for (int j = 0; j < U; ++j) {
            cs[j] = c;
            if (u + j * team < units) load(j, (u + j * team) * V);
            k += r, c += qc;
            if (k >= upp) k -= upp, ++c;
            if (c >= C) c -= C;
        }
#pragma unroll
        for (int j = 0; j < U; ++j)
            if (u + j * team < units) fn(j, (u + j * team) * V, cs[j]);
    }
}

// Channel c's coefficients of the forward: the batch's from phase 1 (training), or from the
// running statistics.
template <int AFFINE, typename T, typename A>
__device__ __forceinline__ void bn_forward_coef(const T *w, const T *b, const T *running_mean, const T *running_var,
                                                const A *coef, long long c, A eps, int training, A *mean, A *scale,
                                                A *shift)
{
    if (training) {
        *mean = coef[4 * c], *scale = coef[4 * c + 1], *shift = coef[4 * c + 2];
        return;
    }
    const A rstd = bn_rsqrt(tocha::to_compute(running_var[c]) + eps);
    *mean = tocha::to_compute(running_mean[c]);
    *scale = AFFINE ? tocha::to_compute(w[c]) * rstd : rstd;
    *shift = AFFINE ? tocha::to_compute(b[c]) : (A)0;
}

// Phase 2 of the forward in units of V: y = (x - mean) scale + shift. NCHW (x [N, C, plane]): a
// unit lies in one channel, its coefficients read once. Channels-last (NHWC, x [N, C] with C
// the channels): a unit is V channels of one row, each element's coefficients its own (the
// units walked as N rows of C / V "channels" of one unit each).
template <int V, int AFFINE, bool NHWC = false, typename T, typename A>
__device__ __forceinline__ void bn_normalise(const T *x, const T *w, const T *b, const T *running_mean,
                                             const T *running_var, T *y, const A *coef, long long N,
                                             long long C, long long plane, A eps, int training)
{
    // BN_UNITS units whatever their width: 8-byte units twice over (32 bytes) spill under 64
    // registers in the forward.
    const int U = BN_UNITS;
    bn_unit<T, V> xs[U];
    bn_each_unit<U, V>(
        N, NHWC ? C / V : C, NHWC ? V : plane, [&](int j, long long at) { xs[j].load(x + at); },
        [&](int j, long long at, long long c) {
            A mean, scale, shift, out[V];
            if (!NHWC) bn_forward_coef<AFFINE>(w, b, running_mean, running_var, coef, c, eps, training, &mean, &scale, &shift);
#pragma unroll
            for (int e = 0; e < V; ++e) {
                if (NHWC)
                    bn_forward_coef<AFFINE>(w, b, running_mean, running_var, coef, c * V + e, eps, training, &mean,
                                            &scale, &shift);
                out[e] = (xs[j].at(e) - mean) * scale + shift;
            }
            tocha::store_unit<T, V>(y + at, out);
        });
}

// Channel c's coefficients of the backward, dx = a dy - gm - (x - mean) k: training's from phase
// 1 (norm.cu's group norm writes the same four a (sample, channel) plane); inference's a = w
// rstd from the running variance, gm = k = 0.
template <int AFFINE, typename T, typename A>
__device__ __forceinline__ void bn_backward_coef(const T *w, const T *running_var, const A *coef, long long c, A eps,
                                                 int training, A *mean, A *a, A *gm, A *k)
{
    if (training) {
        *mean = coef[4 * c], *a = coef[4 * c + 1], *gm = coef[4 * c + 2], *k = coef[4 * c + 3];
        return;
    }
    const A rstd = bn_rsqrt(tocha::to_compute(running_var[c]) + eps);
    *mean = *gm = *k = (A)0;
    *a = AFFINE ? tocha::to_compute(w[c]) * rstd : rstd;
}

// Phase 2 of the backward in units of V: dx = a dy - gm - (x - mean) k, the coefficients read as
// the forward's are (NCHW once a unit, NHWC once an element); x unread in inference.
template <int V, int AFFINE, bool NHWC = false, typename T, typename A>
__device__ __forceinline__ void bn_gradient(const T *x, const T *w, const T *running_var, const T *dy,
                                            T *dx, const A *coef, long long N, long long C,
                                            long long plane, A eps, int training)
{
    const int U = bn_flight<T, V, BN_UNITS / 2>::value;
    bn_unit<T, V> xs[U], gs[U];
    bn_each_unit<U, V>(
        N, NHWC ? C / V : C, NHWC ? V : plane,
        [&](int j, long long at) {
            if (training) xs[j].load(x + at);
            gs[j].load(dy + at);
        },
        [&](int j, long long at, long long c) {
            A out[V], mean, a, gm, k;
            if (!NHWC) bn_backward_coef<AFFINE>(w, running_var, coef, c, eps, training, &mean, &a, &gm, &k);
#pragma unroll
            for (int e = 0; e < V; ++e) {
                if (NHWC) bn_backward_coef<AFFINE>(w, running_var, coef, c * V + e, eps, training, &mean, &a, &gm, &k);
                out[e] = training ? a * gs[j].at(e) - gm - (xs[j].at(e) - mean) * k : a * gs[j].at(e);
            }
            tocha::store_unit<T, V>(dx + at, out);
        });
}

// x [N, C, plane] (NHWC 0) or channels-last [N, C] with N the rows and plane 1 (NHWC 1).
template <typename T, int AFFINE, int RUNNING, int NHWC>
__device__ void tocha_batch_norm(const T *x, const T *w, const T *b, T *running_mean, T *running_var,
                                 T *y, unsigned char *ws, long long N, long long C, long long plane,
                                 long long splits, double eps, double momentum, int training, int phase)
{
    typedef typename tocha::compute<T>::type A;
    A *part = (A *)ws, *coef = part + 4 * C * splits;
    const int V = bn_width<T>(NHWC ? C : plane, x, y, x);
    if (phase == 0) {
        bn_phase0<false, NHWC>(x, x, part, N, C, plane, splits, V);
        return;
    }
    if (phase == 1) {
        long long c;
        bn_moments<A> m;
        if (!bn_channel(part, N, C, plane, splits, NHWC ? 1 : V, &c, &m) || threadIdx.x % 32 != 0) return;
        const long long M = N * plane;
        const A var = m.m2 / (A)M, rstd = bn_rsqrt(var + (A)eps);
        coef[4 * c] = m.mean;
        coef[4 * c + 1] = AFFINE ? tocha::to_compute(w[c]) * rstd : rstd;
        coef[4 * c + 2] = AFFINE ? tocha::to_compute(b[c]) : (A)0;
        if (RUNNING) {
            const A mo = (A)momentum, unbiased = M > 1 ? var * (A)M / (A)(M - 1) : var;
            running_mean[c] =
                tocha::from_compute<T>(((A)1 - mo) * tocha::to_compute(running_mean[c]) + mo * m.mean);
            running_var[c] =
                tocha::from_compute<T>(((A)1 - mo) * tocha::to_compute(running_var[c]) + mo * unbiased);
        }
        return;
    }
#define BN_NORMALISE(W) bn_normalise<W, AFFINE, NHWC != 0>(x, w, b, running_mean, running_var, y, coef, N, C, plane, (A)eps, training)
    BN_EACH_WIDTH(T, V, BN_NORMALISE);
#undef BN_NORMALISE
}

template <typename T, int AFFINE, int RUNNING, int NHWC>
__device__ void tocha_batch_norm_backward(const T *x, const T *w, const T *running_mean,
                                          const T *running_var, const T *dy, T *dx, T *dw, T *db,
                                          unsigned char *ws, long long N, long long C, long long plane,
                                          long long splits, double eps, int training, int phase)
{
    typedef typename tocha::compute<T>::type A;
    A *part = (A *)ws, *coef = part + 4 * C * splits;
    const int V = bn_width<T>(NHWC ? C : plane, x, dy, dx);
    if (phase == 0) {
        bn_phase0<true, NHWC>(x, dy, part, N, C, plane, splits, V);
        return;
    }
    if (phase == 1) {
        long long c;
        bn_moments<A> m;
        if (!bn_channel(part, N, C, plane, splits, NHWC ? 1 : V, &c, &m) || threadIdx.x % 32 != 0) return;
        const long long M = N * plane;
        A mean = m.mean, rstd, h = m.h;
        if (training) {
            rstd = bn_rsqrt(m.m2 / (A)M + (A)eps);
        } else {
            // sum(dy (x - running mean)) from the batch's sum(dy (x - mean)).
            const A rm = tocha::to_compute(running_mean[c]);
            rstd = bn_rsqrt(tocha::to_compute(running_var[c]) + (A)eps);
            h += (m.mean - rm) * m.g;
            mean = rm;
        }
        const A sgx = h * rstd, a = AFFINE ? tocha::to_compute(w[c]) * rstd : rstd;
        coef[4 * c] = mean;
        coef[4 * c + 1] = a;
        coef[4 * c + 2] = a * m.g / (A)M;
        coef[4 * c + 3] = a * rstd * sgx / (A)M;
        if (AFFINE) dw[c] = tocha::from_compute<T>(sgx), db[c] = tocha::from_compute<T>(m.g);
        return;
    }
#define BN_GRADIENT(W) bn_gradient<W, AFFINE, NHWC != 0>(x, w, running_var, dy, dx, coef, N, C, plane, (A)eps, training)
    BN_EACH_WIDTH(T, V, BN_GRADIENT);
#undef BN_GRADIENT
}
