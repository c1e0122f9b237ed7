// pointwise.cu: y = F(a [, b [, c]]) element by element over operands that broadcast, the
// kernel behind tensor math (x + y, x:exp(), x:lt(0), tocha.where, x:clamp(...)). Every operand
// is read through strides of its own (0 along a broadcast dimension) and y is written through
// its strides, so views, broadcasts and in-place forms need no copy. The host merges the
// dimensions that are dense in every operand first: an operation on tensors of one contiguous
// shape arrives as one dimension with stride 1, the path of most calls.
//
// Compile-time constants: A, the type F computes in (f32 for f32, f16 and bf16; f64 for f64;
// long long for the integer dtypes); TO, TA, TB, TC the element types of y and of the three
// operands (each converted to A on load, so mixed dtypes need no cast kernel); F, one of the
// structs below; SCALARS, a bit per operand (1: a, 2: b, 4: c) that takes the number sa, sb or
// sc instead of memory (x + 1 reads one tensor).
//
// Arguments: sizes d0..d7 (ndim of them used, 1 past), each operand's pointer and strides in
// elements, y's likewise. An operand F does not read (its arity is lower) gets any pointer.
// Paths: one dimension of stride 1 everywhere, or rows along a last dimension that y and every
// operand read with stride 1 or 0 (chunks of 8 elements from vector loads, several chunks a
// thread); else an element a thread, so that neighbouring threads read neighbouring elements
// (runs of several elements a thread would put them apart and split each warp's loads).

// ---- the math functions of the compute types (pm_, apart from the structs' pw_ names) ----

#define PW_MATH(name, f32, f64)                                                                   \
    __device__ __forceinline__ float name(float v) { return f32(v); }                           \
    __device__ __forceinline__ double name(double v) { return f64(v); }
PW_MATH(pm_exp, expf, exp)
PW_MATH(pm_log, logf, log)
PW_MATH(pm_sqrt, sqrtf, sqrt)
PW_MATH(pm_tanh, tanhf, tanh)
PW_MATH(pm_erf, erff, erf)
PW_MATH(pm_sin, sinf, sin)
PW_MATH(pm_cos, cosf, cos)
PW_MATH(pm_floor, floorf, floor)
PW_MATH(pm_ceil, ceilf, ceil)
PW_MATH(pm_trunc, truncf, trunc)
PW_MATH(pm_rint, rintf, rint)
PW_MATH(pm_log1p, log1pf, log1p)
PW_MATH(pm_expm1, expm1f, expm1)
#undef PW_MATH
__device__ __forceinline__ float pm_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double pm_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float pm_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double pm_fmod(double a, double b) { return fmod(a, b); }

// The division of sigmoid and silu: in f32 the fast one (within 2 ulps; 0 where the divisor
// passes 2^126, there exp(-x) with x < -87, where the true sigmoid and silu are below 1e-36),
// which keeps these functions at the memory's pace where the IEEE division made them
// compute-bound (measured on an H200: silu 1.3x PyTorch's time with it, 1.04x without); f64
// divides exactly.
__device__ __forceinline__ float pm_fast_div(float a, float b) { return __fdividef(a, b); }
__device__ __forceinline__ double pm_fast_div(double a, double b) { return a / b; }

// Integer power by squaring: exact (wrapping as the dtype's arithmetic does); a negative
// exponent truncates toward zero (1 for a = 1, +-1 for a = -1, else 0).
__device__ __forceinline__ long long pm_pow(long long a, long long b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    unsigned long long r = 1, x = (unsigned long long)a;
    for (unsigned long long e = (unsigned long long)b; e; e >>= 1) {
        if (e & 1) r *= x;
        x *= x;
    }
    return (long long)r;
}
// Python's remainder: the sign of the divisor. Integer division by zero gives 0 (the hardware
// has no defined result, and a CPU would trap).
__device__ __forceinline__ long long pm_fmod(long long a, long long b) { return b == 0 ? 0 : a % b; }

template <typename A> __device__ __forceinline__ bool pm_nan(A v) { return v != v; }
template <typename A> __device__ __forceinline__ A pm_remainder(A a, A b)
{
    const A r = pm_fmod(a, b);
    return r != (A)0 && ((r < (A)0) != (b < (A)0)) ? r + b : r;
}

// ---- the functions, by name: tocha.math's "add" is pw_add, its template argument F ----

