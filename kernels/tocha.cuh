// tocha.cuh: what every tocha kernel can use, on cuda and on the simulator alike. It is
// placed before each kernel's source in the translation unit tocha compiles.
//
// Element conversions go through double (exact for every dtype but i64 past 2^53, which
// converts between integers directly); float to integer truncates toward zero and saturates,
// NaN becomes 0, so that a cast is defined for every input.
// The upsample kernels' work item is a segment of a row: per lane, TOCHA_UPSAMPLE_SEGMENT
// 16-byte vectors (forward) or runs of K dx elements (backward), or the short
// TOCHA_UPSAMPLE_SEGMENT_SHORT where that measured better: forward items whose scale_h > 1
// output rows are alike against 128-byte lines (or one step for some of those cases: the
// forward's forward_plan) or go through shared memory, backward items whose scale_h > 1 dy
// rows a lane reads as whole 16-byte loads (docs/performance.md, "Work item length"). With one
// output row per input row both kernels take the whole tensor as one row and cut it into items
// of TOCHA_UPSAMPLE_SEGMENT steps. The host sizes grids by the same rules (host/src/upsample.c,
// kernel_grid() and segments(); upsample_spec checks the three).
#define TOCHA_UPSAMPLE_SEGMENT 4
#define TOCHA_UPSAMPLE_SEGMENT_SHORT 2

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

