// arg_reduce.cu: the index (1-based, i64) of the largest (MIN 0) or smallest (MIN 1) element of
// x viewed as [outer, n, inner] along n, for each of the outer x inner outputs. The first of
// equal elements wins; a NaN beats every number (the first NaN wins), as PyTorch's argmax and
// argmin. Every float dtype (compared in the compute type) and every integer one.
//
// Mappings, chosen by the host from the shape (tensor_reduce.lua's team_mapping): rows 0, a
// thread an output walking n with stride inner (inner > 1: neighbouring threads read
// neighbouring elements); rows 1 to 32, that many lanes of a warp a row (inner == 1, shorter
// rows); rows -1, a CTA a row (inner == 1, long rows). A team reads its row in 16-byte groups
// (tocha.cuh's row_each) and combines its lanes' winners through shuffles (and shared memory
// across a CTA's warps).

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

// A candidate: its value and index, shuffled as two numbers.
template <typename V> struct arg_pick {
    V v;
    long long at;
};
template <typename V> __device__ __forceinline__ arg_pick<V> shfl_xor(arg_pick<V> p, int o)
{
    arg_pick<V> r;
    r.v = tocha::shfl_xor(p.v, o), r.at = tocha::shfl_xor(p.at, o);
    return r;
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
    const bool cta = rows < 0;
    long long row;
    unsigned member, team;
    tocha::team_of(rows, &row, &member, &team);
    if (cta && row >= outer) return;
    const bool live = row < outer; // a team of a warp past the end stays for the shuffles
    // A member without an element holds index n: it loses to any real one.
    arg_pick<V> p;
    p.v = (V)0, p.at = n;
    if (live)
        tocha::row_each(x + row * n, n, member, team, [&](T t, long long j) {
            const V v = arg_load(t);
            if (p.at == n || arg_better<MIN>(v, j, p.v, p.at)) p.v = v, p.at = j;
        });
    p = tocha::team_combine(p, team, cta, [n](arg_pick<V> a, arg_pick<V> b) {
        return b.at < n && (a.at == n || arg_better<MIN>(b.v, b.at, a.v, a.at)) ? b : a;
    });
    if (live && member == 0) y[row] = p.at + 1;
}