#define PW_DEV template <typename A> static __device__ __forceinline__
#define PW_UNARY(name, expr)                                                                      \
    struct pw_##name {                                                                            \
        static const int arity = 1;                                                               \
        PW_DEV A apply(A x, A, A) { return expr; }                                                \
    };
#define PW_BINARY(name, expr)                                                                     \
    struct pw_##name {                                                                            \
        static const int arity = 2;                                                               \
        PW_DEV A apply(A a, A b, A) { return expr; }                                              \
    };

PW_UNARY(copy, x)
PW_UNARY(neg, -x)
PW_UNARY(abs, x < (A)0 ? -x : x)
PW_UNARY(sign, (A)(x > (A)0) - (A)(x < (A)0) + (pm_nan(x) ? x : (A)0))
PW_UNARY(square, x * x)
PW_UNARY(relu, x > (A)0 || pm_nan(x) ? x : (A)0)
PW_UNARY(exp, pm_exp(x))
PW_UNARY(expm1, pm_expm1(x))
PW_UNARY(log, pm_log(x))
PW_UNARY(log1p, pm_log1p(x))
PW_UNARY(sqrt, pm_sqrt(x))
PW_UNARY(rsqrt, (A)1 / pm_sqrt(x))
PW_UNARY(reciprocal, (A)1 / x)
PW_UNARY(sigmoid, pm_fast_div((A)1, (A)1 + pm_exp(-x)))
PW_UNARY(tanh, pm_tanh(x))
PW_UNARY(silu, pm_fast_div(x, (A)1 + pm_exp(-x)))
PW_UNARY(gelu, (A)0.5 * x * ((A)1 + pm_erf(x * (A)0.70710678118654752440)))
PW_UNARY(erf, pm_erf(x))
PW_UNARY(sin, pm_sin(x))
PW_UNARY(cos, pm_cos(x))
PW_UNARY(floor, pm_floor(x))
PW_UNARY(ceil, pm_ceil(x))
PW_UNARY(trunc, pm_trunc(x))
PW_UNARY(round, pm_rint(x)) // halves to even, as PyTorch's round
PW_UNARY(logical_not, (A)(x == (A)0))
PW_UNARY(isnan, (A)pm_nan(x))

PW_BINARY(add, a + b)
PW_BINARY(sub, a - b)
PW_BINARY(mul, a * b)
PW_BINARY(div, a / b)
PW_BINARY(pow, pm_pow(a, b))
// maximum and minimum: a NaN in either operand gives NaN, as PyTorch's.
PW_BINARY(maximum, pm_nan(a) || a > b ? a : b)
PW_BINARY(minimum, pm_nan(a) || a < b ? a : b)
PW_BINARY(remainder, pm_remainder(a, b))
// prelu(x, w): x for x > 0, else w x (tocha.Broadcast's "prelu", a per-channel slope).
PW_BINARY(prelu, a > (A)0 ? a : a * b)
// masked_fill(x, c): c where c is a number, x where c is NaN (tocha.Broadcast's "masked_fill":
// an imported Where of a constant condition and fill, the fill's places numbers, x's NaN).
PW_BINARY(masked_fill, b != b ? a : b)
PW_BINARY(lt, (A)(a < b))
PW_BINARY(le, (A)(a <= b))
PW_BINARY(gt, (A)(a > b))
PW_BINARY(ge, (A)(a >= b))
PW_BINARY(eq, (A)(a == b))
PW_BINARY(ne, (A)(a != b))
PW_BINARY(logical_and, (A)(a != (A)0 && b != (A)0))
PW_BINARY(logical_or, (A)(a != (A)0 || b != (A)0))

// where(mask, a, b): a where mask is non-zero, else b.
struct pw_where {
    static const int arity = 3;
    PW_DEV A apply(A m, A a, A b) { return m != (A)0 ? a : b; }
};
// clamp(x, lo, hi): NaN in x stays NaN; lo wins where lo > hi (PyTorch's order).
struct pw_clamp {
    static const int arity = 3;
    PW_DEV A apply(A x, A lo, A hi)
    {
        if (pm_nan(x)) return x;
        const A v = x < lo ? lo : x;
        return v > hi ? hi : v;
    }
};
// (a - b)^2 and (a - b) c: a squared difference and its gradient, each in one pass (tocha.loss.mse).
PW_BINARY(squared_difference, (a - b) * (a - b))
struct pw_sub_scale {
    static const int arity = 3;
    PW_DEV A apply(A a, A b, A c) { return (a - b) * c; }
};
#undef PW_UNARY
#undef PW_BINARY
#undef PW_DEV

