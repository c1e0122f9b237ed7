// norm.cu: layer, RMS and group normalisation, forward and backward. x is viewed as `rows`
// rows of n elements, each normalised on its own: layer norm over the last dimensions (a row a
// normalised shape, the affine parameter of element j is j), group norm over a group of
// channels of one sample (row r = sample r / G, group r % G: per = n / HW channels of HW
// elements each, channel c of the row using parameter (r % G) * per + c). RMS (1: RMS norm, no
// mean), AFFINE (0 none, 1 weight, 2 weight and bias) and GROUPED (1: group norm) are
// compile-time constants; halves compute in f32, f64 in f64.
//
// Rows go to teams (tocha.cuh's team_of: rows_mode -1 a CTA a row, 1 to 32 that many lanes of
// a warp a row; -2, layer and RMS norm's rows of 8 to 16 KB, a CTA a row held in registers,
// below; the host picks it with tensor_reduce's team_mapping, from the row for layer
// norm and from the channel plane for group norm, which walks its row plane by plane), which
// read in 16-byte groups (row_each, row_walk).
//
// Forward: y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps) (biased variance; RMS
// norm: mean 0, var the mean square). Two reads of the row: its moments (Welford's, one read;
// RMS: the sum of squares), then the output; a held row (below) one.
//
// Backward, three launches of tocha_norm_backward (phase 0, 1, 2), deterministic (no atomics):
// - phase 0, a team a row: the mean (a read of x), then, in one read of x and dy, the sum of
//   squared deviations (so rstd), sum(g) and sum(g (x - mean)) with g = dy w, and last
//   dx = rstd (g - mean(g) - xhat mean(g xhat)), xhat = (x - mean) rstd (RMS: no mean(g) term).
//   Its mean and rstd go to the workspace (stats). A held row reads x and dy once (nm_held_dx). Group norm sums g per channel, and keeps each
//   (sample, channel)'s sum(dy xhat) and sum(dy) in the workspace (planes [2][N][C]);
// - phase 1, the parameters' sums as a column reduction: a CTA of 8 warps takes a tile of 32
//   16-byte groups of columns (a lane V = 16 / sizeof(T) columns), its warps a row in 8 each
//   of the split's rows, then adds its warps' sums in shared memory in warp order. Layer norm's
//   columns are x's (dw_j = sum over rows of dy xhat, db_j = sum of dy), group norm's the
//   channels of the per-(sample, channel) planes. With splits > 1 the rows are cut into splits
//   (gridDim.y) and each writes its partial sums to the workspace ([2][splits][columns]);
// - phase 2 (splits > 1): the same column reduction over those partials gives dw and db.

// Group norm's split path (kernels tocha_group_norm_split and tocha_group_norm_split_backward
// of their own, so that each path's registers are its own; the host takes it where a CTA a row
// would not keep the memory busy: rows too few, or planes too short for 64 bytes in flight a
// thread): batch_norm.cu's split statistics over x viewed as [1, N C, HW], a (sample, channel)
// plane in place of a batch norm channel (its source comes before this one):
// - forward, three launches: phase 0 the planes' partial moments (bn_partials: a CTA or, with
//   pwarps, a warp a plane's split; 16-byte units, 64 bytes in flight a thread); phase 1 a warp a row merges its planes'
//   partials in a fixed order and writes each plane's (mean, w rstd, b); phase 2 is
//   batch norm's elementwise pass over the whole tensor (bn_normalise);
// - backward, five: phase 0 the planes' partials with sum(dy) and sum(dy (x - mean)); phase 1 a
//   warp a row merges them (each plane's two sums scaled by its weight, so that the row's are
//   sum(g) and sum(g (x - mean)), g = dy w) into each plane's dx coefficients and the planes
//   pa, pb of sum(dy xhat) and sum(dy); phase 2 batch norm's dx pass (bn_gradient); phases 3
//   and 4 the column reduction below, as phases 1 and 2 of the row path.

#define NM_WARPS 8 // a CTA's warps: the host launches CTAs of 256 threads

