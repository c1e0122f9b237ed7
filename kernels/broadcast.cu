// broadcast.cu: the gradients of tocha.Broadcast, y = g(a, b) over operands that broadcast (a
// residual add, a squeeze-and-excitation scale x * s[N, C, 1, 1]). The forward is tensor math's
// kernel, pointwise.cu's tocha_pointwise with g's pw_ struct. Compiled after pointwise.cu and
// reduction.cu, whose functions the phases below call. T the dtype (halves compute in f32, the
// accumulator A of compute<T>); FA and FB the gradient structs of g for a and for b (bc_grad_*
// below: apply(dy, other, self) with an arity that says which of the three they read).
//
// One kernel does every launch of the backward, a phase each (the host plans them from the
// shapes alone, so a result is the same on every device):
// - BC_FULL_BOTH: both operands of the output's shape (a residual add): both gradients in one
//   pass over the dense arrays, dy (and a and b where the gradients read them) read once, a
//   thread BC_VECTORS 16-byte vectors of each, loads issued together.
// - BC_FULL_A, BC_FULL_B: an operand of the output's shape, the other broadcast, takes its
//   gradient in one pointwise pass (tocha_pointwise over (dy, other, self), the other read
//   through its strides, on its chunk paths: 16-byte vectors, several a thread).
// - BC_COPY: an operand broadcast to the output's shape, dense, into the workspace, where a
//   reduction's gradient reads the other operand and it is not of the output's shape; or, for
//   g's of arity 3, the operand itself where it repeats along more than one run of dimensions
//   (along one, the sum reads its value once an output).
// - BC_SUM_A, BC_SUM_B: an operand that repeats along some dimensions sums its gradient over
//   them. The host views the output as [outer, n, inner] around the last run of repeated
//   dimensions; this pass computes each gradient element from dy (and the dense other and
//   self) as it reads them and sums it along n: reduction.cu's mappings and splits (a CTA or a
//   team of a warp's lanes a (row, split) in 16-byte groups, four in flight a lane; or a thread
//   a (column group, split) walking n, four rows in flight), partials or sums to y in A (acc)
//   or the dtype.
// - BC_REDUCE: a later pass, tocha_reduce's sum over partials or over an earlier run's sums (in
//   A) in the workspace.

#define BC_FULL_A 0
#define BC_FULL_B 1
#define BC_COPY 2
#define BC_SUM_A 3
#define BC_SUM_B 4
#define BC_REDUCE 5
#define BC_FULL_BOTH 6

// ---- the gradients: apply(dy, other, self), self the operand whose gradient it is ----

#define BC_DEV template <typename A> static __device__ __forceinline__
// add, and sub's a: dy.
struct bc_grad_pass {
    static const int arity = 1;
    BC_DEV A apply(A dy, A, A) { return dy; }
};
// sub's b: -dy.
struct bc_grad_neg {
    static const int arity = 1;
    BC_DEV A apply(A dy, A, A) { return -dy; }
};
// mul: dy times the other operand.
struct bc_grad_mul {
    static const int arity = 2;
    BC_DEV A apply(A dy, A other, A) { return dy * other; }
};
// div's a (a / b): dy / b.
struct bc_grad_div_a {
    static const int arity = 2;
    BC_DEV A apply(A dy, A b, A) { return dy / b; }
};
// div's b: -dy * a / (b * b).
struct bc_grad_div_b {
    static const int arity = 3;
    BC_DEV A apply(A dy, A a, A b) { return -dy * a / (b * b); }
};
// max (either operand): dy where self wins, 0 where it loses, half of dy on a tie (and where
// either is NaN), as elementwise.cu's ew_fn_max.
struct bc_grad_max {
    static const int arity = 3;
    BC_DEV A apply(A dy, A other, A self) { return self > other ? dy : self < other ? (A)0 : dy * (A)0.5; }
};
struct bc_grad_min {
    static const int arity = 3;
    BC_DEV A apply(A dy, A other, A self) { return self < other ? dy : self > other ? (A)0 : dy * (A)0.5; }
};
// masked_fill's x: dy where c is NaN (x taken), else 0; its c: the other way round.
struct bc_grad_masked_a {
    static const int arity = 2;
    BC_DEV A apply(A dy, A c, A) { return c != c ? dy : (A)0; }
};
struct bc_grad_masked_b {
    static const int arity = 3;
    BC_DEV A apply(A dy, A, A c) { return c != c ? (A)0 : dy; }
};
// prelu's x (a > 0 ? a : a w): dy or w dy; its slope w: 0 or x dy.
struct bc_grad_prelu_x {
    static const int arity = 3;
    BC_DEV A apply(A dy, A w, A x) { return x > (A)0 ? dy : dy * w; }
};
struct bc_grad_prelu_w {
    static const int arity = 3;
    BC_DEV A apply(A dy, A x, A) { return x > (A)0 ? (A)0 : dy * x; }
};
#undef BC_DEV

