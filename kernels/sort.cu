// sort.cu: each row of a dense (rows, n) tensor sorted, with the 1-based positions the values
// came from (sort, argsort, topk, median). Rows of dtypes up to 32 bits past a few hundred are
// radix-sorted (at the end: by one CTA, or across CTAs); the others go through a bitonic
// network over the row padded to P, the next power of two: stages k = 2, 4, ..., P, each of
// steps j = k/2, ..., 1, where positions p and p ^ j are put in order, ascending where p & k is
// 0, descending otherwise.
//
// The order is total, so the result is one permutation on every device and run: values
// ascending (descending with `desc`), NaN after every number ascending and before them
// descending (PyTorch's), -0 equal to +0, equal values by position, and the padding last.
// Each element becomes an item whose unsigned order is that order: its value's order key
// (sort_key; inverted for `desc`) above its position: a 32-bit word for 16- and 8-bit dtypes in
// rows up to 2^16 (COMPACT), a 64-bit one up to 32-bit dtypes, a key and a position for 64-bit
// dtypes. The values written are read back from x at the sorted positions, so NaN payloads and
// signed zeros come out as they went in.
//
// A CTA holds segments of S = min(P, SEG) positions, E a thread in registers (tocha_sort_block):
// steps with j < E run inside a thread, steps with E <= j < 32 E between the lanes of a warp
// (shuffles), steps with j >= 32 E through shared memory. A row longer than SEG is sorted in
// segments, its steps with j >= S run from global memory (tocha_sort_step), a launch each, and
// its items wait between launches in a work buffer.