// Layer and RMS norm's held rows: a team a row of whole 16-byte groups, at most NM_HELD groups
// a thread (f32 and halves), loaded once into registers (x, and dy in the backward) before
// anything is computed, so that the row is read from memory once: the mean and the sum of
// squared deviations are two passes over the registers, then the output is written from them.
// The team is a CTA (rows_mode -2: norm.lua sends rows of 8 to 16 KB there) or a warp's team
// (rows_mode 1 to 32) whose row has no more than NM_HELD groups a lane (rows of up to 2 KB on
// 32 lanes: team_mapping leaves a lane about three). A row the kernel finds off a 16-byte
// boundary is read through row_each / row_walk instead (a CTA path for rows_mode -2).
#define NM_HELD 4

__device__ __forceinline__ float nm_rsqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double nm_rsqrt(double v) { return 1.0 / sqrt(v); }

// Three sums combined across a team at once.
template <typename A> struct nm_sums {
    A a, b, c;
};
template <typename A> __device__ __forceinline__ nm_sums<A> shfl_xor(nm_sums<A> v, int o)
{
    nm_sums<A> r;
    r.a = tocha::shfl_xor(v.a, o), r.b = tocha::shfl_xor(v.b, o), r.c = tocha::shfl_xor(v.c, o);
    return r;
}
template <typename A> __device__ __forceinline__ nm_sums<A> nm_team(nm_sums<A> v, unsigned team, bool cta)
{
    return tocha::team_combine(v, team, cta, [](nm_sums<A> x, nm_sums<A> y) {
        x.a += y.a, x.b += y.b, x.c += y.c;
        return x;
    });
}

// The mean and rstd of the row p: its len elements (0 for a team past the last row, which
// still takes part in the team's combining) of a row of n. One read.
template <typename T, int RMS, typename A>
__device__ __forceinline__ void nm_stats(const T *p, long long len, long long n, unsigned member, unsigned team, bool cta,
                                         double eps, A *mean, A *rstd)
{
    if (RMS) {
        A q = (A)0;
        tocha::row_each(p, len, member, team, [&](T e, long long) {
            const A v = tocha::to_compute(e);
            q += v * v;
        });
        *mean = (A)0;
        *rstd = nm_rsqrt(tocha::team_sum(q, team, cta) / (A)n + (A)eps);
        return;
    }
    tocha::moments<A> v = tocha::no_moments<A>();
    tocha::row_each(p, len, member, team, [&](T e, long long) { tocha::moments_push(v, tocha::to_compute(e)); });
    v = tocha::team_combine(v, team, cta, [](tocha::moments<A> a, tocha::moments<A> b) { return tocha::moments_merge(a, b); });
    *mean = v.mean;
    *rstd = nm_rsqrt(v.m2 / (A)n + (A)eps);
}


// Whether a row of n takes the held path: rows_mode -2 or a warp's team (1 to 32), whole
// 16-byte groups, no more than NM_HELD a thread of the team, and every row pointer on a
// 16-byte boundary.
template <typename T>
__device__ __forceinline__ bool nm_held(int rows_mode, long long n, const void *a, const void *b, const void *c)
{
    const int V = tocha::vec16<T>::n;
    const long long team = rows_mode == -2 ? (long long)blockDim.x : rows_mode > 0 ? rows_mode : 0;
    // f64 keeps the unheld paths: its held registers (twice a half's) would cost the kernel's
    // every path its occupancy.
    return sizeof(T) < 8 && team > 0 && n % V == 0 && n / V <= (long long)NM_HELD * team &&
           (((unsigned long long)a | (unsigned long long)b | (unsigned long long)c) & 15u) == 0;
}

// The 16-byte group of parameters at p (V of them): one load where p is on a 16-byte
// boundary, else element by element.
template <typename T> __device__ __forceinline__ void nm_param_group(const T *p, unsigned out[4])
{
    if ((((unsigned long long)p) & 15u) == 0) {
        tocha::load_words<16>(p, out);
        return;
    }
    tocha::pack16<T> t;
#pragma unroll
    for (int e = 0; e < tocha::vec16<T>::n; ++e) t.set(e, tocha::load_element(p + e));
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = t.w[i];
}

// A held row's thread holds groups member + j team (j < NM_HELD) of the row's `groups` (0 for a
// team past the last row, which still takes part in the team's combining).
#define NM_EACH_HELD(j, g)                                                                                             \
    _Pragma("unroll") for (int j = 0; j < NM_HELD; ++j) if (const long long g = member + j * (long long)team; g < groups)

