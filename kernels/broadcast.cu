// broadcast.cu: y = g(a, b) over operands that broadcast (a residual add, a squeeze-and-
// excitation scale x * s[N, C, 1, 1]), and the gradients, each reduced over the dimensions its
// operand was repeated along. Compiled after elementwise.cu, whose binary function structs
// (ew_fn_add, ..., with value and grad) are the template argument F; T the dtype (halves
// compute in f32).
//
// The host gives the output's sizes d0..d7 (ndim of them) and each operand's sizes aligned to
// them (sa, sb: 1 along a dimension the operand repeats, or lacks); every tensor is dense.
// Forward: a thread an output element. Backward, two launches of one kernel: phase 0 writes
// da, phase 1 db, a thread an element of that operand summing g's partial over the output
// elements that read it (in the order of those elements, so the sum is the same on every
// device).

// The dense offset of indices idx[0..ndim) in sizes s (a size-1 dimension reads index 0).
__device__ __forceinline__ long long bc_offset(const long long *idx, const long long *s, int ndim)
{
    long long off = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k)
        if (k < ndim) off = off * s[k] + (s[k] == 1 ? 0 : idx[k]);
    return off;
}

// Indices of flat element e of sizes s.
__device__ __forceinline__ void bc_indices(long long e, const long long *s, int ndim, long long *idx)
{
#pragma unroll
    for (int k = 7; k >= 0; --k) {
        if (k < ndim) {
            idx[k] = e % s[k];
            e /= s[k];
        }
    }
}

#define BC_SIZES(p) {p##0, p##1, p##2, p##3, p##4, p##5, p##6, p##7}

template <typename T, typename F>
__device__ void tocha_broadcast(const T *a, const T *b, T *y, int ndim, long long d0, long long d1, long long d2,
                                long long d3, long long d4, long long d5, long long d6, long long d7, long long sa0,
                                long long sa1, long long sa2, long long sa3, long long sa4, long long sa5, long long sa6,
                                long long sa7, long long sb0, long long sb1, long long sb2, long long sb3, long long sb4,
                                long long sb5, long long sb6, long long sb7)
{
    const long long d[8] = BC_SIZES(d), sa[8] = BC_SIZES(sa), sb[8] = BC_SIZES(sb);
    long long n = 1;
#pragma unroll
    for (int k = 0; k < 8; ++k)
        if (k < ndim) n *= d[k];
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        long long idx[8];
        bc_indices(e, d, ndim, idx);
        y[e] = tocha::from_compute<T>(F::value(tocha::to_compute(a[bc_offset(idx, sa, ndim)]),
                                               tocha::to_compute(b[bc_offset(idx, sb, ndim)])));
    }
}

template <typename T, typename F>
__device__ void tocha_broadcast_backward(const T *a, const T *b, const T *dy, T *da, T *db, int ndim, long long d0,
                                         long long d1, long long d2, long long d3, long long d4, long long d5,
                                         long long d6, long long d7, long long sa0, long long sa1, long long sa2,
                                         long long sa3, long long sa4, long long sa5, long long sa6, long long sa7,
                                         long long sb0, long long sb1, long long sb2, long long sb3, long long sb4,
                                         long long sb5, long long sb6, long long sb7, int phase)
{
    typedef typename tocha::compute<T>::type A;
    const long long d[8] = BC_SIZES(d), sa[8] = BC_SIZES(sa), sb[8] = BC_SIZES(sb);
    // The sizes of the operand this phase writes (chosen element by element, so that both
    // arrays stay in registers).
    long long own[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) own[k] = phase == 0 ? sa[k] : sb[k];
    T *out = phase == 0 ? da : db;
    long long n = 1, repeats = 1;
#pragma unroll
    for (int k = 0; k < 8; ++k)
        if (k < ndim) {
            n *= own[k];
            if (own[k] == 1) repeats *= d[k];
        }
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) {
        long long idx[8];
        bc_indices(j, own, ndim, idx);
        A sum = (A)0;
        for (long long r = 0; r < repeats; ++r) {
            // the repeated dimensions' indices from r, the last fastest
            long long rest = r;
#pragma unroll
            for (int k = 7; k >= 0; --k) {
                if (k < ndim && own[k] == 1) {
                    idx[k] = rest % d[k];
                    rest /= d[k];
                }
            }
            long long e = 0;
#pragma unroll
            for (int k = 0; k < 8; ++k)
                if (k < ndim) e = e * d[k] + idx[k];
            A ga, gb;
            F::grad(tocha::to_compute(a[bc_offset(idx, sa, ndim)]), tocha::to_compute(b[bc_offset(idx, sb, ndim)]),
                    tocha::to_compute(dy[e]), ga, gb);
            sum += phase == 0 ? ga : gb;
        }
        out[j] = tocha::from_compute<T>(sum);
    }
}