__device__ __forceinline__ int max_int(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int min_int(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ long long max_ll(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long min_ll(long long a, long long b) { return a < b ? a : b; }

// log2 of N, a power of two, at compile time.
template <int N> struct log2_of { static const int value = 1 + log2_of<N / 2>::value; };
template <> struct log2_of<1> { static const int value = 0; };

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

// Asks L1 to fetch the line holding p ahead of its load (prefetch.global.L1): it takes no
// register until the load, so a lane with one load in flight can start the next. The
// simulator has nothing to fetch.
__device__ __forceinline__ void prefetch_l1(const void *p)
{
#ifndef TOCHA_SIM
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#else
    (void)p;
#endif
}

// Loads the BYTES (a multiple of 4, at most 16) bytes at p, which need only be aligned to
// their elements, into the first words of w: the 4-byte words that cover them, each shifted
// into place by a funnel shift (16 bytes at an 8-byte boundary: two 8-byte loads, +1.3 points
// on the forward f32 2x1 W=1023, +0.4 on f16 2x1 W=1020, nothing worse;
// results/2026-11-30-h200-ab-k4-ld8). The word past the span is read only when p is not
// word-aligned; it may reach up to 3 bytes past the span, so a caller first asks
// span_fits() whether those words lie inside the allocation.
template <int BYTES, bool FETCH_256 = false> __device__ __forceinline__ void load_span(const void *p, unsigned w[4])
{
#ifdef TOCHA_SIM
    memcpy(w, p, BYTES);
#else
    const int N = BYTES / 4;
    const unsigned long long a = (unsigned long long)p;
    if (BYTES == 16 && (a & 7u) == 0) {
        load_words<8, FETCH_256>(p, w);
        load_words<8, FETCH_256>((const char *)p + 8, w + 2);
        return;
    }
    const unsigned r = (unsigned)(a & 3u);
    const unsigned *q = (const unsigned *)(a - r);
    unsigned raw[N + 1];
#pragma unroll
    for (int i = 0; i <= N; ++i) {
        raw[i] = 0u;
        if (i < N || r) load_words<4, FETCH_256>(q + i, &raw[i]);
    }
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = __funnelshift_r(raw[i], raw[i + 1], 8 * r);
#endif
}

// The TMA's bulk copies from shared to global memory, for kernels that build a block of
// output once in shared memory and store it to several places: sm_90 and later, and the
// simulator. There a warp's work that uses them runs on its lane 0 alone (the lanes of a
// block run one after another, so no lane could wait for another): the shared memory is one
// buffer per host thread, a copy is a memcpy, and the fences and waits have nothing to do.
#if defined(TOCHA_SIM) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
#define TOCHA_BULK_COPIES 1
// The lanes that share a warp's work around bulk copies: 32, or lane 0 alone on the simulator.
#ifdef TOCHA_SIM
#define TOCHA_BULK_LANES 1
#else
#define TOCHA_BULK_LANES 32
#endif

// Bytes of dynamic shared memory this launch gave each CTA.
__device__ __forceinline__ unsigned dynamic_shared_bytes()
{
#ifdef TOCHA_SIM
    return tocha_sim::dynamic_shared;
#else
    unsigned n;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
    return n;
#endif
}

// The upsample kernels' work loop: calls body(row, seg, last_row) for each of the calling
// warp's work items among rows * segs (segment seg of row `row`; last_row: the row is the last),
// in a grid-stride loop over the items with WARPS warps per CTA. With segs 1 an item is a row.
template <int WARPS, typename Body>
__device__ __forceinline__ void for_each_item(long long rows, int segs, Body body)
{
    const long long items = rows * segs, stride = (long long)gridDim.x * WARPS;
    for (long long item = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5); item < items; item += stride) {
        const long long row = item / segs;
        body(row, (int)(item - row * segs), item >= items - segs);
    }
}

// The calling warp's share of the launch's dynamic shared memory: `slots` 16-byte slots,
// 128-byte aligned when slots is a multiple of 8.
__device__ __forceinline__ uint4 *warp_shared_slots(int slots)
{
#ifdef TOCHA_SIM
    return (uint4 *)tocha_sim::shared_buffer((size_t)slots * 16u);
#else
    extern __shared__ __align__(128) uint4 tocha_dynamic_shared[];
    return tocha_dynamic_shared + (threadIdx.x >> 5) * slots;
#endif
}

// The warp's lanes meet here; their shared-memory stores before it are seen by all after it.
__device__ __forceinline__ void warp_sync()
{
#ifndef TOCHA_SIM
    __syncwarp();
#endif
}

// Makes this thread's ordinary stores to shared memory visible to the bulk copies issued after
// the warp's next warp_sync().
__device__ __forceinline__ void fence_shared_for_bulk()
{
#ifndef TOCHA_SIM
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Starts copying `bytes` (a multiple of 16) from shared src to global dst, both 16-byte
// aligned, in the calling thread's current bulk group.
__device__ __forceinline__ void bulk_store(void *dst, const void *src, unsigned bytes)
{
#ifdef TOCHA_SIM
    memcpy(dst, src, bytes);
#else
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                 "r"((unsigned)__cvta_generic_to_shared(src)), "r"(bytes)
                 : "memory");
#endif
}

// Closes the calling thread's current bulk group.
__device__ __forceinline__ void bulk_commit()
{
#ifndef TOCHA_SIM
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

// Waits until the calling thread's bulk groups have read their shared memory (which may then
// be written again).
__device__ __forceinline__ void bulk_wait_read()
{
#ifndef TOCHA_SIM
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}

// Waits until the calling thread's bulk groups are complete.
__device__ __forceinline__ void bulk_wait_all()
{
#ifndef TOCHA_SIM
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}
#endif

// Whether the words load_span<BYTES>(p) reads end at or before `end` (their start, p rounded
// down to 4 bytes, is inside any allocation that holds p: allocations are 4-byte aligned).
// A check in the caller, which then takes its element-by-element path: a slow path inside
// load_span cost the kernels registers, and with them 5-15 points.
template <int BYTES> __device__ __forceinline__ bool span_fits(const void *p, const void *end)
{
    const unsigned long long a = (unsigned long long)p;
    return (a & ~3ull) + BYTES + ((a & 3u) ? 4u : 0u) <= (unsigned long long)end;
}

// The 16-byte slots from the 128-byte line boundary at or before p up to p.
__device__ __forceinline__ int slots_past_line(const void *p)
{
    return (int)(((unsigned long long)p & 127u) / 16u);
}

// Whether p is aligned to `bytes` (a power of two).
__device__ __forceinline__ bool aligned_to(const void *p, unsigned bytes)
{
    return ((unsigned long long)p & (bytes - 1u)) == 0;
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

// Elements from p up to its next BYTES boundary (0 when p is aligned), at most n. p must be
// aligned to sizeof(D).
template <int BYTES, typename D> __device__ __forceinline__ int head_to(const D *p, long long n)
{
    const int mis = (int)(((unsigned long long)p & (BYTES - 1u)) / sizeof(D));
    const int head = mis ? (BYTES / (int)sizeof(D)) - mis : 0;
    return head < n ? head : (int)n;
}

} // namespace tocha
