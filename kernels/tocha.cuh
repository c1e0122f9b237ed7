// tocha.cuh: what every tocha kernel can use, on cuda and on the simulator alike. It is
// placed before each kernel's source in the translation unit tocha compiles.
//
// Element conversions go through double (exact for every dtype but i64 past 2^53, which
// converts between integers directly); float to integer truncates toward zero and saturates,
// NaN becomes 0, so that a cast is defined for every input.

namespace tocha {

// Integer dtypes round random values instead of keeping fractions.
template <typename T> struct is_integer { static const bool value = false; };
template <> struct is_integer<unsigned char> { static const bool value = true; };
template <> struct is_integer<int> { static const bool value = true; };
template <> struct is_integer<long long> { static const bool value = true; };

template <typename T> struct limits;
template <> struct limits<unsigned char> { static __device__ double lo() { return 0.0; } static __device__ double hi() { return 255.0; } };
template <> struct limits<int> { static __device__ double lo() { return -2147483648.0; } static __device__ double hi() { return 2147483647.0; } };
template <> struct limits<long long> { static __device__ double lo() { return -9223372036854775808.0; } static __device__ double hi() { return 9223372036854775807.0; } };

__device__ __forceinline__ double to_double(float v) { return (double)v; }
__device__ __forceinline__ double to_double(double v) { return v; }
__device__ __forceinline__ double to_double(__half v) { return (double)__half2float(v); }
__device__ __forceinline__ double to_double(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
__device__ __forceinline__ double to_double(unsigned char v) { return (double)v; }
__device__ __forceinline__ double to_double(int v) { return (double)v; }
__device__ __forceinline__ double to_double(long long v) { return (double)v; }
__device__ __forceinline__ double to_double(unsigned long long v) { return (double)v; }

// Saturating, NaN to 0, truncating toward zero. hi() of i64 rounds up to 2^63 in double,
// so the top is compared with >= and pinned to the largest value exactly.
template <typename D> __device__ __forceinline__ D saturate(double v)
{
    if (v != v) return (D)0;
    if (v <= limits<D>::lo()) return (D)limits<D>::lo();
    if (v >= limits<D>::hi()) return sizeof(D) == 8 ? (D)0x7fffffffffffffffLL : (D)limits<D>::hi();
    return (D)v;
}

template <typename D> __device__ __forceinline__ D from_double(double v);
template <> __device__ __forceinline__ float from_double<float>(double v) { return (float)v; }
template <> __device__ __forceinline__ double from_double<double>(double v) { return v; }
template <> __device__ __forceinline__ __half from_double<__half>(double v) { return __double2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_double<__nv_bfloat16>(double v) { return __double2bfloat16(v); }
template <> __device__ __forceinline__ unsigned char from_double<unsigned char>(double v) { return saturate<unsigned char>(v); }
template <> __device__ __forceinline__ int from_double<int>(double v) { return saturate<int>(v); }
template <> __device__ __forceinline__ long long from_double<long long>(double v) { return saturate<long long>(v); }

// Everything passes through double except i64 into an integer, which keeps all its bits.
template <typename D, typename S> struct converter {
    static __device__ __forceinline__ D run(S v) { return from_double<D>(to_double(v)); }
};
template <> struct converter<long long, long long> {
    static __device__ __forceinline__ long long run(long long v) { return v; }
};
template <> struct converter<int, long long> {
    static __device__ __forceinline__ int run(long long v)
    {
        return (int)(v < -2147483648LL ? -2147483648LL : v > 2147483647LL ? 2147483647LL : v);
    }
};
template <> struct converter<unsigned char, long long> {
    static __device__ __forceinline__ unsigned char run(long long v)
    {
        return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
};

template <typename D, typename S> __device__ __forceinline__ D convert(S v)
{
    return converter<D, S>::run(v);
}

// The type a sum of D values is kept in: one that loses nothing D can hold. Integer sums are
// exact (u8 in int, i32 in i64; i64 wraps, as unsigned arithmetic does) and then converted
// back to D by convert(), which saturates.
template <typename D> struct accumulator { typedef D type; };
template <> struct accumulator<__half> { typedef float type; };
template <> struct accumulator<__nv_bfloat16> { typedef float type; };
template <> struct accumulator<unsigned char> { typedef int type; };
template <> struct accumulator<int> { typedef long long type; };
template <> struct accumulator<long long> { typedef unsigned long long type; };

// D into its accumulator, and an accumulator back into D.
template <typename A, typename D> __device__ __forceinline__ A widen(D v) { return (A)v; }
template <> __device__ __forceinline__ float widen<float, __half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float widen<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename D, typename A> __device__ __forceinline__ D narrow(A v) { return convert<D>(v); }
template <> __device__ __forceinline__ long long narrow<long long, unsigned long long>(unsigned long long v) { return (long long)v; }

// The type float ops compute in: f32 for f32, f16 and bf16 (halves are computed in f32, as
// PyTorch does), f64 for f64; and the conversions into it and back (round to nearest even).
template <typename T> struct compute { typedef float type; };
template <> struct compute<double> { typedef double type; };
__device__ __forceinline__ float to_compute(float v) { return v; }
__device__ __forceinline__ double to_compute(double v) { return v; }
__device__ __forceinline__ float to_compute(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_compute(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_compute(typename compute<T>::type v);
template <> __device__ __forceinline__ float from_compute<float>(float v) { return v; }
template <> __device__ __forceinline__ double from_compute<double>(double v) { return v; }
template <> __device__ __forceinline__ __half from_compute<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_compute<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// +infinity in A (f32 or f64), from its bits (no math header is assumed).
template <typename A> __device__ __forceinline__ A infinity()
{
    A v;
    if (sizeof(A) == 8) {
        const unsigned long long b = 0x7ff0000000000000ULL;
        memcpy(&v, &b, 8);
    } else {
        const unsigned b = 0x7f800000u;
        memcpy(&v, &b, 4);
    }
    return v;
}

// v[k] of an array of eight, for k known only at run time, without indexing the array at run
// time: that would move the whole array (a kernel's sizes and strides) from registers to local
// memory.
__device__ __forceinline__ long long pick8(const long long *v, int k)
{
    long long r = v[0];
#pragma unroll
    for (int i = 1; i < 8; ++i)
        if (i == k) r = v[i];
    return r;
}

__device__ __forceinline__ int max_int(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int min_int(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ long long max_ll(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long min_ll(long long a, long long b) { return a < b ? a : b; }

// Sixteen bytes of D, for vector stores: one 128-bit store instruction per pack. The elements
// are kept as raw bits in four 32-bit words, so that the store is a single uint4 store (a
// struct of D, assigned, is split into element stores by the compiler).
template <typename D> struct vec16 {
    static const int n = sizeof(D) >= 16 ? 1 : 16 / (int)sizeof(D);
};

template <int BYTES> struct bits_of;
template <> struct bits_of<1> { typedef unsigned char type; };
template <> struct bits_of<2> { typedef unsigned short type; };
template <> struct bits_of<4> { typedef unsigned int type; };
template <> struct bits_of<8> { typedef unsigned long long type; };

template <typename D> struct pack16 {
    unsigned w[4];
    __device__ __forceinline__ pack16() { w[0] = w[1] = w[2] = w[3] = 0u; }
    // Element e (a compile-time constant after unrolling) takes v's bits.
    __device__ __forceinline__ void set(int e, D v)
    {
        typename bits_of<sizeof(D)>::type b;
        memcpy(&b, &v, sizeof b);
        if (sizeof(D) == 8) {
            w[2 * e] = (unsigned)(unsigned long long)b;
            w[2 * e + 1] = (unsigned)((unsigned long long)b >> 32);
        } else {
            w[e * sizeof(D) / 4] |= (unsigned)b << (8 * (e * sizeof(D) % 4));
        }
    }
};

// The asm below spells each access out: the compiler split a uint4 store into 32-bit stores
// (seen in the SASS), and cache hints have no C spelling. The hints are chosen per kernel from
// measurements (docs/performance.md, "Cache hints"):
// - STREAMING stores (st.global.cs): the line is written once and not read back, so L2 may
//   evict it first.
// - FETCH_256 loads (ld.global.nc.L2::256B): L2 fetches the whole 256-byte block around the
//   load from DRAM, so a warp's next loads along the row find their lines there.

// Stores the first BYTES (4, 8 or 16) bytes of a pack at p, aligned to BYTES.
template <int BYTES, bool STREAMING = false, typename D> __device__ __forceinline__ void store_words(D *p, const pack16<D> &x)
{
#ifdef TOCHA_SIM
    memcpy((void *)p, (const void *)x.w, BYTES);
#else
    if (BYTES == 16 && STREAMING)
        asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x.w[0]), "r"(x.w[1]),
                     "r"(x.w[2]), "r"(x.w[3])
                     : "memory");
    else if (BYTES == 16)
        asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x.w[0]), "r"(x.w[1]),
                     "r"(x.w[2]), "r"(x.w[3])
                     : "memory");
    else if (BYTES == 8 && STREAMING)
        asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(x.w[0]), "r"(x.w[1]) : "memory");
    else if (BYTES == 8)
        asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(x.w[0]), "r"(x.w[1]) : "memory");
    else if (STREAMING)
        asm volatile("st.global.cs.u32 [%0], %1;" ::"l"(p), "r"(x.w[0]) : "memory");
    else
        asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(x.w[0]) : "memory");
#endif
}

// Stores a pack at p, which must be 16-byte aligned: one 128-bit store.
template <bool STREAMING = false, typename D> __device__ __forceinline__ void store_pack(D *p, const pack16<D> &x)
{
    store_words<16, STREAMING>(p, x);
}

// Loads BYTES (4, 8 or 16) bytes at p, aligned to BYTES, into the first words of w, through
// the read-only path; the simulator copies them.
template <int BYTES, bool FETCH_256 = false> __device__ __forceinline__ void load_words(const void *p, unsigned w[4])
{
#ifdef TOCHA_SIM
    memcpy(w, p, BYTES);
#else
    if (BYTES == 16 && FETCH_256)
        asm volatile("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                     : "l"(p));
    else if (BYTES == 16)
        asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                     : "l"(p));
    else if (BYTES == 8 && FETCH_256)
        asm volatile("ld.global.nc.L2::256B.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
    else if (BYTES == 8)
        asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
    else if (FETCH_256)
        asm volatile("ld.global.nc.L2::256B.u32 %0, [%1];" : "=r"(w[0]) : "l"(p));
    else
        asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(w[0]) : "l"(p));
#endif
}

__device__ __forceinline__ void load16(const void *p, unsigned w[4]) { load_words<16>(p, w); }

// The 16 bytes at byte off (0 to 15) of the 32 bytes c.
__device__ __forceinline__ void window16(const unsigned c[8], unsigned off, unsigned w[4])
{
    // Whole words first (by 8, then by 4 bytes), then the bytes within a word.
    unsigned t[6], u[5];
#pragma unroll
    for (int i = 0; i < 6; ++i) t[i] = (off & 8u) ? c[i + 2] : c[i];
#pragma unroll
    for (int i = 0; i < 5; ++i) u[i] = (off & 4u) ? t[i + 1] : t[i];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = __funnelshift_r(u[i], u[i + 1], 8u * (off & 3u));
}

// The 16 bytes at p from c, the aligned 16-byte chunk that holds p and the next one (only the
// bytes of those that p's first bytes need are read; the rest may be anything).
__device__ __forceinline__ void shift_chunks16(const void *p, const unsigned c[8], unsigned w[4])
{
    window16(c, (unsigned)((unsigned long long)p & 15u), w);
}

// Loads the 16 bytes at p, which need only be aligned to their elements, into w, through the
// read-only path: from the aligned 16-byte chunk that holds p and, when the first `need` bytes
// (1 to 16) run past it, the next one, then shifted into place (bytes past `need` are
// undefined). Only chunks that hold a byte of [p, p + need) are read, so the loads stay inside
// any allocation made of whole 16-byte chunks (tocha's are) and never cross a page.
template <bool FETCH_256 = false>
__device__ __forceinline__ void load_unaligned16(const void *p, int need, unsigned w[4])
{
    const unsigned long long a = (unsigned long long)p;
    const unsigned off = (unsigned)(a & 15u);
    const char *base = (const char *)(a - off);
    if (off == 0) {
        load_words<16, FETCH_256>(base, w);
        return;
    }
    unsigned c[8];
    load_words<16, FETCH_256>(base, c);
    c[4] = c[5] = c[6] = c[7] = 0u;
    if ((int)off + need > 16) load_words<16, FETCH_256>(base + 16, c + 4);
    window16(c, off, w);
}

// load_unaligned16's chunks without its branches, for a batch of loads issued before any is
// used: the chunk that holds p, then the next one where the first `need` bytes run past it,
// else the same one again. Shift them into place with shift_chunks16.
template <bool FETCH_256 = false>
__device__ __forceinline__ void load_chunks16(const void *p, int need, unsigned c[8])
{
    const unsigned long long a = (unsigned long long)p;
    const unsigned off = (unsigned)(a & 15u);
    const char *base = (const char *)(a - off);
    load_words<16, FETCH_256>(base, c);
    load_words<16, FETCH_256>(base + ((int)off + need > 16 ? 16 : 0), c + 4);
}

// An element of D read through the read-only path.
template <typename D> __device__ __forceinline__ D load_element(const D *p)
{
#ifdef TOCHA_SIM
    return *p;
#else
    return __ldg(p);
#endif
}

// 32-bit division where the dividend allows it (a 64-bit one is several times longer).
__device__ __forceinline__ long long div_small(long long n, int d)
{
    return ((unsigned long long)n >> 32) == 0 ? (long long)((unsigned)n / (unsigned)d) : n / d;
}

// Element e of a 16-byte group of D held as four words.
template <typename D> __device__ __forceinline__ D element_of(const unsigned w[4], int e)
{
    D v;
    if (sizeof(D) == 8) {
        unsigned long long b = (unsigned long long)w[2 * e] | ((unsigned long long)w[2 * e + 1] << 32);
        memcpy(&v, &b, 8);
    } else {
        typename bits_of<sizeof(D)>::type b =
            (typename bits_of<sizeof(D)>::type)(w[e * sizeof(D) / 4] >> (8 * (e * sizeof(D) % 4)));
        memcpy(&v, &b, sizeof(D));
    }
    return v;
}

// V consecutive elements of T read as one load (a 16- or 8-byte group, kept as raw words until
// used, aligned to its size) or, V = 1, one element; at(e) gives element e in the compute type.
template <typename T, int V> struct unit {
    unsigned w[4];
    __device__ __forceinline__ void load(const T *p) { load_words<V * sizeof(T)>(p, w); }
    __device__ __forceinline__ typename compute<T>::type at(int e) const { return to_compute(element_of<T>(w, e)); }
};
template <typename T> struct unit<T, 1> {
    T v;
    __device__ __forceinline__ void load(const T *p) { v = load_element(p); }
    __device__ __forceinline__ typename compute<T>::type at(int) const { return to_compute(v); }
};

// Stores V values of the compute type A to p as T: one element (V = 1) or one 16- or 8-byte group
// (p aligned to its size), the store that matches unit's load.
template <typename T, int V, typename A> __device__ __forceinline__ void store_unit(T *p, const A *v)
{
    if (V == 1) {
        p[0] = from_compute<T>(v[0]);
        return;
    }
    pack16<T> out;
#pragma unroll
    for (int e = 0; e < V; ++e) out.set(e, from_compute<T>(v[e]));
    store_words<V * sizeof(T)>(p, out);
}

// Stores elements lo to hi - 1 of a pack to p[lo] .. p[hi - 1], one by one.
template <typename D> __device__ __forceinline__ void store_elements(D *p, const pack16<D> &x, int lo, int hi)
{
#pragma unroll
    for (int e = 0; e < vec16<D>::n; ++e)
        if (e >= lo && e < hi) p[e] = element_of<D>(x.w, e);
}

// ---- teams: a row read by the lanes of a warp or by a whole CTA, and combined ----
//
// A row kernel gives each row a team: `team` lanes of one warp (a power of two, 1 to 32, the
// warp holding 32 / team rows) or the whole CTA. Every lane of a warp calls the combining
// functions, so a lane whose row is past the end stays to the end with a value that loses.

// fn(element, index) for each element of row[0, n) that `member` of a team of `team` threads
// owns: the elements before the row's first 16-byte boundary and after its last whole 16 bytes
// one by one, the 16-byte groups between strided over the team, four in flight a thread (the
// last up to three together).
template <typename T, typename F>
__device__ __forceinline__ void row_each(const T *row, long long n, unsigned member, unsigned team, F fn)
{
    const int V = vec16<T>::n;
    long long a = (long long)(((16u - ((unsigned)(unsigned long long)row & 15u)) & 15u) / sizeof(T));
    if (a > n) a = n;
    const long long groups = (n - a) / V, b = a + groups * V;
    for (long long k = member; k < a; k += team) fn(row[k], k);
    long long g = member;
    for (; g + 3 * (long long)team < groups; g += 4 * (long long)team) {
        unsigned w[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) load_words<16>(row + a + (g + j * (long long)team) * V, w[j]);
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < V; ++e) fn(element_of<T>(w[j], e), a + (g + j * (long long)team) * V + e);
    }
    // At most three groups are left a lane (fewer than four strides of the team): their loads
    // issued together, so that a short row costs one round trip, not three.
    {
        unsigned w[3][4];
#pragma unroll
        for (int j = 0; j < 3; ++j)
            if (g + j * (long long)team < groups) load_words<16>(row + a + (g + j * (long long)team) * V, w[j]);
#pragma unroll
        for (int j = 0; j < 3; ++j)
            if (g + j * (long long)team < groups)
#pragma unroll
                for (int e = 0; e < V; ++e) fn(element_of<T>(w[j], e), a + (g + j * (long long)team) * V + e);
    }
    for (long long k = b + member; k < n; k += team) fn(row[k], k);
}

// out[k] = fn(in[k]) for each element of a row that `member` of a team of `team` threads owns,
// in 16-byte groups (four in flight a thread) where in and out share their alignment, else one
// by one.
template <typename T, typename F>
__device__ __forceinline__ void row_map(const T *in, T *out, long long n, unsigned member, unsigned team, F fn)
{
    if ((((unsigned long long)in ^ (unsigned long long)out) & 15u) != 0) {
        for (long long k = member; k < n; k += team) out[k] = fn(in[k]);
        return;
    }
    const int V = vec16<T>::n;
    long long a = (long long)(((16u - ((unsigned)(unsigned long long)in & 15u)) & 15u) / sizeof(T));
    if (a > n) a = n;
    const long long groups = (n - a) / V, b = a + groups * V;
    for (long long k = member; k < a; k += team) out[k] = fn(in[k]);
    long long g = member;
    for (; g + 3 * (long long)team < groups; g += 4 * (long long)team) {
        unsigned w[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) load_words<16>(in + a + (g + j * (long long)team) * V, w[j]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            pack16<T> r;
#pragma unroll
            for (int e = 0; e < V; ++e) r.set(e, fn(element_of<T>(w[j], e)));
            store_pack(out + a + (g + j * (long long)team) * V, r);
        }
    }
    {
        unsigned w[3][4];
#pragma unroll
        for (int j = 0; j < 3; ++j)
            if (g + j * (long long)team < groups) load_words<16>(in + a + (g + j * (long long)team) * V, w[j]);
#pragma unroll
        for (int j = 0; j < 3; ++j)
            if (g + j * (long long)team < groups) {
                pack16<T> r;
#pragma unroll
                for (int e = 0; e < V; ++e) r.set(e, fn(element_of<T>(w[j], e)));
                store_pack(out + a + (g + j * (long long)team) * V, r);
            }
    }
    for (long long k = b + member; k < n; k += team) out[k] = fn(in[k]);
}

// fn(e0, e1, k) for each element k of two rows of n elements, in0 and in1, that `member` of a
// team of `team` threads owns, its result stored at out[k] where STORE (fn returns T), else
// dropped. NIN 1 reads in0 alone (e1 is e0; in1 is not read). The rows (and out) are read in
// 16-byte groups, 64 bytes in flight a thread (four groups of one row, two of each of two; the
// last ones together), where they share their alignment, else one element at a time; the
// elements outside whole groups one by one.
template <int NIN, bool STORE, typename T, typename F>
__device__ __forceinline__ void row_walk(const T *in0, const T *in1, T *out, long long n, unsigned member, unsigned team,
                                         F fn)
{
    const unsigned long long at0 = (unsigned long long)in0;
    const bool split = (NIN == 2 && ((at0 ^ (unsigned long long)in1) & 15u) != 0) ||
                       (STORE && ((at0 ^ (unsigned long long)out) & 15u) != 0);
    auto one = [&](long long k) {
        const T e0 = in0[k], e1 = NIN == 2 ? in1[k] : e0;
        if constexpr (STORE)
            out[k] = fn(e0, e1, k);
        else
            fn(e0, e1, k);
    };
    if (split) {
        for (long long k = member; k < n; k += team) one(k);
        return;
    }
    const int V = vec16<T>::n;
    long long a = (long long)(((16u - ((unsigned)at0 & 15u)) & 15u) / sizeof(T));
    if (a > n) a = n;
    const long long groups = (n - a) / V, b = a + groups * V;
    // A group's V elements through fn, from its words in w0 (and w1), starting at element k0.
    auto group = [&](const unsigned *w0, const unsigned *w1, long long k0) {
        pack16<T> r;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const T e0 = element_of<T>(w0, e), e1 = element_of<T>(w1, e);
            if constexpr (STORE)
                r.set(e, fn(e0, e1, k0 + e));
            else
                fn(e0, e1, k0 + e);
        }
        if constexpr (STORE) store_pack(out + k0, r);
    };
    // D groups of each row in flight: 64 bytes a thread in all.
    const int D = 4 / NIN;
    for (long long k = member; k < a; k += team) one(k);
    long long g = member;
    for (; g + (D - 1) * (long long)team < groups; g += D * (long long)team) {
        unsigned w0[D][4], w1[D][4];
#pragma unroll
        for (int j = 0; j < D; ++j) {
            load_words<16>(in0 + a + (g + j * (long long)team) * V, w0[j]);
            if (NIN == 2) load_words<16>(in1 + a + (g + j * (long long)team) * V, w1[j]);
        }
#pragma unroll
        for (int j = 0; j < D; ++j) group(w0[j], NIN == 2 ? w1[j] : w0[j], a + (g + j * (long long)team) * V);
    }
    if (D > 1) {
        unsigned w0[D][4], w1[D][4];
#pragma unroll
        for (int j = 0; j < D - 1; ++j)
            if (g + j * (long long)team < groups) {
                load_words<16>(in0 + a + (g + j * (long long)team) * V, w0[j]);
                if (NIN == 2) load_words<16>(in1 + a + (g + j * (long long)team) * V, w1[j]);
            }
#pragma unroll
        for (int j = 0; j < D - 1; ++j)
            if (g + j * (long long)team < groups) group(w0[j], NIN == 2 ? w1[j] : w0[j], a + (g + j * (long long)team) * V);
    }
    for (long long k = b + member; k < n; k += team) one(k);
}