// The held row's mean (0 for RMS norm) and rstd from its groups in r: two passes over the
// registers.
template <typename T, int RMS, typename A>
__device__ __forceinline__ void nm_held_stats(const unsigned (*r)[4], long long groups, long long n, unsigned member,
                                              unsigned team, bool cta, double eps, A *mean, A *rstd)
{
    const int V = tocha::vec16<T>::n;
    A m = (A)0;
    if (!RMS) {
        A s = (A)0;
        NM_EACH_HELD(j, g)
#pragma unroll
        for (int e = 0; e < V; ++e) s += tocha::to_compute(tocha::element_of<T>(r[j], e));
        m = tocha::team_sum(s, team, cta) / (A)n;
    }
    A q = (A)0;
    NM_EACH_HELD(j, g)
#pragma unroll
    for (int e = 0; e < V; ++e) {
        const A d = tocha::to_compute(tocha::element_of<T>(r[j], e)) - m;
        q += d * d;
    }
    *mean = m;
    *rstd = nm_rsqrt(tocha::team_sum(q, team, cta) / (A)n + (A)eps);
}

// The held forward of row p into out (the header): x read once, the parameters in 16-byte
// groups.
template <typename T, int RMS, int AFFINE>
__device__ __forceinline__ void nm_held_forward(const T *p, const T *w, const T *b, T *out, long long groups,
                                                long long n, unsigned member, unsigned team, bool cta, double eps)
{
    typedef typename tocha::compute<T>::type A;
    const int V = tocha::vec16<T>::n;
    unsigned r[NM_HELD][4];
    NM_EACH_HELD(j, g) tocha::load_words<16>(p + g * V, r[j]);
    A mean, rstd;
    nm_held_stats<T, RMS>(r, groups, n, member, team, cta, eps, &mean, &rstd);
    NM_EACH_HELD(j, g)
    {
        unsigned wg[4], bg[4];
        if (AFFINE >= 1) nm_param_group(w + g * V, wg);
        if (AFFINE == 2) nm_param_group(b + g * V, bg);
        tocha::pack16<T> o;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            A v = (tocha::to_compute(tocha::element_of<T>(r[j], e)) - mean) * rstd;
            if (AFFINE >= 1) v = v * tocha::to_compute(tocha::element_of<T>(wg, e));
            if (AFFINE == 2) v = v + tocha::to_compute(tocha::element_of<T>(bg, e));
            o.set(e, tocha::from_compute<T>(v));
        }
        tocha::store_pack(out + g * V, o);
    }
}

// The held backward's dx of row `row` (x at p, dy at d, dx at o; `groups` 0 for a team past
// the last row), its (mean, rstd) to st[2 row]: x and dy read once, and the team's sums in
// two combinings (RMS norm: one): sum(x), sum(g) and sum(g x) together (g = dy w), then the
// sum of squared deviations from the mean (RMS norm: sum(x^2) with the first), so that
// sum(g (x - mean)) = sum(g x) - mean sum(g).
template <typename T, int RMS, int AFFINE, typename A>
__device__ __forceinline__ void nm_held_dx(const T *p, const T *w, const T *d, T *o, A *st, long long row,
                                           long long groups, long long n, unsigned member, unsigned team, bool cta,
                                           double eps)
{
    const int V = tocha::vec16<T>::n;
    unsigned rx[NM_HELD][4], rd[NM_HELD][4];
    NM_EACH_HELD(j, g) tocha::load_words<16>(p + g * V, rx[j]), tocha::load_words<16>(d + g * V, rd[j]);
    // a: sum(x) (RMS: sum(x^2)), b: sum(g), c: sum(g x).
    nm_sums<A> s;
    s.a = s.b = s.c = (A)0;
    NM_EACH_HELD(j, g)
    {
        unsigned wg[4];
        if (AFFINE >= 1) nm_param_group(w + g * V, wg);
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const A xv = tocha::to_compute(tocha::element_of<T>(rx[j], e));
            A gv = tocha::to_compute(tocha::element_of<T>(rd[j], e));
            if (AFFINE >= 1) gv = gv * tocha::to_compute(tocha::element_of<T>(wg, e));
            s.a += RMS ? xv * xv : xv, s.b += gv, s.c += gv * xv;
        }
    }
    s = nm_team(s, team, cta);
    A mean = (A)0, q = s.a;
    if (!RMS) {
        mean = s.a / (A)n, q = (A)0;
        NM_EACH_HELD(j, g)
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const A dv = tocha::to_compute(tocha::element_of<T>(rx[j], e)) - mean;
            q += dv * dv;
        }
        q = tocha::team_sum(q, team, cta);
    }
    const A rstd = nm_rsqrt(q / (A)n + (A)eps);
    if (groups > 0 && member == 0) st[2 * row] = mean, st[2 * row + 1] = rstd;
    const A mg = RMS ? (A)0 : s.b / (A)n, kx = rstd * rstd * (s.c - mean * s.b) / (A)n;
    NM_EACH_HELD(j, g)
    {
        unsigned wg[4];
        if (AFFINE >= 1) nm_param_group(w + g * V, wg);
        tocha::pack16<T> out;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            A gv = tocha::to_compute(tocha::element_of<T>(rd[j], e));
            if (AFFINE >= 1) gv = gv * tocha::to_compute(tocha::element_of<T>(wg, e));
            const A xm = tocha::to_compute(tocha::element_of<T>(rx[j], e)) - mean;
            out.set(e, tocha::from_compute<T>(rstd * (gv - mg - xm * kx)));
        }
        tocha::store_pack(o + g * V, out);
    }
}