// The order key of a value: unsigned, in the sort's ascending order of the values.
__device__ __forceinline__ unsigned sort_key(float v)
{
    unsigned b = __float_as_uint(v);
    if (v != v) b = 0x7fc00000u; // every NaN one key, above +inf
    else if (v == 0.0f) b = 0u;  // -0 as +0: equal values keep their positions' order
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ unsigned sort_key(__half v) { return sort_key(__half2float(v)); }
__device__ __forceinline__ unsigned sort_key(__nv_bfloat16 v) { return sort_key(__bfloat162float(v)); }
__device__ __forceinline__ unsigned sort_key(unsigned char v) { return v; }
__device__ __forceinline__ unsigned sort_key(int v) { return (unsigned)v ^ 0x80000000u; }
__device__ __forceinline__ unsigned long long sort_key(double v)
{
    unsigned long long b = (unsigned long long)__double_as_longlong(v);
    if (v != v) b = 0x7ff8000000000000ull;
    else if (v == 0.0) b = 0ull;
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}
__device__ __forceinline__ unsigned long long sort_key(long long v)
{
    return (unsigned long long)v ^ 0x8000000000000000ull;
}

// An item of a 64-bit dtype: its key and its position, compared in that order.
struct sort_wide {
    unsigned long long key;
    unsigned long long pos;
};

// Items of dtypes up to 32 bits are one word, key << 32 | position; 64-bit dtypes' are wide.
template <typename T> struct sort_item {
    typedef unsigned long long type;
    static __device__ __forceinline__ type make(T v, unsigned p, int desc)
    {
        unsigned key = sort_key(v);
        return ((unsigned long long)(desc ? ~key : key) << 32) | p;
    }
    static __device__ __forceinline__ type padding(unsigned p) { return 0xffffffff00000000ull | p; }
};
template <typename T> struct sort_wide_item {
    typedef sort_wide type;
    static __device__ __forceinline__ type make(T v, unsigned p, int desc)
    {
        unsigned long long key = sort_key(v);
        sort_wide w;
        w.key = desc ? ~key : key;
        w.pos = p;
        return w;
    }
    static __device__ __forceinline__ type padding(unsigned p)
    {
        sort_wide w;
        w.key = ~0ull;
        w.pos = p;
        return w;
    }
};
template <> struct sort_item<double> : sort_wide_item<double> {};
template <> struct sort_item<long long> : sort_wide_item<long long> {};

// The 16-bit order key of a 16-bit float's bits b (sign, then the magnitude from nan_from up NaN).
__device__ __forceinline__ unsigned sort_key16(unsigned b, unsigned nan_from, unsigned nan)
{
    if ((b & 0x7fffu) > nan_from) b = nan;
    else if ((b & 0x7fffu) == 0u) b = 0u;
    return (b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u);
}
__device__ __forceinline__ unsigned sort_key16(__half v) { return sort_key16(__half_as_ushort(v), 0x7c00u, 0x7e00u); }
__device__ __forceinline__ unsigned sort_key16(__nv_bfloat16 v)
{
    return sort_key16(__bfloat16_as_ushort(v), 0x7f80u, 0x7fc0u);
}
__device__ __forceinline__ unsigned sort_key16(unsigned char v) { return v; }

// Compact items of 16-bit and 8-bit dtypes in rows of up to 2^16 (padded): key << 16 | position,
// one 32-bit word.
template <typename T> struct sort_compact_item {
    typedef unsigned type;
    static __device__ __forceinline__ type make(T v, unsigned p, int desc)
    {
        const unsigned key = sort_key16(v);
        return ((desc ? ~key : key) << 16) | p;
    }
    static __device__ __forceinline__ type padding(unsigned p) { return 0xffff0000u | p; }
};

// The items of T: compact ones where COMPACT (T of 16 bits or less, rows of 2^16 or less).
template <typename T, bool COMPACT> struct sort_item_of { typedef sort_item<T> type; };
template <typename T> struct sort_item_of<T, true> { typedef sort_compact_item<T> type; };

__device__ __forceinline__ bool sort_less(unsigned a, unsigned b) { return a < b; }
__device__ __forceinline__ bool sort_less(unsigned long long a, unsigned long long b) { return a < b; }
__device__ __forceinline__ bool sort_less(const sort_wide &a, const sort_wide &b)
{
    return a.key != b.key ? a.key < b.key : a.pos < b.pos;
}
__device__ __forceinline__ unsigned sort_pos(unsigned a) { return a & 0xffffu; }
__device__ __forceinline__ unsigned sort_pos(unsigned long long a) { return (unsigned)a; }
__device__ __forceinline__ unsigned sort_pos(const sort_wide &a) { return (unsigned)a.pos; }
__device__ __forceinline__ unsigned sort_shuffle(unsigned a, int lanes) { return __shfl_xor_sync(0xffffffffu, a, lanes); }
__device__ __forceinline__ unsigned long long sort_shuffle(unsigned long long a, int lanes)
{
    return __shfl_xor_sync(0xffffffffu, a, lanes);
}
__device__ __forceinline__ sort_wide sort_shuffle(sort_wide a, int lanes)
{
    a.key = __shfl_xor_sync(0xffffffffu, a.key, lanes);
    a.pos = __shfl_xor_sync(0xffffffffu, a.pos, lanes);
    return a;
}
// Items in the work buffer: one word each, or two (key, position) for wide ones.
__device__ __forceinline__ void sort_store(unsigned long long *w, long long i, unsigned a) { w[i] = a; }
__device__ __forceinline__ void sort_store(unsigned long long *w, long long i, unsigned long long a) { w[i] = a; }
__device__ __forceinline__ void sort_store(unsigned long long *w, long long i, const sort_wide &a)
{
    w[2 * i] = a.key;
    w[2 * i + 1] = a.pos;
}
__device__ __forceinline__ void sort_load(const unsigned long long *w, long long i, unsigned *a) { *a = (unsigned)w[i]; }
__device__ __forceinline__ void sort_load(const unsigned long long *w, long long i, unsigned long long *a) { *a = w[i]; }
__device__ __forceinline__ void sort_load(const unsigned long long *w, long long i, sort_wide *a)
{
    a->key = w[2 * i];
    a->pos = w[2 * i + 1];
}

// Puts a and b (positions p < p ^ j) in order: ascending where up.
template <typename I> __device__ __forceinline__ void sort_pair(I &a, I &b, bool up)
{
    if (up ? sort_less(b, a) : sort_less(a, b)) {
        const I c = a;
        a = b;
        b = c;
    }
}

// A shared-memory slot: one word of padding a 16 keeps a warp's blocked stores off one bank.
__device__ __forceinline__ int sort_slot(int i) { return i + (i >> 4); }

// Steps j = j_from, j_from / 2, ..., 1 of stage k on the E items v of this thread, positions
// base + e of its row (first the segment's, seg0 its first position); s: the CTA's shared
// items, this row's from s_row; tps threads a segment, t this one's place in it. Positions,
// k and j fit 32 bits (a row is at most 2^31 padded); j is a power of two.
template <typename I, int E>
__device__ __forceinline__ void sort_steps(I (&v)[E], I *s, int s_row, int tps, int t, unsigned seg0, unsigned base,
                                           unsigned k, unsigned j_from)
{
    unsigned j = j_from;
    while (j >= E) {
        if (j >= 32 * E) {
            // the partner is in another warp: through shared memory, E / 2 pairs a thread a step
            __syncthreads(); // the last read-back of s is done
#pragma unroll
            for (int e = 0; e < E; e++) s[sort_slot(s_row + t * E + e)] = v[e];
            __syncthreads();
            for (; j >= 32 * E; j >>= 1) {
#pragma unroll
                for (int i = 0; i < E / 2; i++) {
                    const unsigned h = (unsigned)(t + i * tps);
                    const unsigned q = ((h & ~(j - 1)) << 1) | (h & (j - 1)); // the h-th position with bit j clear
                    I a = s[sort_slot(s_row + (int)q)], b = s[sort_slot(s_row + (int)(q + j))];
                    sort_pair(a, b, ((seg0 + q) & k) == 0);
                    s[sort_slot(s_row + (int)q)] = a;
                    s[sort_slot(s_row + (int)(q + j))] = b;
                }
                __syncthreads();
            }
#pragma unroll
            for (int e = 0; e < E; e++) v[e] = s[sort_slot(s_row + t * E + e)];
        } else {
            // the partner is lane ^ j / E of this warp: each side keeps its own end of the pair
            const int lanes = (int)(j / E);
            const bool lower = (t & lanes) == 0;
#pragma unroll
            for (int e = 0; e < E; e++) {
                const I o = sort_shuffle(v[e], lanes);
                const bool up = ((base + e) & k) == 0;
                const bool take = lower == up ? sort_less(o, v[e]) : sort_less(v[e], o);
                if (take) v[e] = o;
            }
            j >>= 1;
        }
    }
#pragma unroll
    for (int jj = E / 2; jj > 0; jj >>= 1) {
        if ((unsigned)jj <= j) {
#pragma unroll
            for (int e = 0; e < E; e++) {
                if ((e ^ jj) > e) sort_pair(v[e], v[e ^ jj], ((base + e) & k) == 0);
            }
        }
    }
}

// CTAs of segments of S positions (S = P when P <= SEG, SEG otherwise), blockDim.x / (S / E)
// rows a CTA (blockIdx.x: row group * P / S + segment). With `first`, reads the rows from x
// and runs every stage up to S; otherwise reads the items of stage k from work and runs its
// steps from S / 2 down. Where the row's last stage (P) ends here, writes the first m sorted
// values and 1-based positions of each row to y and yi (rows, m); otherwise the items to work.
template <typename T, int E, int SEG, bool COMPACT>
__device__ void tocha_sort_block(const T *x, long long *work_words, T *y, long long *yi, long long rows,
                                 long long n, long long P, long long k, int first, int desc, long long m)
{
    typedef typename sort_item_of<T, COMPACT>::type Item;
    typedef typename Item::type I;
    __shared__ I s[SEG + SEG / 16];
    unsigned long long *work = (unsigned long long *)work_words;
    const long long S = P < SEG ? P : SEG;
    const int tps = (int)(S / E);
    const int r = (int)threadIdx.x / tps, t = (int)threadIdx.x - r * tps;
    const long long segs = P / S;
    const long long group = blockIdx.x / segs, seg = blockIdx.x - group * segs;
    const long long row = group * (blockDim.x / tps) + r;
    const bool live = row < rows;
    const unsigned seg0 = (unsigned)(seg * S), base = seg0 + (unsigned)(t * E);
    I v[E];
#pragma unroll
    for (int e = 0; e < E; e++) {
        const long long p = base + e;
        if (!live) v[e] = Item::padding((unsigned)p);
        else if (!first) sort_load(work, row * P + p, &v[e]);
        else v[e] = p < n ? Item::make(x[row * n + p], (unsigned)p, desc) : Item::padding((unsigned)p);
    }
    const int s_row = r * (int)S;
    if (first) {
        for (unsigned kk = 2; kk <= S; kk <<= 1) sort_steps<I, E>(v, s, s_row, tps, t, seg0, base, kk, kk >> 1);
    } else {
        sort_steps<I, E>(v, s, s_row, tps, t, seg0, base, (unsigned)k, (unsigned)(S >> 1));
    }
    if (!live) return;
    if ((first ? S : k) == P) {
#pragma unroll
        for (int e = 0; e < E; e++) {
            const long long p = base + e;
            if (p < m) {
                const unsigned at = sort_pos(v[e]);
                y[row * m + p] = x[row * n + at];
                yi[row * m + p] = (long long)at + 1;
            }
        }
    } else {
#pragma unroll
        for (int e = 0; e < E; e++) sort_store(work, row * P + base + e, v[e]);
    }
}

// Step j (>= S) of stage k over the items in work: a thread a pair (p, p + j) with bit j of p clear.
template <typename T, bool COMPACT>
__device__ void tocha_sort_step(long long *work_words, long long rows, long long P, long long k, long long j)
{
    typedef typename sort_item_of<T, COMPACT>::type::type I;
    unsigned long long *work = (unsigned long long *)work_words;
    const long long half = P / 2, pairs = rows * half; // P and j powers of two
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < pairs; e += stride) {
        const long long row = e >> (__ffsll(half) - 1), h = e & (half - 1);
        const long long p = ((h & ~(j - 1)) << 1) | (h & (j - 1));
        I a, b;
        sort_load(work, row * P + p, &a);
        sort_load(work, row * P + p + j, &b);
        sort_pair(a, b, (p & k) == 0);
        sort_store(work, row * P + p, a);
        sort_store(work, row * P + p + j, b);
    }
}