// ---- conversions between the element types and A ----

template <typename A> __device__ __forceinline__ A pw_in(float v) { return (A)v; }
template <typename A> __device__ __forceinline__ A pw_in(double v) { return (A)v; }
template <typename A> __device__ __forceinline__ A pw_in(__half v) { return (A)__half2float(v); }
template <typename A> __device__ __forceinline__ A pw_in(__nv_bfloat16 v) { return (A)__bfloat162float(v); }
template <typename A> __device__ __forceinline__ A pw_in(unsigned char v) { return (A)v; }
template <typename A> __device__ __forceinline__ A pw_in(int v) { return (A)v; }
template <typename A> __device__ __forceinline__ A pw_in(long long v) { return (A)v; }

// A into TO: floats round to nearest even; integers wrap as the dtype's arithmetic does (the
// host never asks for an integer TO from a float A).
template <typename TO> struct pw_out {
    template <typename A> static __device__ __forceinline__ TO run(A v) { return (TO)v; }
};
template <> struct pw_out<__half> {
    template <typename A> static __device__ __forceinline__ __half run(A v) { return __float2half_rn((float)v); }
};
template <> struct pw_out<__nv_bfloat16> {
    template <typename A> static __device__ __forceinline__ __nv_bfloat16 run(A v) { return __float2bfloat16_rn((float)v); }
};
template <> struct pw_out<unsigned char> {
    template <typename A> static __device__ __forceinline__ unsigned char run(A v) { return (unsigned char)(long long)v; }
};
template <> struct pw_out<int> {
    template <typename A> static __device__ __forceinline__ int run(A v) { return (int)(long long)v; }
};

// Operand k's value at offset off: memory, or the scalar s when SCALARS marks it.
template <typename A, int SCALAR, typename T> __device__ __forceinline__ A pw_operand(const T *p, long long off, A s)
{
    if (SCALAR) return s;
    return pw_in<A>(p[off]);
}

// The offsets of element e (row-major over d[0..ndim)) in the four stride sets (y, a, b, c),
// into off[0..3]. The loop is unrolled over all eight dimensions, so that the sizes and
// strides stay in registers (an array indexed at run time would live in local memory).
__device__ __forceinline__ void pw_offsets(long long e, int ndim, const long long *d, const long long (*st)[8],
                                           long long *off)
{
    long long o0 = 0, o1 = 0, o2 = 0, o3 = 0, rest = e;
#pragma unroll
    for (int k = 7; k > 0; --k) {
        if (k < ndim) {
            const long long q = ((unsigned long long)(rest | d[k]) >> 32) == 0
                                    ? (long long)((unsigned)rest / (unsigned)d[k])
                                    : rest / d[k];
            const long long i = rest - q * d[k];
            o0 += i * st[0][k], o1 += i * st[1][k], o2 += i * st[2][k], o3 += i * st[3][k];
            rest = q;
        }
    }
    off[0] = o0 + rest * st[0][0], off[1] = o1 + rest * st[1][0];
    off[2] = o2 + rest * st[2][0], off[3] = o3 + rest * st[3][0];
}

template <typename A, typename TO, typename TA, typename TB, typename TC, typename F, int SCALARS>
__device__ __forceinline__ void pw_one(TO *y, const TA *a, const TB *b, const TC *c, const long long *off, A sa, A sb, A sc)
{
    const A va = pw_operand<A, SCALARS & 1>(a, off[1], sa);
    const A vb = F::arity >= 2 ? pw_operand<A, SCALARS & 2>(b, off[2], sb) : (A)0;
    const A vc = F::arity >= 3 ? pw_operand<A, SCALARS & 4>(c, off[3], sc) : (A)0;
    y[off[0]] = pw_out<TO>::run(F::apply(va, vb, vc));
}

// Eight neighbouring elements, aligned so that a copy is one to four vector accesses.
#define PW_CHUNK 8
template <typename T> struct alignas(PW_CHUNK * sizeof(T)) pw_chunk {
    T v[PW_CHUNK];
};

template <typename T> __device__ __forceinline__ bool pw_chunk_aligned(const T *p)
{
    return ((unsigned long long)p % (PW_CHUNK * sizeof(T))) == 0;
}