// The moments of plane p (its psplits partials merged in order; units of V elements a plane).
template <typename A>
__device__ __forceinline__ bn_moments<A> gn_plane(const A *part, long long p, long long units, long long psplits, int V)
{
    bn_moments<A> m = bn_empty<A>();
    for (long long s = 0; s < psplits; ++s) m = bn_merge(m, bn_partial(part, p * psplits + s, units, psplits, s, V));
    return m;
}

// Split path, phase 1: a warp a row (sample r / G, group r % G, planes r per .. r per + per - 1)
// merges its planes' moments (lanes a plane at a time, then the warp's tree: a fixed order)
// and writes each plane's four coefficients to coef: forward (mean, w rstd, b); backward
// (mean, a = w rstd, rstd sum(g) / n, rstd^3 sum(g (x - mean)) / n) for dx = a dy - gm -
// (x - mean) k, and with parameters each plane's sum(dy xhat) and sum(dy) to pa and pb.
template <typename T, int AFFINE, bool BACKWARD, typename A>
__device__ __forceinline__ void gn_coefficients(const T *w, const T *b, const A *part, A *coef, A *pa, A *pb,
                                                long long rows, long long G, long long per, long long HW,
                                                long long psplits, int V, double eps)
{
    const long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (r >= rows) return; // the whole warp
    const unsigned lane = threadIdx.x % 32;
    const long long first = (r % G) * per, p0 = r * per, units = HW / V;
    bn_moments<A> m = bn_empty<A>();
    for (long long c = lane; c < per; c += 32) {
        bn_moments<A> pc = gn_plane(part, p0 + c, units, psplits, V);
        if (BACKWARD && AFFINE) {
            const A wc = tocha::to_compute(w[first + c]);
            pc.g *= wc, pc.h *= wc;
        }
        m = bn_merge(m, pc);
    }
    m = tocha::team_combine(m, 32u, false, [](bn_moments<A> x, bn_moments<A> y) { return bn_merge(x, y); });
    const A n = (A)m.n, rstd = nm_rsqrt(m.m2 / n + (A)eps);
    for (long long c = lane; c < per; c += 32) {
        const long long p = p0 + c;
        const A wc = AFFINE ? tocha::to_compute(w[first + c]) : (A)1;
        A *k = coef + 4 * p;
        k[0] = m.mean, k[1] = wc * rstd;
        if (!BACKWARD) {
            k[2] = AFFINE ? tocha::to_compute(b[first + c]) : (A)0;
            continue;
        }
        k[2] = rstd * m.g / n, k[3] = rstd * rstd * rstd * m.h / n;
        if (AFFINE) {
            // sum(dy (x - row mean)) from the plane's own mean.
            const bn_moments<A> pc = gn_plane(part, p, units, psplits, V);
            pa[p] = rstd * (pc.h + (pc.mean - m.mean) * pc.g), pb[p] = pc.g;
        }
    }
}