// A warp's view of 256 digit counts t (shared memory): lane l reads digits 8l to 8l + 7 into
// c and returns the counts of the digits below 8l (an exclusive scan across the lanes); *upto
// gets the counts up to and with 8l + 7.
__device__ __forceinline__ unsigned radix_lane_digits(const unsigned *t, unsigned (&c)[8], unsigned *upto)
{
    const int lane = (int)(threadIdx.x & 31);
    unsigned sum = 0;
#pragma unroll
    for (int q = 0; q < 8; q++) {
        c[q] = t[8 * lane + q];
        sum += c[q];
    }
    unsigned run = sum;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const unsigned o = __shfl_up_sync(0xffffffffu, run, d);
        if (lane >= d) run += o;
    }
    *upto = run;
    return run - sum;
}

// The first m items of each row in the sort's order, for rows of up to 32 ITEMS of dtypes up to
// 32 bits and m up to 32 E (topk): a warp a row, eight rows a CTA of 256 threads. A radix
// select over the row's 32-bit order keys, a byte a pass from the top, finds the m-th key; the
// items below it, and the first ones equal to it in position order, are the m; a bitonic sort of
// those in the warp (E a lane) orders them, and the warp writes their values and positions.
template <typename T, int ITEMS, int E>
__device__ void tocha_topk_warp(const T *x, T *y, long long *yi, long long rows, long long n, long long m, int desc)
{
    typedef unsigned long long I;
    __shared__ unsigned counts[8][256];
    __shared__ I picks[8][32 * E];
    const int lane = (int)(threadIdx.x & 31), w = (int)(threadIdx.x >> 5);
    const long long row = (long long)blockIdx.x * 8 + w;
    if (row >= rows) return; // a whole warp: no CTA barrier follows
    const unsigned below_lane = (1u << lane) - 1u;
    unsigned key[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const long long p = lane + 32 * i;
        const unsigned kv = p < n ? sort_key(x[row * n + p]) : 0u;
        key[i] = desc ? ~kv : kv;
    }
    unsigned prefix = 0, mask = 0, need = (unsigned)m; // need: items still to take among those under prefix
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = lane; b < 256; b += 32) counts[w][b] = 0u;
        __syncwarp();
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (lane + 32 * i < n && (key[i] & mask) == prefix) atomicAdd(&counts[w][(key[i] >> shift) & 255u], 1u);
        }
        __syncwarp();
        // this lane's eight digits, and the items under the digits of the lanes before
        unsigned c[8], upto;
        const unsigned before = radix_lane_digits(counts[w], c, &upto);
        const int owner = __ffs(__ballot_sync(0xffffffffu, before < need && need <= upto)) - 1;
        unsigned digit = 0, skipped = before;
        if (lane == owner) {
#pragma unroll
            for (int q = 0; q < 8; q++) {
                if (digit == 0 && skipped + c[q] >= need) digit = 8 * lane + q + 1; // 1-based: 0 is "not yet"
                else if (digit == 0) skipped += c[q];
            }
        }
        digit = __shfl_sync(0xffffffffu, digit, owner) - 1;
        skipped = __shfl_sync(0xffffffffu, skipped, owner);
        need -= skipped;
        prefix |= digit << shift;
        mask |= 255u << shift;
        __syncwarp(); // every lane has read counts before the next pass clears them
    }
    // prefix is the m-th key: take every key below it and the first `need` equal to it
    unsigned taken = 0, equal_seen = 0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const long long p = lane + 32 * i;
        const bool valid = p < n;
        const bool eq = valid && key[i] == prefix;
        const unsigned eqs = __ballot_sync(0xffffffffu, eq);
        const bool take = (valid && key[i] < prefix) || (eq && equal_seen + __popc(eqs & below_lane) < need);
        const unsigned takes = __ballot_sync(0xffffffffu, take);
        if (take) picks[w][taken + __popc(takes & below_lane)] = ((I)key[i] << 32) | (unsigned)p;
        taken += __popc(takes);
        equal_seen += __popc(eqs);
    }
    __syncwarp();
    I v[E];
