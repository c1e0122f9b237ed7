// scan.cu: running sums and products along one dimension (cumsum, cumprod) of a dense tensor seen
// as (outer, n, inner) around it: inclusive, or EXCLUSIVE (each output the combination of the
// elements before it, the first the identity), from the start or REVERSE (from the end: ONNX's
// CumSum reverse, the backward of a running sum). Accumulates in A (f32 for halves and f32, f64
// for f64, 64-bit unsigned for integers: sums and products wrap as i64's do, without signed
// overflow) and rounds each output once to D.
//
// inner == 1 (the last dimension): a warp a row, 32 elements a step: each lane loads one, a
// shuffle scan of five steps, the carry of the earlier steps added, then the last lane's total
// broadcast as the next carry; reads and writes coalesced. Otherwise a thread a column (o, i),
// walking n in order: neighbouring threads read neighbouring i, so the accesses coalesce.
// Both orders are fixed: the same bits on every run. Long rows along the last dimension, too
// few to fill the device, go in chunks instead (the last section: three launches).

template <typename A, int PROD>
__device__ __forceinline__ A scan_combine(A a, A b)
{
    return PROD ? a * b : a + b;
}

template <typename T, typename D, typename A, int PROD, int EXCLUSIVE, int REVERSE>
__device__ void tocha_scan(const T *x, D *y, long long outer, long long n, long long inner)
{
    const A identity = PROD ? (A)1 : (A)0;
    if (inner == 1) {
        const int lane = threadIdx.x & 31;
        const long long warps = (long long)gridDim.x * (blockDim.x / 32);
        for (long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < outer; row += warps) {
            const T *in = x + row * n;
            D *out = y + row * n;
            A carry = identity;
            for (long long c = 0; c < n; c += 32) {
                const long long step = c + lane; // (REVERSE: counted from the row's end)
                const long long at = REVERSE ? n - 1 - step : step;
                A v = step < n ? tocha::widen<A>(in[at]) : identity;
                for (int s = 1; s < 32; s <<= 1) {
                    const A from = __shfl_up_sync(0xffffffffu, v, s);
                    if (lane >= s) v = scan_combine<A, PROD>(from, v);
                }
                A before = __shfl_up_sync(0xffffffffu, v, 1); // the lanes before this one's, for EXCLUSIVE
                if (lane == 0) before = identity;
                if (step < n) out[at] = tocha::narrow<D>(scan_combine<A, PROD>(carry, EXCLUSIVE ? before : v));
                carry = scan_combine<A, PROD>(carry, __shfl_sync(0xffffffffu, v, 31));
            }
        }
        return;
    }
    const long long columns = outer * inner;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x; col < columns; col += stride) {
        const long long o = col / inner, i = col - o * inner;
        const T *in = x + o * n * inner + i;
        D *out = y + o * n * inner + i;
        A acc = identity;
        for (long long k = 0; k < n; ++k) {
            const long long at = (REVERSE ? n - 1 - k : k) * inner;
            const A v = tocha::widen<A>(in[at]);
            if (EXCLUSIVE) {
                out[at] = tocha::narrow<D>(acc);
                acc = scan_combine<A, PROD>(acc, v);
            } else {
                acc = scan_combine<A, PROD>(acc, v);
                out[at] = tocha::narrow<D>(acc);
            }
        }
    }
}

// ---- long rows: a row in chunks, three launches ----
//
// Rows along the last dimension too few for a warp each to fill the device and longer than a
// chunk go in chunks of SCAN_CHUNK steps (counted from the end where REVERSE), a CTA of
// SCAN_THREADS a (row, chunk): tocha_scan_totals writes each chunk's combination, an exclusive
// scan of those totals gives each chunk's carry (tocha_scan_chunks without carries, a CTA a row,
// where a row has at most SCAN_CHUNK chunks; else tocha_scan), and tocha_scan_chunks runs each
// chunk from its carry. Every combination is in a fixed order (the chunks are the shape's alone), so
// the bits are the same on every run.

#define SCAN_THREADS 256
#define SCAN_ITEMS 16
#define SCAN_CHUNK (SCAN_THREADS * SCAN_ITEMS)

// Where logical step s of a row of n is.
template <int REVERSE> __device__ __forceinline__ long long scan_at(long long n, long long s)
{
    return REVERSE ? n - 1 - s : s;
}