// Chunks a thread loads before it computes any: two where the widest of y and the operands is
// 4 bytes (64 bytes of f32 in flight), else one (f64: 64 bytes; halves and bytes: 16 or 8,
// many threads). Measured on an H200: f32 functions gain from the second chunk, halves lose
// (docs/performance.md). tensor_math.lua sizes the grid by the same rule (chunk_elements).
template <typename TO, typename TA, typename TB, typename TC> struct pw_chunks {
    static const int widest = sizeof(TO) > sizeof(TA) ? (sizeof(TO) > sizeof(TB) ? (sizeof(TO) > sizeof(TC) ? sizeof(TO) : sizeof(TC))
                                                                                   : (sizeof(TB) > sizeof(TC) ? sizeof(TB) : sizeof(TC)))
                                                       : (sizeof(TA) > sizeof(TB) ? (sizeof(TA) > sizeof(TC) ? sizeof(TA) : sizeof(TC))
                                                                                   : (sizeof(TB) > sizeof(TC) ? sizeof(TB) : sizeof(TC)));
    static const int n = widest == 4 ? 2 : 1;
};

// Operand k of a chunk path: a chunk from memory (inner stride 1), one element for the whole
// chunk (inner stride 0: a broadcast along the last dimension), or the number s.
template <typename T> struct pw_lane {
    pw_chunk<T> c;
    __device__ __forceinline__ void load(const T *p, long long off, int inner)
    {
        if (inner) c = *(const pw_chunk<T> *)(p + off);
        else c.v[0] = p[off];
    }
    template <typename A> __device__ __forceinline__ A at(int j, int inner, bool used, A s) const
    {
        return !used ? s : pw_in<A>(inner ? c.v[j] : c.v[0]);
    }
};

// Whether operand p, read along the last dimension with stride inner (0 or 1), can be read in
// chunks: its chunks aligned, and (ROWS) every other stride a whole number of chunks so that
// each row starts on a chunk.
template <bool ROWS, typename T> __device__ __forceinline__ bool pw_chunkable(const T *p, int ndim, const long long *st)
{
    if (!ROWS) return pw_chunk_aligned(p);
    const long long inner = tocha::pick8(st, ndim - 1);
    if (inner == 0) return true;
    if (inner != 1 || !pw_chunk_aligned(p)) return false;
    bool ok = true;
#pragma unroll
    for (int k = 0; k < 7; ++k)
        if (k < ndim - 1 && st[k] % PW_CHUNK != 0) ok = false;
    return ok;
}