#pragma unroll
    for (int e = 0; e < E; e++) {
        const int q = lane * E + e;
        // padding after every item: positions from n on
        v[e] = q < m ? picks[w][q] : (0xffffffff00000000ull | (unsigned)(n + q));
    }
    for (unsigned kk = 2; kk <= 32 * E; kk <<= 1) sort_steps<I, E>(v, (I *)0, 0, 32, lane, 0u, (unsigned)(lane * E), kk, kk >> 1);
#pragma unroll
    for (int e = 0; e < E; e++) {
        const long long q = (long long)lane * E + e;
        if (q < m) {
            const unsigned at = sort_pos(v[e]);
            y[row * m + q] = x[row * n + at];
            yi[row * m + q] = (long long)at + 1;
        }
    }
}

// ---- radix sorts (dtypes up to 32 bits) ----
//
// A stable LSD radix sort of the items by their order keys, a byte a pass from the lowest (one
// pass for 8-bit dtypes, two for 16-bit, four for 32-bit). A CTA's items come in row order:
// warp w holds positions w * 32 ITEMS + i * 32 + lane (i < ITEMS) of the CTA's run, so its
// items taken i by i are in the row's order, and a rank that counts the equal digits before an
// item keeps that order. Rows that fit one CTA are sorted in its shared memory
// (tocha_sort_radix); longer rows in tiles of 16 warps, a pass taking three launches
// (tocha_radix_count, tocha_radix_offsets, tocha_radix_scatter) and the items waiting in a work
// buffer between passes.