// ---- the summing pass ----

// The gradient element by element from the dense arrays of the output's layout that G reads:
// dy, then other and self where G's arity reaches them. With `own`, self is the operand itself,
// dense [outer, inner] (its one run of repeated dimensions is the pass's n): its value is one an
// output, read once and handed in as s; else self is of the output's layout too.
template <typename G, typename T> struct bc_terms {
    typedef typename tocha::compute<T>::type A;
    const T *dy, *other, *self;
    bool own;
    __device__ __forceinline__ bool reads_self() const { return G::arity >= 3 && !own; }
    // The element at flat offset e (s: self's value where own).
    __device__ __forceinline__ A at(long long e, A s) const
    {
        return G::apply(tocha::to_compute(dy[e]), G::arity >= 2 ? tocha::to_compute(other[e]) : (A)0,
                        reads_self() ? tocha::to_compute(self[e]) : s);
    }
    // The 16-byte groups at e (16-byte aligned in every array) into w, all loads issued here.
    __device__ __forceinline__ void load(long long e, unsigned w[3][4]) const
    {
        tocha::load_words<16>(dy + e, w[0]);
        if (G::arity >= 2) tocha::load_words<16>(other + e, w[1]);
        if (reads_self()) tocha::load_words<16>(self + e, w[2]);
    }
    // Element j of groups w (s: self's value where own).
    __device__ __forceinline__ A of(const unsigned w[3][4], int j, A s) const
    {
        return G::apply(tocha::to_compute(tocha::element_of<T>(w[0], j)),
                        G::arity >= 2 ? tocha::to_compute(tocha::element_of<T>(w[1], j)) : (A)0,
                        reads_self() ? tocha::to_compute(tocha::element_of<T>(w[2], j)) : s);
    }
    // Self's value for output (o, i) of [outer, inner] where own, else 0 (unused).
    __device__ __forceinline__ A own_value(long long o, long long inner, long long i) const
    {
        return G::arity >= 3 && own ? tocha::to_compute(self[o * inner + i]) : (A)0;
    }
    // Whether every array G reads is 16-byte aligned (then offsets along n share their alignment).
    __device__ __forceinline__ bool aligned() const
    {
        unsigned long long bits = (unsigned long long)dy;
        if (G::arity >= 2) bits |= (unsigned long long)other;
        if (G::arity >= 3) bits |= (unsigned long long)self;
        return (bits & 15u) == 0;
    }
};

