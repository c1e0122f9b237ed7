// sort.cu: each row of a dense (rows, n) tensor sorted, with the 1-based positions the values
// came from (sort, argsort, topk, median). A bitonic network over the row padded to P, the
// next power of two: stages k = 2, 4, ..., P, each of steps j = k/2, ..., 1, where position t
// and t ^ j are put in order, ascending where t & k is 0, descending otherwise.
//
// The order is total, so the result is one permutation on every device and run: values
// ascending (descending with `desc`), NaN after every number ascending and before them
// descending (PyTorch's), equal values by position, and the padding always last. Steps with
// j < CHUNK run on a CTA's chunk of CHUNK positions in shared memory (tocha_sort_chunk:
// every stage of a row of up to CHUNK, or a later stage's last steps); steps with j >= CHUNK
// pair positions of two chunks and run from global memory (tocha_sort_step), a launch each.

// Whether (a, ia) goes before (b, ib): positions ia, ib >= n are padding.
template <typename T>
__device__ __forceinline__ bool sort_before(T a, int ia, T b, int ib, long long n, int desc)
{
    if (ib >= n) return ia < n || ia < ib;
    if (ia >= n) return false;
    if constexpr (tocha::is_integer<T>::value) { // compared as they are: i64 past 2^53 has no double of its own
        if (a != b) return desc ? b < a : a < b;
        return ia < ib;
    }
    const double x = tocha::to_double(a), y = tocha::to_double(b);
    const bool xn = x != x, yn = y != y;
    if (xn || yn) {
        if (xn && yn) return ia < ib;
        return desc ? xn : yn;
    }
    if (x != y) return desc ? x > y : x < y;
    return ia < ib;
}

// CTAs of a chunk each (blockIdx.x: row * chunks + chunk). With `first`, loads the row from x
// (positions from n to P are padding) and runs every stage up to CHUNK; otherwise loads the
// chunk from the work buffers and runs stage k's steps from CHUNK / 2 down to 1. Writes the
// chunk to the work buffers.
template <typename T, int CHUNK>
__device__ void tocha_sort_chunk(const T *x, T *keys, int *pos, long long rows, long long n, long long P,
                                 long long k, int first, int desc)
{
    __shared__ T sk[CHUNK];
    __shared__ int sp[CHUNK];
    const long long chunks = P / CHUNK;
    const long long row = blockIdx.x / chunks;
    const long long base = (blockIdx.x - row * chunks) * CHUNK; // the chunk's first position in the row
    if (row >= rows) return;
    for (int t = threadIdx.x; t < CHUNK; t += blockDim.x) {
        const long long at = base + t;
        if (first) {
            sk[t] = at < n ? x[row * n + at] : x[row * n];
            sp[t] = (int)at;
        } else {
            sk[t] = keys[row * P + at];
            sp[t] = pos[row * P + at];
        }
    }
    __syncthreads();
    const long long k_from = first ? 2 : k, k_to = first ? CHUNK : k;
    for (long long kk = k_from; kk <= k_to; kk <<= 1) {
        for (long long j = (first ? kk : CHUNK) >> 1; j > 0; j >>= 1) {
            for (int t = threadIdx.x; t < CHUNK; t += blockDim.x) {
                const int u = t ^ (int)j;
                if (u > t) {
                    const bool up = ((base + t) & kk) == 0;
                    const bool swap = up ? sort_before(sk[u], sp[u], sk[t], sp[t], n, desc)
                                         : sort_before(sk[t], sp[t], sk[u], sp[u], n, desc);
                    if (swap) {
                        const T a = sk[t];
                        sk[t] = sk[u];
                        sk[u] = a;
                        const int b = sp[t];
                        sp[t] = sp[u];
                        sp[u] = b;
                    }
                }
            }
            __syncthreads();
        }
    }
    for (int t = threadIdx.x; t < CHUNK; t += blockDim.x) {
        keys[row * P + base + t] = sk[t];
        pos[row * P + base + t] = sp[t];
    }
}

// Step j (>= CHUNK) of stage k over every row: a thread a pair (t, t ^ j) with t < t ^ j.
template <typename T>
__device__ void tocha_sort_step(T *keys, int *pos, long long rows, long long n, long long P, long long k,
                                long long j, int desc)
{
    const long long pairs = rows * (P / 2);
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < pairs; e += stride) {
        const long long row = e / (P / 2), h = e - row * (P / 2);
        // the h-th position whose bit j is clear
        const long long t = ((h / j) * 2 * j) + (h % j), u = t + j;
        T *rk = keys + row * P;
        int *rp = pos + row * P;
        const bool up = (t & k) == 0;
        const bool swap = up ? sort_before(rk[u], rp[u], rk[t], rp[t], n, desc)
                             : sort_before(rk[t], rp[t], rk[u], rp[u], n, desc);
        if (swap) {
            const T a = rk[t];
            rk[t] = rk[u];
            rk[u] = a;
            const int b = rp[t];
            rp[t] = rp[u];
            rp[u] = b;
        }
    }
}

// The first `m` sorted positions of each row into values y (rows, m) and 1-based positions
// yi (rows, m), i64.
template <typename T>
__device__ void tocha_sort_write(const T *keys, const int *pos, T *y, long long *yi, long long rows, long long P,
                                 long long m)
{
    const long long total = rows * m;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long row = e / m, c = e - row * m;
        y[e] = keys[row * P + c];
        yi[e] = (long long)pos[row * P + c] + 1;
    }
}