// The digit of item v at bit `at` (the key's byte above the position's bits).
__device__ __forceinline__ unsigned radix_digit(unsigned v, int at) { return (v >> at) & 255u; }
__device__ __forceinline__ unsigned radix_digit(unsigned long long v, int at) { return (unsigned)(v >> at) & 255u; }

// Ranks this CTA's items v by the digit at `at`: rank[i], the items of the warp with v[i]'s
// digit before it; counts[w * 256 + d] (16-bit, warps x 256), the CTA's items of digit d in
// the warps before w; total[d] (when given), the CTA's items of digit d. Ends with a barrier.
template <typename I, int ITEMS>
__device__ __forceinline__ void radix_rank(const I (&v)[ITEMS], int at, unsigned short *counts, unsigned (&rank)[ITEMS],
                                           unsigned *total)
{
    const int warps = (int)(blockDim.x >> 5);
    const int lane = (int)(threadIdx.x & 31), w = (int)(threadIdx.x >> 5);
    unsigned short *mine = counts + w * 256;
    const unsigned below_lane = (1u << lane) - 1u;
    for (int d = (int)threadIdx.x; d < warps * 256; d += (int)blockDim.x) counts[d] = 0;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const unsigned d = radix_digit(v[i], at);
        const unsigned peers = __match_any_sync(0xffffffffu, d);
        const int leader = 31 - __clz(peers);
        unsigned before = 0;
        if (lane == leader) {
            before = mine[d];
            mine[d] = (unsigned short)(before + __popc(peers));
        }
        rank[i] = __shfl_sync(0xffffffffu, before, leader) + __popc(peers & below_lane);
        __syncwarp(); // the leader's count is seen by the next item's leader of that digit
    }
    __syncthreads();
    for (int d = (int)threadIdx.x; d < 256; d += (int)blockDim.x) {
        unsigned run = 0;
        for (int q = 0; q < warps; q++) {
            const unsigned c = counts[q * 256 + d];
            counts[q * 256 + d] = (unsigned short)run;
            run += c;
        }
        if (total) total[d] = run;
    }
    __syncthreads();
}

