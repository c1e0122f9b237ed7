// arg_reduce.cu: the index (1-based, i64) of the largest (MIN 0) or smallest (MIN 1) element of
// x viewed as [outer, n, inner] along n, for each of the outer x inner outputs. The first of
// equal elements wins; a NaN beats every number (the first NaN wins), as PyTorch's argmax and
// argmin. Every float dtype (compared in the compute type) and every integer one.
//
// Mappings, chosen by the host from the shape: rows 0, a thread an output walking n with stride
// inner (inner > 1: neighbouring threads read neighbouring elements); rows 32, a warp a row
// (inner == 1, shorter rows); rows -1, a CTA a row (inner == 1, long rows), lanes striding the
// row and the lanes' winners combined through shuffles and shared memory.

template <typename T> struct arg_value { typedef typename tocha::compute<T>::type type; };
template <> struct arg_value<unsigned char> { typedef long long type; };
template <> struct arg_value<int> { typedef long long type; };
template <> struct arg_value<long long> { typedef long long type; };

template <typename V> __device__ __forceinline__ V arg_load(V v) { return v; }
__device__ __forceinline__ float arg_load(__half v) { return __half2float(v); }
__device__ __forceinline__ float arg_load(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ long long arg_load(unsigned char v) { return v; }
__device__ __forceinline__ long long arg_load(int v) { return v; }

// Whether (v, i) beats (w, j): NaN first, then the larger (smaller for MIN), then the lower index.
template <int MIN, typename V> __device__ __forceinline__ bool arg_better(V v, long long i, V w, long long j)
{
    const bool vn = v != v, wn = w != w;
    if (vn || wn) return vn && (!wn || i < j);
    if (v == w) return i < j;
    return MIN ? v < w : v > w;
}

template <typename T, int MIN>
__device__ void tocha_arg_reduce(const T *x, long long *y, long long outer, long long n, long long inner, int rows)
{
    typedef typename arg_value<T>::type V;
    if (rows == 0) {
        const long long stride = (long long)blockDim.x * gridDim.x;
        for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < outer * inner; t += stride) {
            const long long o = t / inner, k = t - o * inner;
            const T *p = x + o * n * inner + k;
            V best = arg_load(p[0]);
            long long at = 0;
            for (long long j = 1; j < n; ++j) {
                const V v = arg_load(p[j * inner]);
                if (arg_better<MIN>(v, j, best, at)) best = v, at = j;
            }
            y[t] = at + 1;
        }
        return;
    }
    const unsigned lane = threadIdx.x % 32;
    const bool cta = rows < 0;
    const unsigned team = cta ? blockDim.x : 32u, member = cta ? threadIdx.x : lane;
    const long long row = cta ? (long long)blockIdx.x : (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const bool live = row < outer;
    if (cta && !live) return;
    // Each member's first element, then the rest of its stride (a member past n keeps a loser).
    V best = (V)0;
    long long at = n;
    if (live) {
        const T *p = x + row * n;
        for (long long j = member; j < n; j += team) {
            const V v = arg_load(p[j]);
            if (at == n || arg_better<MIN>(v, j, best, at)) best = v, at = j;
        }
    }
    // A member without an element holds index n: it loses to any real one.
    if (at == n) best = (V)0;
    for (int o = 16; o > 0; o /= 2) {
        const V w = __shfl_down_sync(0xffffffffu, best, o);
        const long long j = __shfl_down_sync(0xffffffffu, at, o);
        if (j < n && (at == n || arg_better<MIN>(w, j, best, at))) best = w, at = j;
    }
    if (!cta) {
        if (lane == 0 && live) y[row] = at + 1;
        return;
    }
    __shared__ V vals[32];
    __shared__ long long idx[32];
    if (lane == 0) vals[threadIdx.x / 32] = best, idx[threadIdx.x / 32] = at;
    __syncthreads();
    if (threadIdx.x < 32) {
        const unsigned warps = blockDim.x / 32;
        best = lane < warps ? vals[lane] : (V)0;
        at = lane < warps ? idx[lane] : n;
        for (int o = 16; o > 0; o /= 2) {
            const V w = __shfl_down_sync(0xffffffffu, best, o);
            const long long j = __shfl_down_sync(0xffffffffu, at, o);
            if (j < n && (at == n || arg_better<MIN>(w, j, best, at))) best = w, at = j;
        }
        if (lane == 0) y[row] = at + 1;
    }
}
