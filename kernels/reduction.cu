// reduction.cu: sum, mean, max, min and product of x viewed as [outer, n, inner] over its middle
// dimension (one dimension of a tensor, or n = every element), and the gradients of the first
// four. MODE (0 sum, 1 mean, 2 max, 3 min, 4 prod) and the dtype T are compile-time constants;
// f16 and bf16 are reduced in f32, f64 in f64 (the accumulator A). max and min propagate NaN,
// as PyTorch's do.
//
// The host plans the passes from the shape alone (never from the device), so that a result is
// the same on every device and on the simulator, bit for bit. Each pass takes one of two paths,
// on kernels of their own (tocha_reduce_rows; tocha_reduce_columns, _short_columns, _team_columns:
// each its own registers), and tocha_reduce takes either, as `rows` says (the one kernel a
// RuntimeOp's launches share):
// - the rows path (inner == 1): a team, one CTA per (row, split) for long rows or 1 to 32 lanes
//   of a warp per row for shorter ones (about four 16-byte groups a lane), strides over its part
//   of the row in 16-byte groups (the elements before the first boundary and after the last
//   group one by one), four groups in flight a thread, then shuffles within each warp and the
//   warps' values in warp order (tocha::team_combine);
// - the columns path (otherwise): one thread a (outer, split, 16-byte group of inner) column
//   (one element along inner where inner is not whole groups or x is not 16-byte aligned),
//   walking its part of n with stride inner, four rows in flight, combined in row order: no
//   shared memory, no barrier, few registers (its kernel holds five to six CTAs of 256 an SM);
//   tocha_reduce_short_columns, for rows of inner under 32 groups (too few threads without a
//   split), the same with eight rows in flight; tocha_reduce_team_columns, for columns too few
//   to fill the device, splits each column's rows among K teams of a CTA, combined through
//   shared memory in team order.
// splits > 1 divides n among CTAs or threads when there are too few outputs to fill the device;
// the pass then writes its partials (in A) to a workspace, and a second pass over that workspace
// viewed as [outer, splits, inner] finishes. Pointers are untyped (u8*): a pass reads T or A and
// writes T or A as x_acc and y_acc say. `copy`, unless it is x itself, gets every element of x
// the pass reads (the bias gradient: dx = dy while db is summed). A pass's output is its total
// divided by `divisor` (the mean's n; 1 otherwise).
//
// MODE 5 to 8 reduce a function of each element of x (x:norm's, in one read of x): 5 the sum of
// squares, 6 the sum of absolute values, 7 the largest and 8 the smallest absolute value. The
// function applies to the elements a pass loads (red_take), so the host launches a mapped MODE for
// a first pass only and the plain one (sum, max, min) for the pass over its partials.
// MODE 9 and 10 store the square root of their total (the 2-norm's last pass, so that no launch
// follows it): 9 a plain sum, 10 the sum of squares (a first pass that is also the last).
//
// tocha_reduce_grad: dx for sum and mean (dy broadcast along n, divided by divisor), one thread a
// dx element; for max and min the whole dy of an output goes to the first element equal to the maximum
// (NaN to the first NaN) and zeros elsewhere, one thread an output.

// The plain reduction a MODE combines with (a mapped MODE's sum, max or min).
template <int MODE> __device__ __forceinline__ int red_base()
{
    return MODE == 5 || MODE == 6 || MODE == 9 || MODE == 10 ? 0 : MODE == 7 ? 2 : MODE == 8 ? 3 : MODE;
}

template <int MODE_, typename A> __device__ __forceinline__ A red_identity()
{
    const int MODE = red_base<MODE_>();
    return MODE == 2 ? -tocha::infinity<A>() : MODE == 3 ? tocha::infinity<A>() : MODE == 4 ? (A)1 : (A)0;
}

template <int MODE_, typename A> __device__ __forceinline__ A red_combine(A a, A b)
{
    const int MODE = red_base<MODE_>();
    if (MODE == 2) return (b > a || b != b) ? b : a;
    if (MODE == 3) return (b < a || b != b) ? b : a;
    if (MODE == 4) return a * b;
    return a + b;
}

// acc combined with one loaded element v (MODE 5 and 10: with its square; 6 to 8: its absolute value).
template <int MODE, typename A> __device__ __forceinline__ A red_take(A acc, A v)
{
    if (MODE == 5 || MODE == 10) v = v * v;
    else if (MODE >= 6 && MODE <= 8) v = v < (A)0 ? -v : v + (A)0; // (+ 0: |-0| is +0, as fabs gives)
    return red_combine<MODE>(acc, v);
}