// The split path's forward (the header): phase 0, 1 or 2.
template <typename T, int AFFINE>
__device__ __forceinline__ void gn_split_forward(const T *x, const T *w, const T *b, T *y, unsigned char *ws,
                                                 long long rows, long long n, long long G, long long HW,
                                                 long long psplits, int pwarps, double eps, int phase)
{
    typedef typename tocha::compute<T>::type A;
    // Phase 0 first, from the arguments alone: values shared by the phases and computed before
    // the branch stay live in registers and spilled under 64.
    if (phase == 0) {
        bn_partials<false>(x, x, (A *)ws, 1, rows * (n / HW), HW, psplits, bn_width<T>(HW, x, y, x), pwarps != 0);
        return;
    }
    const long long per = n / HW, planes = rows * per;
    A *part = (A *)ws, *coef = part + 4 * planes * psplits;
    const int V = bn_width<T>(HW, x, y, x);
    if (phase == 1) {
        gn_coefficients<T, AFFINE, false>(w, b, part, coef, coef, coef, rows, G, per, HW, psplits, V, eps);
        return;
    }
#define GN_NORMALISE(W) bn_normalise<W, 0>(x, w, b, x, x, y, coef, 1, planes, HW, (A)eps, 1)
    BN_EACH_WIDTH(T, V, GN_NORMALISE);
#undef GN_NORMALISE
}

// The row path's forward (a team a row; psplits, pwarps and phase unused: one launch).
template <typename T, int RMS, int AFFINE, int GROUPED>
__device__ void tocha_norm(const T *x, const T *w, const T *b, T *y, unsigned char *ws, long long rows, long long n,
                           long long G, long long HW, double eps, int rows_mode, long long psplits, int pwarps,
                           int phase)
{
    typedef typename tocha::compute<T>::type A;
    const bool cta = rows_mode < 0;
    long long row;
    unsigned member, team;
    tocha::team_of(rows_mode, &row, &member, &team);
    if (cta && row >= rows) return; // the whole CTA
    if (!GROUPED && nm_held<T>(rows_mode, n, x, y, y)) {
        const long long r = row < rows ? row : 0;
        nm_held_forward<T, RMS, AFFINE>(x + r * n, w, b, y + r * n, row < rows ? n / tocha::vec16<T>::n : 0, n, member,
                                        team, cta, eps);
        return;
    }
    const bool live = row < rows;   // a team of a warp past the end stays for the shuffles
    const T *p = x + (live ? row : 0) * n;
    T *out = y + (live ? row : 0) * n;
    A mean, rstd;
    nm_stats<T, RMS>(p, live ? n : 0, n, member, team, cta, eps, &mean, &rstd);
    if (!live) return;
    if (GROUPED) {
        // A channel at a time: its parameters once, not once an element.
        const long long per = n / HW, first = (row % G) * per;
        for (long long c = 0; c < per; ++c) {
            const A scale = AFFINE >= 1 ? rstd * tocha::to_compute(w[first + c]) : rstd;
            const A shift = AFFINE == 2 ? tocha::to_compute(b[first + c]) : (A)0;
            const T *pc = p + c * HW;
            tocha::row_walk<1, true>(pc, pc, out + c * HW, HW, member, team, [&](T e, T, long long) {
                return tocha::from_compute<T>((tocha::to_compute(e) - mean) * scale + shift);
            });
        }
        return;
    }
    tocha::row_walk<1, true>(p, p, out, n, member, team, [&](T e, T, long long k) {
        A v = (tocha::to_compute(e) - mean) * rstd;
        if (AFFINE >= 1) v = v * tocha::to_compute(w[k]);
        if (AFFINE == 2) v = v + tocha::to_compute(b[k]);
        return tocha::from_compute<T>(v);
    });
}

// Group norm's split path, forward: phases 0 to 2 (gn_split_forward), a kernel of its own so
// that its registers are its own, not the row path's (tocha_norm's parameters, rows_mode unused).
template <typename T, int RMS, int AFFINE, int GROUPED>
__device__ void tocha_group_norm_split(const T *x, const T *w, const T *b, T *y, unsigned char *ws, long long rows,
                                       long long n, long long G, long long HW, double eps, int rows_mode,
                                       long long psplits, int pwarps, int phase)
{
    gn_split_forward<T, AFFINE>(x, w, b, y, ws, rows, n, G, HW, psplits, pwarps, eps, phase);
}

