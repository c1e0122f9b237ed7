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
// Both orders are fixed: the same bits on every run.

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