template <typename T> __device__ __forceinline__ typename tocha::compute<T>::type red_load(const T *p, long long i)
{
    return tocha::to_compute(tocha::load_element(p + i));
}

__device__ __forceinline__ float red_sqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double red_sqrt(double v) { return sqrt(v); }

template <int MODE, typename A, typename TO> __device__ __forceinline__ void red_store(TO *y, long long i, A v, double divisor)
{
    if (MODE == 1) v = v / (A)divisor;
    if (MODE == 9 || MODE == 10) v = red_sqrt(v);
    y[i] = tocha::from_compute<TO>(v);
}

// acc combined, in order, with the elements of a 16-byte group of TI held as four words.
template <int MODE, typename TI, typename A> __device__ __forceinline__ A red_group(A acc, const unsigned w[4])
{
#pragma unroll
    for (int e = 0; e < tocha::vec16<TI>::n; ++e) acc = red_take<MODE>(acc, (A)tocha::to_compute(tocha::element_of<TI>(w, e)));
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
        acc[0] = red_take<MODE>(acc[0], (A)red_load(in, k));
        if (copy) copy[k] = in[k];
    }
    for (long long k = b + lane; k < hi; k += team) {
        acc[1] = red_take<MODE>(acc[1], (A)red_load(in, k));
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

// A column unit: U elements of TI, a 16-byte group held as four words (U > 1) or one element.
template <int U, typename TI> struct red_unit {
    unsigned w[4];
};
template <typename TI> struct red_unit<1, TI> {
    TI v;
};

// The unit at p (16-byte aligned for a group).
template <int U, typename TI> __device__ __forceinline__ void red_unit_load(const TI *p, red_unit<U, TI> &u)
{
    tocha::load_words<16>(p, u.w);
}
template <typename TI> __device__ __forceinline__ void red_unit_load(const TI *p, red_unit<1, TI> &u)
{
    u.v = tocha::load_element(p);
}

// acc[e] combined with the unit's element e, in order; the unit stored at out unless it is null.
template <int MODE, int U, typename TI, typename A>
__device__ __forceinline__ void red_unit_take(A *acc, const red_unit<U, TI> &u, TI *out)
{
#pragma unroll
    for (int e = 0; e < U; ++e) acc[e] = red_take<MODE>(acc[e], (A)tocha::to_compute(tocha::element_of<TI>(u.w, e)));
    if (out) red_copy16(out, u.w);
}
template <int MODE, typename TI, typename A>
__device__ __forceinline__ void red_unit_take(A *acc, const red_unit<1, TI> &u, TI *out)
{
    acc[0] = red_take<MODE>(acc[0], (A)tocha::to_compute(u.v));
    if (out) *out = u.v;
}

// a / b, in 32 bits where both fit (a 64-bit division is several times longer).
__device__ __forceinline__ long long red_div(long long a, long long b)
{
    return ((unsigned long long)(a | b) >> 31) == 0 ? (long long)((unsigned)a / (unsigned)b) : a / b;
}

// acc[e] combined, in row order, with element e of the units of m rows from in, `step` elements
// apart: R loads in flight, then at most R - 1 left issued together. COPY: each unit read is also
// stored gap elements on.
template <int MODE, int U, int R, bool COPY, typename TI, typename A>
__device__ __forceinline__ void red_column_walk(const TI *in, long long gap, long long m, long long step, A *acc)
{
#pragma unroll 1
    for (; m >= R; m -= R, in += R * step) {
        red_unit<U, TI> w[R];
#pragma unroll
        for (int j = 0; j < R; ++j) red_unit_load(in + j * step, w[j]);
#pragma unroll
        for (int j = 0; j < R; ++j) red_unit_take<MODE>(acc, w[j], COPY ? (TI *)in + gap + j * step : (TI *)0);
    }
    red_unit<U, TI> w[R - 1];
#pragma unroll
    for (int j = 0; j < R - 1; ++j)
        if (j < m) red_unit_load(in + j * step, w[j]);
#pragma unroll
    for (int j = 0; j < R - 1; ++j)
        if (j < m) red_unit_take<MODE>(acc, w[j], COPY ? (TI *)in + gap + j * step : (TI *)0);
}

// The columns path over [outer, n, inner] with U elements a column unit (U = V, a 16-byte
// group, where inner is whole groups and x and copy are 16-byte aligned; else 1): one thread a
// column (outer o, split s, unit c), threads striding over the columns. Consecutive threads take
// consecutive units of a row, so a warp's loads cover whole runs of inner. A thread walks the
// rows of its split with stride inner, R loads in flight, and combines them in row order (a
// fixed order: the result depends on the shape alone); no shared memory, no barrier. COPY: each
// unit read is also stored at the same place of copy (copy - x elements on).
template <int MODE, int U, int R, bool COPY, typename TI, typename TO>
__device__ __forceinline__ void red_columns_units(const TI *x, TO *y, TI *copy, long long outer, long long n,
                                                  long long inner, long long splits, double divisor)
{
    typedef typename tocha::compute<TI>::type A;
    const long long cols = inner / U, columns = outer * splits * cols;
    const long long part = (n + splits - 1) / splits, stride = (long long)blockDim.x * gridDim.x;
    const long long gap = COPY ? copy - x : 0;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < columns; t += stride) {
        const long long r = red_div(t, cols), c = t - r * cols;
        const long long o = red_div(r, splits), s = r - o * splits;
        const long long lo = s * part < n ? s * part : n, hi = lo + part < n ? lo + part : n;
        A acc[U];
#pragma unroll
        for (int e = 0; e < U; ++e) acc[e] = red_identity<MODE, A>();
        red_column_walk<MODE, U, R, COPY>(x + (o * n + lo) * inner + c * U, gap, hi - lo, inner, acc);
#pragma unroll
        for (int e = 0; e < U; ++e) red_store<MODE>(y, r * inner + c * U + e, acc[e], divisor);
    }
}