// A team member's sum of the elements [base + lo, base + hi): the elements before the first
// 16-byte boundary and after the last whole group one by one, the groups between strided over
// the team, four in flight a lane (the last up to three together), as reduction.cu's
// red_segment reads a row.
template <typename G, typename T, typename A>
__device__ __forceinline__ A bc_segment(const bc_terms<G, T> &t, long long base, long long lo, long long hi,
                                        long long lane, long long team, bool vec, A s)
{
    const int V = tocha::vec16<T>::n;
    A acc[4] = {(A)0, (A)0, (A)0, (A)0};
    long long a = hi, b = hi;
    if (vec) {
        a = lo + (long long)(((16u - ((unsigned)(unsigned long long)(t.dy + base + lo) & 15u)) & 15u) / sizeof(T));
        if (a > hi) a = hi;
        b = a + (hi - a) / V * V;
    }
    for (long long k = lo + lane; k < a; k += team) acc[0] += t.at(base + k, s);
    for (long long k = b + lane; k < hi; k += team) acc[1] += t.at(base + k, s);
    const long long groups = (b - a) / V;
    long long g = lane;
    for (; g + 3 * team < groups; g += 4 * team) {
        unsigned w[4][3][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) t.load(base + a + (g + j * team) * V, w[j]);
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < V; ++e) acc[j] += t.of(w[j], e, s);
    }
    {
        unsigned w[3][3][4];
#pragma unroll
        for (int j = 0; j < 3; ++j)
            if (g + j * team < groups) t.load(base + a + (g + j * team) * V, w[j]);
#pragma unroll
        for (int j = 0; j < 3; ++j)
            if (g + j * team < groups)
#pragma unroll
                for (int e = 0; e < V; ++e) acc[j] += t.of(w[j], e, s);
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

template <typename T, typename A> __device__ __forceinline__ void bc_store(T *y, long long i, A v, int acc)
{
    if (acc) ((A *)y)[i] = v;
    else y[i] = tocha::from_compute<T>(v);
}

// Sums G's elements over n of [outer, n, inner] into y[(o * splits + s) * inner + i], the
// mapping `rows` and the splits as reduction.cu's red_pass takes them.
template <typename G, typename T>
__device__ void bc_sum_pass(const bc_terms<G, T> &t, T *y, int acc, long long outer, long long n, long long inner,
                            long long splits, int rows)
{
    typedef typename tocha::compute<T>::type A;
    const int V = tocha::vec16<T>::n;
    long long part = (n + splits - 1) / splits;
    part = (part + V - 1) / V * V; // splits start on whole groups, as red_pass's
    const bool aligned = t.aligned();
    if (rows) {
        const bool cta = rows < 0;
        long long item;
        unsigned lane, team;
        tocha::team_of(rows, &item, &lane, &team);
        const bool live = item < outer * splits;
        if (cta && !live) return; // the whole CTA (a smaller team stays for its warp's shuffles)
        const long long row = live ? item / splits : 0, s = live ? item - row * splits : 0;
        long long lo = s * part < n ? s * part : n, hi = lo + part < n ? lo + part : n;
        if (!live) lo = hi = 0;
        const A mine = live ? t.own_value(row, 1, 0) : (A)0;
        const A total = tocha::team_sum(bc_segment<G, T, A>(t, row * n, lo, hi, lane, team, aligned, mine), team, cta);
        if (live && lane == 0) bc_store(y, item, total, acc);
        return;
    }
    const long long stride = (long long)blockDim.x * gridDim.x, first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (aligned && inner % V == 0 && V > 1) {
        // A thread a 16-byte group along inner: V outputs, four rows of n in flight.
        const long long groups = inner / V, outputs = outer * splits * groups;
        for (long long u = first; u < outputs; u += stride) {
            const long long ig = u % groups, r = u / groups, s = r % splits, o = r / splits;
            const long long lo = s * part < n ? s * part : n, hi = lo + part < n ? lo + part : n;
            const long long base = o * n * inner + ig * V;
            A sum[tocha::vec16<T>::n], mine[tocha::vec16<T>::n];
#pragma unroll
            for (int e = 0; e < V; ++e) sum[e] = (A)0, mine[e] = t.own_value(o, inner, ig * V + e);
            long long k = lo;
            for (; k + 3 < hi; k += 4) {
                unsigned w[4][3][4];
#pragma unroll
                for (int j = 0; j < 4; ++j) t.load(base + (k + j) * inner, w[j]);
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int e = 0; e < V; ++e) sum[e] += t.of(w[j], e, mine[e]);
            }
            for (; k < hi; ++k) {
                unsigned w[3][4];
                t.load(base + k * inner, w);
#pragma unroll
                for (int e = 0; e < V; ++e) sum[e] += t.of(w, e, mine[e]);
            }
#pragma unroll
            for (int e = 0; e < V; ++e) bc_store(y, (o * splits + s) * inner + ig * V + e, sum[e], acc);
        }
        return;
    }
    const long long outputs = outer * splits * inner;
    for (long long u = first; u < outputs; u += stride) {
        const long long i = u % inner, r = u / inner, s = r % splits, o = r / splits;
        const long long lo = s * part < n ? s * part : n, hi = lo + part < n ? lo + part : n;
        const long long base = o * n * inner + i;
        const A mine = t.own_value(o, inner, i);
        A sum[4] = {(A)0, (A)0, (A)0, (A)0};
        long long k = lo;
        for (; k + 3 < hi; k += 4)
#pragma unroll
            for (int j = 0; j < 4; ++j) sum[j] += t.at(base + (k + j) * inner, mine);
#pragma unroll
        for (int j = 0; j < 3; ++j)
            if (k < hi) sum[j] += t.at(base + k++ * inner, mine);
        bc_store(y, (o * splits + s) * inner + i, (sum[0] + sum[1]) + (sum[2] + sum[3]), acc);
    }
}

// ---- both operands of the output's shape ----

#define BC_VECTORS 2