// Phase 0: dx, a team a row; the row's (mean, rstd) to st[2 row], and for group norm with
// parameters each channel's sum(dy xhat) and sum(dy) to the planes pa and pb ([N][C]).
template <typename T, int RMS, int AFFINE, int GROUPED, typename A>
__device__ __forceinline__ void nm_dx(const T *x, const T *w, const T *dy, T *dx, A *st, A *pa, A *pb, long long rows,
                                      long long n, long long G, long long HW, double eps, int rows_mode)
{
    const bool cta = rows_mode < 0;
    long long row;
    unsigned member, team;
    tocha::team_of(rows_mode, &row, &member, &team);
    if (cta && row >= rows) return;
    if (!GROUPED && nm_held<T>(rows_mode, n, x, dy, dx)) {
        const long long r = row < rows ? row : 0;
        nm_held_dx<T, RMS, AFFINE>(x + r * n, w, dy + r * n, dx + r * n, st, r, row < rows ? n / tocha::vec16<T>::n : 0,
                                   n, member, team, cta, eps);
        return;
    }
    const bool live = row < rows;
    const long long r = live ? row : 0, len = live ? n : 0;
    const T *p = x + r * n, *g = dy + r * n;
    A mean = (A)0;
    if (!RMS) {
        A s = (A)0;
        tocha::row_each(p, len, member, team, [&](T e, long long) { s += tocha::to_compute(e); });
        mean = tocha::team_sum(s, team, cta) / (A)n;
    }
    // The sums, from one read of x and dy: q of (x - mean)^2, sg of g, sgd of g (x - mean).
    A q = (A)0, sg = (A)0, sgd = (A)0;
    const long long per = GROUPED ? n / HW : 1, first = GROUPED ? (r % G) * per : 0;
    const long long plane = live ? HW : 0, at = GROUPED ? (r / G) * G * per + first : 0;
    if (GROUPED) {
        for (long long c = 0; c < per; ++c) {
            nm_sums<A> s;
            s.a = s.b = s.c = (A)0;
            tocha::row_walk<2, false>(p + c * HW, g + c * HW, (T *)0, plane, member, team, [&](T e, T d, long long) {
                const A xm = tocha::to_compute(e) - mean, gv = tocha::to_compute(d);
                s.a += xm * xm, s.b += gv, s.c += gv * xm;
            });
            s = nm_team(s, team, cta);
            const A wc = AFFINE >= 1 ? tocha::to_compute(w[first + c]) : (A)1;
            q += s.a, sg += wc * s.b, sgd += wc * s.c;
            if (AFFINE >= 1 && live && member == 0) pa[at + c] = s.c, pb[at + c] = s.b;
        }
    } else {
        nm_sums<A> s;
        s.a = s.b = s.c = (A)0;
        tocha::row_walk<2, false>(p, g, (T *)0, len, member, team, [&](T e, T d, long long k) {
            const A xm = tocha::to_compute(e) - mean;
            A gv = tocha::to_compute(d);
            if (AFFINE >= 1) gv = gv * tocha::to_compute(w[k]);
            s.a += xm * xm, s.b += gv, s.c += gv * xm;
        });
        s = nm_team(s, team, cta);
        q = s.a, sg = s.b, sgd = s.c;
    }
    if (!live) return;
    const A rstd = nm_rsqrt(q / (A)n + (A)eps);
    if (member == 0) {
        st[2 * row] = mean, st[2 * row + 1] = rstd;
        // The planes hold sum(dy xhat): this thread's own sums of dy (x - mean), scaled now
        // that rstd is known.
        if (GROUPED && AFFINE >= 1)
            for (long long c = 0; c < per; ++c) pa[at + c] *= rstd;
    }
    // dx = rstd (g - mean(g)) - (x - mean) rstd^3 mean(g (x - mean))
    const A mg = RMS ? (A)0 : sg / (A)n, kx = rstd * rstd * sgd / (A)n;
    T *o = dx + row * n;
    if (GROUPED) {
        for (long long c = 0; c < per; ++c) {
            const A wc = AFFINE >= 1 ? tocha::to_compute(w[first + c]) : (A)1;
            tocha::row_walk<2, true>(p + c * HW, g + c * HW, o + c * HW, HW, member, team, [&](T e, T d, long long) {
                const A xm = tocha::to_compute(e) - mean;
                return tocha::from_compute<T>(rstd * (tocha::to_compute(d) * wc - mg - xm * kx));
            });
        }
        return;
    }
    tocha::row_walk<2, true>(p, g, o, n, member, team, [&](T e, T d, long long k) {
        const A xm = tocha::to_compute(e) - mean;
        A gv = tocha::to_compute(d);
        if (AFFINE >= 1) gv = gv * tocha::to_compute(w[k]);
        return tocha::from_compute<T>(rstd * (gv - mg - xm * kx));
    });
}