// The team columns path: the threads of a CTA (at most RED_TEAM_BLOCK) as K teams of W =
// blockDim.x / K (a multiple of 32): thread i of team w takes column (outer o, split s, unit c)
// base + i of the CTA's W and the rows w, w + K, w + 2K, ... of its split, R loads in flight; the
// teams' values go through shared memory (parts, U x blockDim.x of A) and team 0 combines them in
// team order (a fixed order: the result depends on the shape and K alone). For columns too few
// to fill the device, whose rows are many: K times the threads without a second pass.
#define RED_TEAM_BLOCK 256
template <int MODE, int U, int R, bool COPY, typename TI, typename TO>
__device__ __forceinline__ void red_team_columns_units(const TI *x, TO *y, TI *copy, long long outer, long long n,
                                                       long long inner, long long splits, double divisor, int K,
                                                       typename tocha::compute<TI>::type *parts)
{
    typedef typename tocha::compute<TI>::type A;
    const int W = blockDim.x / K, w = threadIdx.x / W, i = threadIdx.x - w * W;
    const long long cols = inner / U, columns = outer * splits * cols;
    const long long part = (n + splits - 1) / splits;
    const long long gap = COPY ? copy - x : 0;
    for (long long base = blockIdx.x * (long long)W; base < columns; base += (long long)gridDim.x * W) {
        const long long t = base + i;
        long long at = 0; // the column's first output
        A acc[U];
#pragma unroll
        for (int e = 0; e < U; ++e) acc[e] = red_identity<MODE, A>();
        if (t < columns) {
            const long long r = red_div(t, cols), c = t - r * cols;
            const long long o = red_div(r, splits), s = r - o * splits;
            at = r * inner + c * U;
            const long long lo = s * part < n ? s * part : n, hi = lo + part < n ? lo + part : n;
            const long long m = hi - lo > w ? red_div(hi - lo - w + K - 1, K) : 0;
            red_column_walk<MODE, U, R, COPY>(x + (o * n + lo + w) * inner + c * U, gap, m, K * inner, acc);
        }
        if (w > 0)
#pragma unroll
            for (int e = 0; e < U; ++e) parts[e * blockDim.x + threadIdx.x - W] = acc[e];
        __syncthreads();
        if (w == 0 && t < columns) {
            for (int v = 1; v < K; ++v)
#pragma unroll
                for (int e = 0; e < U; ++e) acc[e] = red_combine<MODE>(acc[e], parts[e * blockDim.x + (v - 1) * W + i]);
#pragma unroll
            for (int e = 0; e < U; ++e) red_store<MODE>(y, at + e, acc[e], divisor);
        }
        __syncthreads(); // parts are read before the next tile writes them
    }
}