// t[d] (256 entries in shared memory) replaced by the sum of t below d, by warp 0; the other
// warps pass. A barrier must follow before t is read.
__device__ __forceinline__ void radix_exclusive_scan256(unsigned *t)
{
    if (threadIdx.x >= 32) return;
    const int lane = (int)threadIdx.x;
    unsigned c[8], upto;
    unsigned run = radix_lane_digits(t, c, &upto);
#pragma unroll
    for (int q = 0; q < 8; q++) {
        t[8 * lane + q] = run;
        run += c[q];
    }
}

// A row of n <= warps * 32 ITEMS sorted by one CTA (blockIdx.x: the row; blockDim.x: 32 a warp):
// each pass ranks the items, scans the digit totals, and scatters the items into shared memory
// at their digit's start + the warps' before + the rank; the last pass's order is read from
// there. The padding (positions from n on) carries the largest key and stays after every item.
// Writes the first m values and 1-based positions to y and yi (rows, m). Dynamic shared memory:
// the items (warps * 32 ITEMS), then the counts (warps x 256, 16 bits).
template <typename T, int ITEMS, bool COMPACT>
__device__ void tocha_sort_radix(const T *x, T *y, long long *yi, long long n, int desc, long long m)
{
    typedef typename sort_item_of<T, COMPACT>::type Item;
    typedef typename Item::type I;
    const int KEY_BITS = sizeof(T) == 1 ? 8 : sizeof(T) == 2 ? 16 : 32;
    const int POS_BITS = COMPACT ? 16 : 32;
    extern __shared__ __align__(16) unsigned char radix_shared[];
    __shared__ unsigned digit_base[256];
    const int warps = (int)(blockDim.x >> 5);
    const int lane = (int)(threadIdx.x & 31), w = (int)(threadIdx.x >> 5);
    I *s = (I *)radix_shared;
    unsigned short *counts = (unsigned short *)(s + warps * 32 * ITEMS); // [warp][digit]
    const long long row = blockIdx.x;
    const int first = w * 32 * ITEMS + lane;
    I v[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int p = first + 32 * i;
        v[i] = p < n ? Item::make(x[row * n + p], (unsigned)p, desc) : Item::padding((unsigned)p);
    }
    for (int shift = 0; shift < KEY_BITS; shift += 8) {
        unsigned rank[ITEMS];
        radix_rank<I, ITEMS>(v, POS_BITS + shift, counts, rank, digit_base);
        radix_exclusive_scan256(digit_base);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            const unsigned d = radix_digit(v[i], POS_BITS + shift);
            s[digit_base[d] + counts[w * 256 + d] + rank[i]] = v[i];
        }
        __syncthreads();
        if (shift + 8 < KEY_BITS) {
#pragma unroll
            for (int i = 0; i < ITEMS; i++) v[i] = s[first + 32 * i];
        }
    }
    for (int q = (int)threadIdx.x; q < m; q += (int)blockDim.x) {
        const unsigned at = sort_pos(s[q]);
        y[row * m + q] = x[row * n + at];
        yi[row * m + q] = (long long)at + 1;
    }
}

