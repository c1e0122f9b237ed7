// index.cu: elements picked along one dimension by integer indices: index_select (whole slices
// by a list of indices; flip and roll are index_selects of reversed and rotated positions) and
// gather (an index an element). Tensors are seen as (outer, n, inner) around the dimension, all
// dense and row-major.
//
// Indices are 1-based (Lua's, and tocha's argmax's) with `base` 1, or 0-based with base 0; an
// index outside 1..n (0..n-1) writes NaN (0 for integer dtypes) and records its position + 1
// in `bad` (one of them where several are bad), so that the caller raises naming it instead of
// reading past x.

template <typename T>
__device__ __forceinline__ T index_poison()
{
    return tocha::is_integer<T>::value ? (T)0 : tocha::from_double<T>(__longlong_as_double(0x7ff8000000000000ll));
}

// The coordinates of an element come from divisions by inner and m, in Z: 32-bit (unsigned)
// where every index of x and y fits below 2^31, a quarter of a 64-bit division's instructions.

// y[o, j, i] = x[o, idx[at] - base, i] for o < outer, j < m, i < inner, where at is j (index_select:
// a list of indices, one a slice) or the element's own position (GATHER: idx shaped as y). A
// thread four elements of y a step, e, e + stride, ... (grid-stride loop), their loads issued
// before any store, so that enough reads are in flight to cover the memory's latency (one at a
// time reaches half the bandwidth on an H100). A bad index records at + 1.
template <bool GATHER, typename Z, typename T, typename I>
__device__ __forceinline__ void index_pick(const T *x, const I *idx, T *y, Z outer, Z n, Z inner, Z m, long long base,
                                           long long *bad)
{
    const Z total = outer * m * inner;
    const Z stride = (Z)blockDim.x * gridDim.x;
    for (Z first = (Z)blockIdx.x * blockDim.x + threadIdx.x; first < total;) {
        T v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const Z e = first + u * stride;
            if (e >= total) break;
            const Z oj = inner == 1 ? e : e / inner;
            const Z i = e - oj * inner;
            const Z o = oj / m;
            const Z at = GATHER ? e : oj - o * m;
            const long long r = (long long)idx[at] - base;
            if (r < 0 || r >= (long long)n) {
                atomicCAS((unsigned long long *)bad, 0ull, (unsigned long long)(at + 1));
                v[u] = index_poison<T>();
            } else {
                v[u] = x[(o * n + (Z)r) * inner + i];
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (first + u * stride < total) y[first + u * stride] = v[u];
        if (total - first <= 4 * stride) break;
        first += 4 * stride;
    }
}

// Both kernels in 32-bit steps where every index fits below 2^31 and four strides past any of
// them below 2^32 (the host launches a thread for every four elements), else 64-bit.
template <bool GATHER, typename T, typename I>
__device__ __forceinline__ void index_entry(const T *x, const I *idx, T *y, long long outer, long long n,
                                            long long inner, long long m, long long base, long long *bad)
{
    const long long largest = outer * (n > m ? n : m) * inner;
    if (largest < 2147483648ll && largest + 4ll * blockDim.x * gridDim.x < 4294967296ll)
        index_pick<GATHER, unsigned>(x, idx, y, (unsigned)outer, (unsigned)n, (unsigned)inner, (unsigned)m, base, bad);
    else
        index_pick<GATHER, long long>(x, idx, y, outer, n, inner, m, base, bad);
}

template <typename T, typename I>
__device__ void tocha_index_select(const T *x, const I *idx, T *y, long long outer, long long n,
                                   long long inner, long long m, long long base, long long *bad)
{
    index_entry<false>(x, idx, y, outer, n, inner, m, base, bad);
}

template <typename T, typename I>
__device__ void tocha_gather(const T *x, const I *idx, T *y, long long outer, long long n,
                             long long inner, long long m, long long base, long long *bad)
{
    index_entry<true>(x, idx, y, outer, n, inner, m, base, bad);
}
