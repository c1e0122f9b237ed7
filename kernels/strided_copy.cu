// strided_copy.cu: dst = src element by element for tensors of one shape laid out with strides
// of their own (a view and a dense tensor, or two views): element e of the shape, in row-major
// order, is found in each from its indices, one thread an element. The host gives at most 8
// dimensions, sizes d0..d7 (1 past ndim), src strides s0..s7 and dst strides t0..t7, in
// elements, after merging the dimensions that are dense in both.

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
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        long long rest = e, from = 0, to = 0;
        for (int k = ndim - 1; k > 0; --k) {
            const long long q = rest / d[k], i = rest - q * d[k];
            from += i * s[k];
            to += i * t[k];
            rest = q;
        }
        from += rest * s[0];
        to += rest * t[0];
        dst[to] = src[from];
    }
}