// The chunk paths, a thread computing pw_chunks<...>::n chunks of 8 elements at a time from
// vector loads, all issued before the first result:
// - dense (ROWS false): every tensor operand and y of one contiguous shape, stride 1;
// - rows (ROWS true): y dense along a last dimension of a whole number of chunks, each tensor
//   operand read along it with stride 1 or 0 (a channel scale x * s[c], a row's bias or
//   maximum), the chunk's offsets found from its first element's indices.
// Returns false (nothing done) where the operands do not qualify (unaligned views).
template <typename A, typename TO, typename TA, typename TB, typename TC, typename F, int SCALARS, bool ROWS>
__device__ __forceinline__ bool pw_vector(TO *y, long long n, int ndim, const long long *d, const long long (*st)[8],
                                          const TA *a, const TB *b, const TC *c, A sa, A sb, A sc)
{
    const bool ua = !(SCALARS & 1), ub = F::arity >= 2 && !(SCALARS & 2), uc = F::arity >= 3 && !(SCALARS & 4);
    const int last = ndim - 1;
    if (ROWS && (tocha::pick8(d, last) % PW_CHUNK != 0 || tocha::pick8(st[0], last) != 1)) return false;
    if (!pw_chunkable<ROWS>(y, ndim, st[0]) || (ua && !pw_chunkable<ROWS>(a, ndim, st[1])) ||
        (ub && !pw_chunkable<ROWS>(b, ndim, st[2])) || (uc && !pw_chunkable<ROWS>(c, ndim, st[3])))
        return false;
    const int ia = ROWS ? (int)tocha::pick8(st[1], last) : 1, ib = ROWS ? (int)tocha::pick8(st[2], last) : 1,
              ic = ROWS ? (int)tocha::pick8(st[3], last) : 1;
    const int CH = pw_chunks<TO, TA, TB, TC>::n;
    const long long chunks = n / PW_CHUNK, span = (long long)blockDim.x * CH;
    for (long long base = blockIdx.x * span + threadIdx.x; base < chunks; base += gridDim.x * span) {
        pw_lane<TA> la[CH];
        pw_lane<TB> lb[CH];
        pw_lane<TC> lc[CH];
        long long yo[CH];
#pragma unroll
        for (int j = 0; j < CH; ++j) {
            const long long t = base + j * (long long)blockDim.x;
            if (t >= chunks) break;
            long long off[4] = {t * PW_CHUNK, t * PW_CHUNK, t * PW_CHUNK, t * PW_CHUNK};
            if (ROWS) pw_offsets(t * PW_CHUNK, ndim, d, st, off);
            yo[j] = off[0];
            if (ua) la[j].load(a, off[1], ia);
            if (ub) lb[j].load(b, off[2], ib);
            if (uc) lc[j].load(c, off[3], ic);
        }
#pragma unroll
        for (int j = 0; j < CH; ++j) {
            if (base + j * (long long)blockDim.x >= chunks) break;
            pw_chunk<TO> r;
#pragma unroll
            for (int e = 0; e < PW_CHUNK; ++e)
                r.v[e] = pw_out<TO>::run(F::apply(la[j].at(e, ia, ua, sa), lb[j].at(e, ib, ub, sb), lc[j].at(e, ic, uc, sc)));
            *(pw_chunk<TO> *)(y + yo[j]) = r;
        }
    }
    if (!ROWS)
        for (long long e = chunks * PW_CHUNK + (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
             e += (long long)blockDim.x * gridDim.x) {
            const long long off[4] = {e, e, e, e};
            pw_one<A, TO, TA, TB, TC, F, SCALARS>(y, a, b, c, off, sa, sb, sc);
        }
    return true;
}

template <typename A, typename TO, typename TA, typename TB, typename TC, typename F, int SCALARS>
__device__ void tocha_pointwise(TO *y, long long n, int ndim, long long d0, long long d1, long long d2, long long d3,
                                long long d4, long long d5, long long d6, long long d7, long long y0, long long y1,
                                long long y2, long long y3, long long y4, long long y5, long long y6, long long y7,
                                const TA *a, long long a0, long long a1, long long a2, long long a3, long long a4,
                                long long a5, long long a6, long long a7, const TB *b, long long b0, long long b1,
                                long long b2, long long b3, long long b4, long long b5, long long b6, long long b7,
                                const TC *c, long long c0, long long c1, long long c2, long long c3, long long c4,
                                long long c5, long long c6, long long c7, double sa, double sb, double sc)
{
    const A va = (A)sa, vb = (A)sb, vc = (A)sc;
    const long long stride = (long long)blockDim.x * gridDim.x;
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long d[8] = {d0, d1, d2, d3, d4, d5, d6, d7};
    const long long st[4][8] = {{y0, y1, y2, y3, y4, y5, y6, y7},
                                {a0, a1, a2, a3, a4, a5, a6, a7},
                                {b0, b1, b2, b3, b4, b5, b6, b7},
                                {c0, c1, c2, c3, c4, c5, c6, c7}};
    if (ndim == 1) {
        const bool dense = y0 == 1 && ((SCALARS & 1) || a0 == 1) && (F::arity < 2 || (SCALARS & 2) || b0 == 1) &&
                           (F::arity < 3 || (SCALARS & 4) || c0 == 1);
        if (dense && pw_vector<A, TO, TA, TB, TC, F, SCALARS, false>(y, n, ndim, d, st, a, b, c, va, vb, vc)) return;
    }
    if (pw_vector<A, TO, TA, TB, TC, F, SCALARS, true>(y, n, ndim, d, st, a, b, c, va, vb, vc)) return;
    if (ndim == 1) {
        // One dimension: offsets are multiples of the strides.
        for (; e < n; e += stride) {
            const long long off[4] = {e * y0, e * a0, e * b0, e * c0};
            pw_one<A, TO, TA, TB, TC, F, SCALARS>(y, a, b, c, off, va, vb, vc);
        }
        return;
    }
    for (; e < n; e += stride) {
        long long off[4];
        pw_offsets(e, ndim, d, st, off);
        pw_one<A, TO, TA, TB, TC, F, SCALARS>(y, a, b, c, off, va, vb, vc);
    }
}