// The columns path with U elements a unit and R rows in flight; where copy is given, two rows in
// flight (the store addresses besides would raise the kernel's registers for every pass: the
// bias gradient that copies sums rows, so a columns pass copies only when called so directly).
template <int MODE, int U, int R, typename TI, typename TO>
__device__ __forceinline__ void red_columns_copy(const TI *x, TO *y, TI *copy, long long outer, long long n,
                                                 long long inner, long long splits, double divisor)
{
    if (copy) red_columns_units<MODE, U, 2, true>(x, y, copy, outer, n, inner, splits, divisor);
    else red_columns_units<MODE, U, R, false>(x, y, copy, outer, n, inner, splits, divisor);
}

// The columns path (inner > 1, or any pass the host maps so): 16-byte units where inner is
// whole groups and x (and copy) are aligned, R of them in flight a thread; else one element a
// unit, four in flight.
template <int MODE, int R, typename TI, typename TO>
__device__ void red_columns(const TI *x, TO *y, TI *copy, long long outer, long long n, long long inner, long long splits,
                            double divisor)
{
    const int V = tocha::vec16<TI>::n;
    const bool vec = V > 1 && inner % V == 0 && ((unsigned long long)x & 15u) == 0 &&
                     (!copy || ((unsigned long long)copy & 15u) == 0);
    if (vec) red_columns_copy<MODE, tocha::vec16<TI>::n, R>(x, y, copy, outer, n, inner, splits, divisor);
    else red_columns_copy<MODE, 1, 4>(x, y, copy, outer, n, inner, splits, divisor);
}

// The team columns path (tocha_reduce_team_columns) with K teams: 16-byte units as red_columns
// takes them, else one element a unit, four rows in flight a thread. No copy (the host plans
// teams only for passes without one).
template <int MODE, typename TI, typename TO>
__device__ void red_team_columns(const TI *x, TO *y, TI *copy, long long outer, long long n, long long inner,
                                 long long splits, double divisor, int K)
{
    typedef typename tocha::compute<TI>::type A;
    const int V = tocha::vec16<TI>::n;
    __shared__ A parts[RED_TEAM_BLOCK * V];
    if (copy || blockDim.x > RED_TEAM_BLOCK || K < 1 || blockDim.x % K != 0 || blockDim.x / K % 32 != 0) __trap();
    const bool vec = V > 1 && inner % V == 0 && ((unsigned long long)x & 15u) == 0;
    if (vec) red_team_columns_units<MODE, V, 4, false>(x, y, copy, outer, n, inner, splits, divisor, K, parts);
    else red_team_columns_units<MODE, 1, 4, false>(x, y, copy, outer, n, inner, splits, divisor, K, parts);
}

// The rows path (inner == 1): rows -1 a CTA a (row, split), 1 to 32 (a power of two) that many
// lanes of a warp a (row, split); red_segment's values combined by tocha::team_combine
// (shuffles, then the warps' values in warp order): a fixed order, the same on every device.
template <int MODE, typename TI, typename TO>
__device__ void red_rows(const TI *x, TO *y, TI *copy, long long outer, long long n, long long splits, double divisor,
                         int rows)
{
    typedef typename tocha::compute<TI>::type A;
    const int V = tocha::vec16<TI>::n;
    // Splits start on whole groups, so that every split but the last holds whole groups.
    long long part = (n + splits - 1) / splits;
    part = (part + V - 1) / V * V;
    const bool cta = rows < 0;
    long long item;
    unsigned lane, team;
    tocha::team_of(rows, &item, &lane, &team);
    const bool live = item < outer * splits;
    if (cta && !live) return; // the whole CTA (a smaller team stays for its warp's shuffles)
    const long long row = live ? item / splits : 0, s = live ? item - row * splits : 0;
    long long lo = s * part < n ? s * part : n, hi = lo + part < n ? lo + part : n;
    if (!live) lo = hi = 0;
    const bool vec = !copy || (((unsigned long long)x ^ (unsigned long long)copy) & 15u) == 0;
    const A mine = red_segment<MODE, TI, A>(x + row * n, copy ? copy + row * n : 0, lo, hi, lane, team, vec);
    const A total = tocha::team_combine(mine, team, cta, [](A a, A b) { return red_combine<MODE>(a, b); });
    if (live && lane == 0) red_store<MODE>(y, item, total, divisor);
}