// The order key of a value in its dtype's width (16-bit dtypes: 16 bits, u8: 8).
__device__ __forceinline__ unsigned radix_key(float v) { return sort_key(v); }
__device__ __forceinline__ unsigned radix_key(int v) { return sort_key(v); }
__device__ __forceinline__ unsigned radix_key(__half v) { return sort_key16(v); }
__device__ __forceinline__ unsigned radix_key(__nv_bfloat16 v) { return sort_key16(v); }
__device__ __forceinline__ unsigned radix_key(unsigned char v) { return v; }

// The tile's items of a row longer than a CTA, 16 warps of 8 (RADIX_TILE positions; blockIdx.x:
// row * tiles + tile): key << 32 | position from x on the first pass, from `in` (the row's items
// in the last pass's order) after; positions from n on are padding (every bit set).
#define RADIX_TILE 4096
template <typename T>
__device__ __forceinline__ void radix_tile_items(const T *x, const unsigned long long *in, long long n, long long tiles,
                                                 int first, int desc, unsigned long long (&v)[8], long long &row,
                                                 long long &tile)
{
    const unsigned mask = sizeof(T) == 4 ? 0xffffffffu : (1u << (8 * sizeof(T))) - 1u;
    row = blockIdx.x / tiles;
    tile = blockIdx.x - row * tiles;
    const long long q0 = tile * RADIX_TILE + (threadIdx.x >> 5) * 256 + (threadIdx.x & 31);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const long long q = q0 + 32 * i;
        if (q >= n) {
            v[i] = ~0ull;
        } else if (first) {
            const unsigned k = radix_key(x[row * n + q]);
            v[i] = ((unsigned long long)((desc ? ~k : k) & mask) << 32) | (unsigned long long)q;
        } else {
            v[i] = in[row * n + q];
        }
    }
}

// Pass `shift` of a long row, first launch: each tile's count of each digit, to
// counts[(row * tiles + tile) * 256 + digit]. 512 threads a CTA.
template <typename T>
__device__ void tocha_radix_count(const T *x, const long long *in_words, int *counts_words, long long n, long long tiles,
                                  int first, int desc, int shift)
{
    unsigned *counts = (unsigned *)counts_words;
    __shared__ unsigned bins[256];
    for (int d = (int)threadIdx.x; d < 256; d += (int)blockDim.x) bins[d] = 0u;
    __syncthreads();
    unsigned long long v[8];
    long long row, tile;
    radix_tile_items<T>(x, (const unsigned long long *)in_words, n, tiles, first, desc, v, row, tile);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        if (v[i] != ~0ull) atomicAdd(&bins[radix_digit(v[i], 32 + shift)], 1u);
    }
    __syncthreads();
    for (int d = (int)threadIdx.x; d < 256; d += (int)blockDim.x) counts[(row * tiles + tile) * 256 + d] = bins[d];
}