// The combination of the v of the CTA's threads before this one, in thread order; *all gets
// every thread's. Ends with a barrier.
template <typename A, int PROD> __device__ __forceinline__ A scan_cta_exclusive(A v, A *all)
{
    const A identity = PROD ? (A)1 : (A)0;
    __shared__ A warp_total[32];
    const int lane = (int)(threadIdx.x & 31), w = (int)(threadIdx.x >> 5), warps = (int)(blockDim.x >> 5);
    A inclusive = v;
    for (int s = 1; s < 32; s <<= 1) {
        const A from = __shfl_up_sync(0xffffffffu, inclusive, s);
        if (lane >= s) inclusive = scan_combine<A, PROD>(from, inclusive);
    }
    A lane_before = __shfl_up_sync(0xffffffffu, inclusive, 1);
    if (lane == 0) lane_before = identity;
    if (lane == 31) warp_total[w] = inclusive;
    __syncthreads();
    A warps_before = identity, total = identity;
    for (int q = 0; q < warps; q++) {
        if (q == w) warps_before = total;
        total = scan_combine<A, PROD>(total, warp_total[q]);
    }
    *all = total;
    __syncthreads(); // warp_total is read before a later call writes it
    return scan_combine<A, PROD>(warps_before, lane_before);
}

// First launch: the combination of chunk c of row r (blockIdx.x = r * chunks + c) into
// totals[blockIdx.x] (A), read SCAN_THREADS steps apart so that the loads coalesce.
template <typename T, typename A, int PROD, int REVERSE>
__device__ void tocha_scan_totals(const T *x, unsigned char *totals_bytes, long long n, long long chunks)
{
    const A identity = PROD ? (A)1 : (A)0;
    if (blockDim.x != SCAN_THREADS) __trap();
    const long long row = blockIdx.x / chunks, base = (blockIdx.x - row * chunks) * SCAN_CHUNK;
    const T *in = x + row * n;
    A v = identity;
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS; j++) {
        const long long s = base + j * SCAN_THREADS + threadIdx.x;
        if (s < n) v = scan_combine<A, PROD>(v, tocha::widen<A>(in[scan_at<REVERSE>(n, s)]));
    }
    A all;
    scan_cta_exclusive<A, PROD>(v, &all);
    if (threadIdx.x == 0) ((A *)totals_bytes)[blockIdx.x] = all;
}

// A chunk's item i of A in shared memory, skewed an item each 32 (each 16 for 8-byte A) so that
// the threads' runs of SCAN_ITEMS fall in distinct banks across a warp (a half-warp for 8-byte A,
// whose accesses go a half-warp at a time).
template <typename A> __device__ __forceinline__ int scan_slot(int i) { return i + (i >> (sizeof(A) == 8 ? 4 : 5)); }

// Third launch: chunk c of row r run from its carry (carries[blockIdx.x], A): the chunk staged in
// shared memory through coalesced loads, each thread's SCAN_ITEMS consecutive steps combined in
// order after the carry and the threads' before it, written back through shared memory. Without
// CARRIED every chunk starts from the identity and carries_bytes is not read (the second launch:
// a row of totals, one chunk, its carries).
template <typename T, typename D, typename A, int PROD, int EXCLUSIVE, int REVERSE, int CARRIED>
__device__ void tocha_scan_chunks(const T *x, D *y, const unsigned char *carries_bytes, long long n, long long chunks)
{
    const A identity = PROD ? (A)1 : (A)0;
    __shared__ A items[SCAN_CHUNK + SCAN_CHUNK / 16];
    if (blockDim.x != SCAN_THREADS) __trap();
    const long long row = blockIdx.x / chunks, base = (blockIdx.x - row * chunks) * SCAN_CHUNK;
    const T *in = x + row * n;
    D *out = y + row * n;
    const int t = (int)threadIdx.x;
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS; j++) {
        const long long s = base + j * SCAN_THREADS + t;
        items[scan_slot<A>(j * SCAN_THREADS + t)] = s < n ? tocha::widen<A>(in[scan_at<REVERSE>(n, s)]) : identity;
    }
    __syncthreads();
    A v[SCAN_ITEMS], mine = identity;
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS; j++) {
        v[j] = items[scan_slot<A>(t * SCAN_ITEMS + j)];
        mine = scan_combine<A, PROD>(mine, v[j]);
    }
    A all;
    const A threads_before = scan_cta_exclusive<A, PROD>(mine, &all); // its barrier: every item read
    A run = CARRIED ? scan_combine<A, PROD>(((const A *)carries_bytes)[blockIdx.x], threads_before) : threads_before;
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS; j++) {
        const A next = scan_combine<A, PROD>(run, v[j]);
        items[scan_slot<A>(t * SCAN_ITEMS + j)] = EXCLUSIVE ? run : next;
        run = next;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS; j++) {
        const long long s = base + j * SCAN_THREADS + t;
        if (s < n) out[scan_at<REVERSE>(n, s)] = tocha::narrow<D>(items[scan_slot<A>(j * SCAN_THREADS + t)]);
    }
}
