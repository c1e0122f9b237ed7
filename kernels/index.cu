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

// y[o, j, i] = x[o, idx[j] - base, i] for o < outer, j < m, i < inner; a thread an element of y,
// its coordinates from one 64-bit division pair a thread and step (grid-stride loop).
template <typename T, typename I>
__device__ void tocha_index_select(const T *x, const I *idx, T *y, long long outer, long long n,
                                   long long inner, long long m, long long base, long long *bad)
{
    const long long total = outer * m * inner;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long i = e % inner;
        const long long oj = e / inner;
        const long long j = oj % m;
        const long long o = oj / m;
        const long long r = (long long)idx[j] - base;
        if (r < 0 || r >= n) {
            atomicCAS((unsigned long long *)bad, 0ull, (unsigned long long)(j + 1));
            y[e] = index_poison<T>();
        } else {
            y[e] = x[(o * n + r) * inner + i];
        }
    }
}

// y[o, j, i] = x[o, idx[o, j, i] - base, i] for o < outer, j < m, i < inner (idx shaped as y).
template <typename T, typename I>
__device__ void tocha_gather(const T *x, const I *idx, T *y, long long outer, long long n,
                             long long inner, long long m, long long base, long long *bad)
{
    const long long total = outer * m * inner;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long i = e % inner;
        const long long o = e / inner / m;
        const long long r = (long long)idx[e] - base;
        if (r < 0 || r >= n) {
            atomicCAS((unsigned long long *)bad, 0ull, (unsigned long long)(e + 1));
            y[e] = index_poison<T>();
        } else {
            y[e] = x[(o * n + r) * inner + i];
        }
    }
}