// Phases 1 and 2: the column reduction (header). from_x: layer norm's phase 1, which reads x,
// dy and the rows' stats; otherwise the planes pw and pb ([R][cols] each) are summed over R.
// Writes the split's partials to ow ([2][splits][cols]) where `partial`, else dw and db.
template <typename T, int AFFINE, typename A>
__device__ __forceinline__ void nm_columns(const T *x, const T *dy, const A *st, const A *pw, const A *pb, bool from_x,
                                           long long R, long long cols, long long splits, bool partial, A *ow, T *dw, T *db)
{
    const int V = tocha::vec16<T>::n;
    const long long part = (R + splits - 1) / splits, lo = tocha::min_ll(blockIdx.y * part, R), hi = tocha::min_ll(lo + part, R);
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long j0 = (long long)blockIdx.x * 32 * V + (long long)lane * V;
    A aw[V], ab[V];
#pragma unroll
    for (int e = 0; e < V; ++e) aw[e] = ab[e] = (A)0;
    if (from_x) {
        // Whole 16-byte groups where every row starts on a 16-byte boundary; else element by element.
        const bool vec = j0 + V <= cols && ((((unsigned long long)x | (unsigned long long)dy) & 15u) == 0) &&
                         (cols * (long long)sizeof(T)) % 16 == 0;
        for (long long r0 = lo + warp; r0 < hi; r0 += 2 * NM_WARPS) {
            unsigned wx[2][4], wg[2][4];
            if (vec) {
#pragma unroll
                for (int i = 0; i < 2; ++i)
                    if (r0 + i * NM_WARPS < hi) {
                        tocha::load_words<16>(x + (r0 + i * NM_WARPS) * cols + j0, wx[i]);
                        tocha::load_words<16>(dy + (r0 + i * NM_WARPS) * cols + j0, wg[i]);
                    }
            }
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const long long r = r0 + i * NM_WARPS;
                if (r >= hi) break;
                const A mean = st[2 * r], rstd = st[2 * r + 1];
#pragma unroll
                for (int e = 0; e < V; ++e) {
                    A xv, gv;
                    if (vec) {
                        xv = tocha::to_compute(tocha::element_of<T>(wx[i], e));
                        gv = tocha::to_compute(tocha::element_of<T>(wg[i], e));
                    } else {
                        if (j0 + e >= cols) break;
                        xv = tocha::to_compute(x[r * cols + j0 + e]);
                        gv = tocha::to_compute(dy[r * cols + j0 + e]);
                    }
                    aw[e] += gv * ((xv - mean) * rstd);
                    ab[e] += gv;
                }
            }
        }
    } else {
        for (long long r = lo + warp; r < hi; r += NM_WARPS)
#pragma unroll
            for (int e = 0; e < V; ++e)
                if (j0 + e < cols) aw[e] += pw[r * cols + j0 + e], ab[e] += pb[r * cols + j0 + e];
    }
    // The warps' sums, added in warp order.
    __shared__ A sums[2][NM_WARPS][32 * V];
#pragma unroll
    for (int e = 0; e < V; ++e) sums[0][warp][lane * V + e] = aw[e], sums[1][warp][lane * V + e] = ab[e];
    __syncthreads();
    for (int t = threadIdx.x; t < 2 * 32 * V; t += blockDim.x) {
        const int which = t / (32 * V), c = t % (32 * V);
        const long long j = (long long)blockIdx.x * 32 * V + c;
        if (j >= cols || (which == 1 && AFFINE < 2)) continue;
        A s = sums[which][0][c];
        for (int k = 1; k < NM_WARPS; ++k) s += sums[which][k][c];
        if (partial)
            ow[(which * splits + blockIdx.y) * cols + j] = s;
        else if (which == 0)
            dw[j] = tocha::from_compute<T>(s);
        else
            db[j] = tocha::from_compute<T>(s);
    }
}