__device__ __forceinline__ float shfl_xor(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double shfl_xor(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ long long shfl_xor(long long v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }

// v combined over the team (combine(a, b) -> the pair's value), in every member: shuffles
// within the warp (xor, so that each team of a warp stays among its lanes), then for a CTA
// the warps' values through shared memory, combined in warp order. V is a number or a struct
// with a shfl_xor(V, int) overload beside it.
template <typename V, typename F> __device__ __forceinline__ V team_combine(V v, unsigned team, bool cta, F combine)
{
    for (int o = cta ? 16 : (int)team / 2; o > 0; o /= 2) v = combine(v, shfl_xor(v, o));
    if (!cta) return v;
    __shared__ V part[32];
    const unsigned warps = blockDim.x / 32;
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[0];
    for (unsigned w = 1; w < warps; ++w) v = combine(v, part[w]);
    __syncthreads(); // part is reused by the next call
    return v;
}

// A team's sum of v, in every member.
template <typename A> __device__ __forceinline__ A team_sum(A v, unsigned team, bool cta)
{
    return team_combine(v, team, cta, [](A x, A y) { return x + y; });
}

// The team of the calling thread for a row kernel's `rows` (-1: the CTA, one row a CTA; 1 to
// 32: that many lanes a row): its row, its member index and its size.
__device__ __forceinline__ void team_of(int rows, long long *row, unsigned *member, unsigned *team)
{
    if (rows < 0) {
        *row = blockIdx.x, *member = threadIdx.x, *team = blockDim.x;
        return;
    }
    *team = (unsigned)rows;
    *member = threadIdx.x % (unsigned)rows;
    *row = (long long)blockIdx.x * (blockDim.x / rows) + threadIdx.x / rows;
}

// A running (count, mean, sum of squared deviations from the mean): Welford's update an element,
// Chan's merge of two; as accurate as the two-pass formula from one read. Shuffled as three
// numbers (team_combine).
template <typename A> struct moments {
    long long n;
    A mean, m2;
};
template <typename A> __device__ __forceinline__ moments<A> no_moments()
{
    moments<A> v;
    v.n = 0, v.mean = (A)0, v.m2 = (A)0;
    return v;
}
template <typename A> __device__ __forceinline__ void moments_push(moments<A> &v, A value)
{
    const A d = value - v.mean;
    v.n += 1;
    v.mean += d / (A)v.n;
    v.m2 += d * (value - v.mean);
}
template <typename A> __device__ __forceinline__ moments<A> moments_merge(moments<A> a, moments<A> b)
{
    if (b.n == 0) return a;
    if (a.n == 0) return b;
    moments<A> r;
    r.n = a.n + b.n;
    const A delta = b.mean - a.mean, share = (A)b.n / (A)r.n;
    r.mean = a.mean + delta * share;
    r.m2 = a.m2 + b.m2 + delta * delta * (A)a.n * share;
    return r;
}
template <typename A> __device__ __forceinline__ moments<A> shfl_xor(moments<A> v, int o)
{
    moments<A> r;
    r.n = shfl_xor(v.n, o), r.mean = shfl_xor(v.mean, o), r.m2 = shfl_xor(v.m2, o);
    return r;
}

} // namespace tocha