// da and db over n elements of dense arrays: FA's apply(dy, b, a), FB's apply(dy, a, b).
template <typename T, typename FA, typename FB>
__device__ __forceinline__ void bc_full_both(const T *dy, const T *a, const T *b, T *da, T *db, long long n)
{
    typedef typename tocha::compute<T>::type A;
    const int V = tocha::vec16<T>::n, U = BC_VECTORS;
    // the inputs the gradients read, beside dy
    const bool ra = FA::arity >= 3 || FB::arity >= 2, rb = FA::arity >= 2 || FB::arity >= 3;
    const unsigned long long bits = (unsigned long long)dy | (unsigned long long)da | (unsigned long long)db |
                                    (ra ? (unsigned long long)a : 0) | (rb ? (unsigned long long)b : 0);
    const long long vectors = (bits & 15u) == 0 ? n / V : 0, span = (long long)blockDim.x * U;
    for (long long base = blockIdx.x * span + threadIdx.x; base < vectors; base += gridDim.x * span) {
        unsigned wd[U][4], wa[U][4] = {}, wb[U][4] = {};
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const long long v = base + j * (long long)blockDim.x;
            if (v < vectors) {
                tocha::load_words<16>(dy + v * V, wd[j]);
                if (ra) tocha::load_words<16>(a + v * V, wa[j]);
                if (rb) tocha::load_words<16>(b + v * V, wb[j]);
            }
        }
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const long long v = base + j * (long long)blockDim.x;
            if (v >= vectors) break;
            tocha::pack16<T> ga, gb;
#pragma unroll
            for (int e = 0; e < V; ++e) {
                const A g = tocha::to_compute(tocha::element_of<T>(wd[j], e));
                const A x = tocha::to_compute(tocha::element_of<T>(wa[j], e)), y = tocha::to_compute(tocha::element_of<T>(wb[j], e));
                ga.set(e, tocha::from_compute<T>(FA::apply(g, y, x)));
                gb.set(e, tocha::from_compute<T>(FB::apply(g, x, y)));
            }
            tocha::store_pack(da + v * V, ga);
            tocha::store_pack(db + v * V, gb);
        }
    }
    for (long long i = vectors * V + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        const A g = tocha::to_compute(dy[i]);
        const A x = ra ? tocha::to_compute(a[i]) : (A)0, y = rb ? tocha::to_compute(b[i]) : (A)0;
        da[i] = tocha::from_compute<T>(FA::apply(g, y, x));
        db[i] = tocha::from_compute<T>(FB::apply(g, x, y));
    }
}

// ---- the kernel ----
//
// Arguments: phase; then tocha_pointwise's (y, n, ndim, the merged sizes d and y's strides, then
// a, b, c with their strides, three scalars), which the pointwise phases take as they are; then
// a reduction's view [outer, len, inner], its splits, mapping, whether y holds A (acc) and
// whether c is the operand itself rather than spread to the output's shape (own), and z. The
// summing phases read a (dy), b (the dense other) and c (self) and write y; BC_REDUCE reads a (in
// A) and writes y; BC_FULL_BOTH reads a (dy), b and c (the operands) and writes y (da) and z (db).
template <typename T, typename FA, typename FB>
__device__ void tocha_broadcast_backward(int phase, T *y, long long n, int ndim, long long d0, long long d1, long long d2,
                                         long long d3, long long d4, long long d5, long long d6, long long d7,
                                         long long y0, long long y1, long long y2, long long y3, long long y4,
                                         long long y5, long long y6, long long y7, const T *a, long long a0,
                                         long long a1, long long a2, long long a3, long long a4, long long a5,
                                         long long a6, long long a7, const T *b, long long b0, long long b1,
                                         long long b2, long long b3, long long b4, long long b5, long long b6,
                                         long long b7, const T *c, long long c0, long long c1, long long c2,
                                         long long c3, long long c4, long long c5, long long c6, long long c7,
                                         double sa, double sb, double sc, long long outer, long long len,
                                         long long inner, long long splits, int rows, int acc, int own, T *z)
{
    typedef typename tocha::compute<T>::type A;
#define BC_POINTWISE(F)                                                                                             \
    tocha_pointwise<A, T, T, T, T, F, 0>(y, n, ndim, d0, d1, d2, d3, d4, d5, d6, d7, y0, y1, y2, y3, y4, y5, y6, y7, a, \
                                          a0, a1, a2, a3, a4, a5, a6, a7, b, b0, b1, b2, b3, b4, b5, b6, b7, c, c0,   \
                                          c1, c2, c3, c4, c5, c6, c7, sa, sb, sc)
    if (phase == BC_FULL_BOTH) bc_full_both<T, FA, FB>(a, b, c, y, z, n);
    else if (phase == BC_FULL_A) BC_POINTWISE(FA);
    else if (phase == BC_FULL_B) BC_POINTWISE(FB);
    else if (phase == BC_COPY) BC_POINTWISE(pw_copy);
#undef BC_POINTWISE
    else if (phase == BC_SUM_A) {
        const bc_terms<FA, T> t = {a, b, c, own != 0};
        bc_sum_pass<FA, T>(t, y, acc, outer, len, inner, splits, rows);
    } else if (phase == BC_SUM_B) {
        const bc_terms<FB, T> t = {a, b, c, own != 0};
        bc_sum_pass<FB, T>(t, y, acc, outer, len, inner, splits, rows);
    } else if (phase == BC_REDUCE) {
        tocha_reduce<T, 0>((const unsigned char *)a, 1, (unsigned char *)y, acc, (T *)a, outer, len, inner, splits, 1.0,
                           rows);
    }
}