// The split path's backward (the header): phases 0 to 2 (tocha_group_norm_split_backward
// runs its column phases 3 and 4 with the row path's nm_columns). Workspace, in A: the planes' partials
// [N C][psplits][4], their coefficients [N C][4], the planes pa and pb [N][C] each, then with
// splits > 1 the column partials [2][splits][C].
template <typename T, int AFFINE>
__device__ __forceinline__ void gn_split_backward(const T *x, const T *w, const T *dy, T *dx, T *dw, T *db,
                                                  unsigned char *ws, long long rows, long long n, long long G,
                                                  long long HW, double eps, long long psplits, int pwarps, int phase)
{
    typedef typename tocha::compute<T>::type A;
    // Phase 0 first, from the arguments alone (as gn_split_forward).
    if (phase == 0) {
        bn_partials<true>(x, dy, (A *)ws, 1, rows * (n / HW), HW, psplits, bn_width<T>(HW, x, dy, dx), pwarps != 0);
        return;
    }
    const long long per = n / HW, planes = rows * per;
    A *part = (A *)ws, *coef = part + 4 * planes * psplits, *pa = coef + 4 * planes, *pb = pa + planes;
    const int V = bn_width<T>(HW, x, dy, dx);
    if (phase == 1) {
        gn_coefficients<T, AFFINE, true>(w, w, part, coef, pa, pb, rows, G, per, HW, psplits, V, eps);
        return;
    }
#define GN_GRADIENT(W) bn_gradient<W, 0>(x, w, x, dy, dx, coef, 1, planes, HW, (A)eps, 1)
    BN_EACH_WIDTH(T, V, GN_GRADIENT);
#undef GN_GRADIENT
}

// stats: the workspace, in A: the rows' (mean, rstd) pairs [rows][2], then for group norm with
// parameters the planes [2][N][C], then with splits > 1 the partials [2][splits][columns]
// (psplits and pwarps unused: the row path's launches).
template <typename T, int RMS, int AFFINE, int GROUPED>
__device__ void tocha_norm_backward(const T *x, const T *w, const T *dy, T *dx, T *dw, T *db, unsigned char *stats,
                                    long long rows, long long n, long long G, long long HW, double eps, int rows_mode,
                                    long long splits, long long psplits, int pwarps, int phase)
{
    typedef typename tocha::compute<T>::type A;
    A *st = (A *)stats;
    const long long samples = rows / G, cols = GROUPED ? G * (n / HW) : n;
    A *pa = st + 2 * rows, *pb = pa + (GROUPED ? samples * cols : 0);
    A *parts = st + 2 * rows + (GROUPED && AFFINE >= 1 ? 2 * samples * cols : 0);
    if (phase == 0) {
        nm_dx<T, RMS, AFFINE, GROUPED>(x, w, dy, dx, st, pa, pb, rows, n, G, HW, eps, rows_mode);
        return;
    }
    if (AFFINE == 0) return;
    if (phase == 1)
        nm_columns<T, AFFINE>(x, dy, st, pa, pb, !GROUPED, GROUPED ? samples : rows, cols, splits, splits > 1, parts, dw, db);
    else
        nm_columns<T, AFFINE>(x, dy, st, parts, parts + splits * cols, false, splits, cols, 1, false, parts, dw, db);
}

// Group norm's split path, backward: phases 0 to 2 (gn_split_backward), then 3 and 4, the
// column reduction of the planes pa and pb ([N][C] each, after the planes' partials and
// coefficients: [N C][psplits][4], [N C][4]) into dw and db through the column partials
// [2][splits][C]. A kernel of its own (tocha_norm_backward's parameters, rows_mode unused), so
// that its registers are its own, not the row path's.
template <typename T, int RMS, int AFFINE, int GROUPED>
__device__ void tocha_group_norm_split_backward(const T *x, const T *w, const T *dy, T *dx, T *dw, T *db,
                                                unsigned char *stats, long long rows, long long n, long long G,
                                                long long HW, double eps, int rows_mode, long long splits,
                                                long long psplits, int pwarps, int phase)
{
    typedef typename tocha::compute<T>::type A;
    if (phase < 3) {
        gn_split_backward<T, AFFINE>(x, w, dy, dx, dw, db, stats, rows, n, G, HW, eps, psplits, pwarps, phase);
        return;
    }
    if (AFFINE == 0) return;
    const long long cols = G * (n / HW), planes = rows * (n / HW), samples = rows / G;
    A *pa = (A *)stats + 4 * planes * psplits + 4 * planes, *pb = pa + planes, *parts = pb + planes;
    if (phase == 3)
        nm_columns<T, AFFINE>(x, dy, pa, pa, pb, false, samples, cols, splits, splits > 1, parts, dw, db);
    else
        nm_columns<T, AFFINE>(x, dy, pa, parts, parts + splits * cols, false, splits, cols, 1, false, parts, dw, db);
}