// Second launch, a CTA of 1024 threads a row: each (tile, digit) count becomes that tile's first
// place for the digit in the row: the row's items of lower digits, then the digit's items in
// the tiles before. Thread (s, d) takes digit d of slice s of the tiles (RADIX_SLICES of them):
// it sums its counts, the slices' sums are scanned per digit and the digits' totals across
// digits, and a second sweep writes the places. Each sweep reads RADIX_SWEEP tiles' counts before
// using any, so that a row of many tiles waits on a latency each RADIX_SWEEP x RADIX_SLICES tiles.
#define RADIX_SLICES 4
#define RADIX_SWEEP 32
__device__ void tocha_radix_offsets(int *counts_words, long long tiles)
{
    unsigned *counts = (unsigned *)counts_words;
    __shared__ unsigned part[RADIX_SLICES][256]; // a slice's items of each digit, then its first place
    __shared__ unsigned total[256];
    if (blockDim.x != 256 * RADIX_SLICES) __trap();
    const int d = (int)(threadIdx.x & 255), s = (int)(threadIdx.x >> 8);
    unsigned *c = counts + (long long)blockIdx.x * tiles * 256;
    const long long per = (tiles + RADIX_SLICES - 1) / RADIX_SLICES;
    const long long lo = s * per < tiles ? s * per : tiles, hi = lo + per < tiles ? lo + per : tiles;
    unsigned sum = 0;
    for (long long t = lo; t < hi; t += RADIX_SWEEP) {
        unsigned k[RADIX_SWEEP];
#pragma unroll
        for (int j = 0; j < RADIX_SWEEP; j++) k[j] = t + j < hi ? c[(t + j) * 256 + d] : 0u;
#pragma unroll
        for (int j = 0; j < RADIX_SWEEP; j++) sum += k[j];
    }
    part[s][d] = sum;
    __syncthreads();
    if (s == 0) {
        unsigned run = 0;
        for (int q = 0; q < RADIX_SLICES; q++) {
            const unsigned v = part[q][d];
            part[q][d] = run;
            run += v;
        }
        total[d] = run;
    }
    __syncthreads();
    radix_exclusive_scan256(total);
    __syncthreads();
    unsigned run = total[d] + part[s][d];
    for (long long t = lo; t < hi; t += RADIX_SWEEP) {
        unsigned k[RADIX_SWEEP];
#pragma unroll
        for (int j = 0; j < RADIX_SWEEP; j++) k[j] = t + j < hi ? c[(t + j) * 256 + d] : 0u;
#pragma unroll
        for (int j = 0; j < RADIX_SWEEP; j++) {
            if (t + j < hi) c[(t + j) * 256 + d] = run;
            run += k[j];
        }
    }
}

// Third launch: each tile ranks its items by the digit and orders them by it in shared memory
// (the tile's items of digit d from the sum of the tile's digits below d, in row order), then
// writes them out in that order, consecutive threads taking consecutive items: a digit's run of
// the tile (16 items of 8 bytes on average) lands in consecutive places, the digit's first
// place for the tile + the item's place in the run, so that stores coalesce where writing each
// item from its registers would scatter a warp's stores over as many places as its digits. To
// `out` (the row's items in this pass's order) or, on the last pass, the first m values and
// 1-based positions to y and yi. The padding past n ranks last (the largest digits, after every
// item), so the tile's first `live` ordered items are its own.
template <typename T>
__device__ void tocha_radix_scatter(const T *x, const long long *in_words, long long *out_words, const int *offset_words,
                                    T *y, long long *yi, long long n, long long tiles, int first, int last, int desc,
                                    int shift, long long m)
{
    __shared__ unsigned long long ordered[RADIX_TILE];
    __shared__ unsigned short counts[16 * 256];
    __shared__ unsigned place[256], start[256];
    if (blockDim.x != RADIX_TILE / 8) __trap();
    unsigned long long v[8];
    long long row, tile;
    radix_tile_items<T>(x, (const unsigned long long *)in_words, n, tiles, first, desc, v, row, tile);
    const unsigned *offsets = (const unsigned *)offset_words;
    for (int d = (int)threadIdx.x; d < 256; d += (int)blockDim.x) place[d] = offsets[(row * tiles + tile) * 256 + d];
    unsigned rank[8];
    radix_rank<unsigned long long, 8>(v, 32 + shift, counts, rank, start);
    radix_exclusive_scan256(start);
    __syncthreads();
    const int w = (int)(threadIdx.x >> 5);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const unsigned d = radix_digit(v[i], 32 + shift);
        ordered[start[d] + counts[w * 256 + d] + rank[i]] = v[i];
    }
    __syncthreads();
    const long long rest = n - tile * RADIX_TILE;
    const int live = rest < RADIX_TILE ? (int)rest : RADIX_TILE;
    unsigned long long *out = (unsigned long long *)out_words;
    for (int j = (int)threadIdx.x; j < live; j += (int)blockDim.x) {
        const unsigned long long item = ordered[j];
        const unsigned d = radix_digit(item, 32 + shift);
        const long long at = (long long)place[d] + (j - (int)start[d]);
        if (!last) {
            out[row * n + at] = item;
        } else if (at < m) {
            const unsigned p = (unsigned)item;
            y[row * m + at] = x[row * n + p];
            yi[row * m + at] = (long long)p + 1;
        }
    }
}
