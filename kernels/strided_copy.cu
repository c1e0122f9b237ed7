// strided_copy.cu: dst = src element by element for tensors of one shape laid out with strides
// of their own (a view and a dense tensor, or two views): element e of the shape, in row-major
// order, is found in each from its indices, one thread an element. The host gives at most 8
// dimensions, sizes d0..d7 (1 past ndim), src strides s0..s7 and dst strides t0..t7, in
// elements, after merging the dimensions that are dense in both.

// The offsets in src and dst of element e (row-major over the sizes d).
__device__ __forceinline__ void strided_offsets(long long e, int ndim, const long long *d, const long long *s,
                                                const long long *t, long long *from, long long *to)
{
    long long rest = e, a = 0, b = 0;
    for (int k = ndim - 1; k > 0; --k) {
        // 32-bit division where both fit (a 64-bit one is several times longer)
        const long long q = ((unsigned long long)(rest | d[k]) >> 32) == 0 ? (long long)((unsigned)rest / (unsigned)d[k])
                                                                           : rest / d[k];
        const long long i = rest - q * d[k];
        a += i * s[k];
        b += i * t[k];
        rest = q;
    }
    *from = a + rest * s[0];
    *to = b + rest * t[0];
}

template <typename T>
__device__ void tocha_strided_copy(const T *src, T *dst, long long n, int ndim, long long d0, long long d1, long long d2,
                                   long long d3, long long d4, long long d5, long long d6, long long d7, long long s0,
                                   long long s1, long long s2, long long s3, long long s4, long long s5, long long s6,
                                   long long s7, long long t0, long long t1, long long t2, long long t3, long long t4,
                                   long long t5, long long t6, long long t7)
{
    const long long d[8] = {d0, d1, d2, d3, d4, d5, d6, d7};
    const long long s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    const long long t[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
    const long long stride = (long long)blockDim.x * gridDim.x;
    // Four elements a thread at a time, their loads issued before any store, so that a thread
    // keeps four reads in flight.
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; e + 3 * stride < n; e += 4 * stride) {
        long long from[4], to[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) strided_offsets(e + j * stride, ndim, d, s, t, &from[j], &to[j]);
        T v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = src[from[j]];
#pragma unroll
        for (int j = 0; j < 4; ++j) dst[to[j]] = v[j];
    }
    for (; e < n; e += stride) {
        long long from, to;
        strided_offsets(e, ndim, d, s, t, &from, &to);
        dst[to] = src[from];
    }
}