// PATH: 0 either (rows != 0 the rows path, else the columns path), 1 rows only, 2 columns only,
// 3 columns only with eight 16-byte units in flight a thread, 4 team columns (rows: the teams).
template <int PATH, int MODE, typename TI, typename TO>
__device__ __forceinline__ void red_pass(const TI *x, TO *y, TI *copy, long long outer, long long n, long long inner,
                                         long long splits, double divisor, int rows)
{
    if (PATH == 4) red_team_columns<MODE>(x, y, copy, outer, n, inner, splits, divisor, rows);
    else if (PATH < 2 && (PATH == 1 || rows)) red_rows<MODE>(x, y, copy, outer, n, splits, divisor, rows);
    else red_columns<MODE, PATH == 3 ? 8 : 4>(x, y, copy, outer, n, inner, splits, divisor);
}

template <int PATH, typename T, int MODE>
__device__ __forceinline__ void red_entry(const unsigned char *x, int x_acc, unsigned char *y, int y_acc, T *copy,
                                          long long outer, long long n, long long inner, long long splits, double divisor,
                                          int rows)
{
    typedef typename tocha::compute<T>::type A;
    if ((const unsigned char *)copy == x) copy = 0; // no copy (launch pointers are never null)
    if (!x_acc && !y_acc)
        red_pass<PATH, MODE>((const T *)x, (T *)y, copy, outer, n, inner, splits, divisor, rows);
    else if (!x_acc)
        red_pass<PATH, MODE>((const T *)x, (A *)y, copy, outer, n, inner, splits, divisor, rows);
    else if (!y_acc)
        red_pass<PATH, MODE>((const A *)x, (T *)y, (A *)0, outer, n, inner, splits, divisor, rows);
    else
        red_pass<PATH, MODE>((const A *)x, (A *)y, (A *)0, outer, n, inner, splits, divisor, rows);
}

// A pass of either path, as `rows` says (the kernel a RuntimeOp's launches share).
template <typename T, int MODE>
__device__ void tocha_reduce(const unsigned char *x, int x_acc, unsigned char *y, int y_acc, T *copy, long long outer,
                             long long n, long long inner, long long splits, double divisor, int rows)
{
    red_entry<0, T, MODE>(x, x_acc, y, y_acc, copy, outer, n, inner, splits, divisor, rows);
}

// tocha_reduce for passes of the rows path alone (rows != 0): its own registers.
template <typename T, int MODE>
__device__ void tocha_reduce_rows(const unsigned char *x, int x_acc, unsigned char *y, int y_acc, T *copy,
                                  long long outer, long long n, long long inner, long long splits, double divisor, int rows)
{
    red_entry<1, T, MODE>(x, x_acc, y, y_acc, copy, outer, n, inner, splits, divisor, rows);
}

// tocha_reduce for passes of the columns path alone (rows == 0): its own registers.
template <typename T, int MODE>
__device__ void tocha_reduce_columns(const unsigned char *x, int x_acc, unsigned char *y, int y_acc, T *copy,
                                     long long outer, long long n, long long inner, long long splits, double divisor,
                                     int rows)
{
    red_entry<2, T, MODE>(x, x_acc, y, y_acc, copy, outer, n, inner, splits, divisor, rows);
}

// tocha_reduce_columns with eight rows in flight a thread where it takes 16-byte units, for
// short rows of inner (under 32 units: too few threads a row to fill the device without a split
// of n, which costs a second pass): twice the bytes in flight of tocha_reduce_columns, and more
// registers, hence a kernel of its own.
template <typename T, int MODE>
__device__ void tocha_reduce_short_columns(const unsigned char *x, int x_acc, unsigned char *y, int y_acc, T *copy,
                                           long long outer, long long n, long long inner, long long splits,
                                           double divisor, int rows)
{
    red_entry<3, T, MODE>(x, x_acc, y, y_acc, copy, outer, n, inner, splits, divisor, rows);
}

// tocha_reduce for columns passes split among K = rows teams of each CTA (red_team_columns;
// blockDim.x at most RED_TEAM_BLOCK, a multiple of 32 K): its own registers and shared memory.
template <typename T, int MODE>
__device__ void tocha_reduce_team_columns(const unsigned char *x, int x_acc, unsigned char *y, int y_acc, T *copy,
                                          long long outer, long long n, long long inner, long long splits,
                                          double divisor, int rows)
{
    red_entry<4, T, MODE>(x, x_acc, y, y_acc, copy, outer, n, inner, splits, divisor, rows);
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
