// dropout.cu: y = x * keep / (1 - p) with keep drawn afresh for each forward, and its
// gradient dx = dy * keep / (1 - p) from the same draw; in inference (training 0) y = x and
// dx = dy.
//
// The draw: base = splitmix64(seed ^ splitmix64(step)); elements 2j and 2j + 1 share
// h = splitmix64(base + j), element 2j taking h's low 32 bits as its u, 2j + 1 its high 32.
// An element is kept when u >= ceil(p * 2^32), that is exactly when the uniform u / 2^32 in
// [0, 1) is at least p: p's resolution is 2^-32 (the dropped fraction is ceil(p * 2^32) / 2^32),
// p = 0 keeps every element and a p above 1 - 2^-32 (p = 1 included) none. So the mask depends
// on (seed, step, element index) alone: the same on every device, grid and dtype. `step` is a
// counter on the device: the forward's phase 0 draws with it, its phase 1 (one thread) adds 1;
// the backward draws with step - 1, the last forward's.
//
// Work: a thread takes DROPOUT_VECTORS 16-byte vectors of the flat tensor (V elements each, V
// even, so a vector holds whole pairs; all loads issued before any is used), neighbouring
// threads neighbouring vectors, and strides over the grid; the elements past the last whole
// vector, or every element where x or y is not 16-byte aligned, one by one. The hash of
// (seed, step), the threshold and the scale are worked out once a thread (uniform across the
// warp); each pair of elements then costs one splitmix64 round (two 64-bit multiplies) and
// two 32-bit comparisons, half the hashing of a round an element.

#define DROPOUT_VECTORS 4

__device__ __forceinline__ unsigned long long dropout_mix(unsigned long long z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// What a thread needs to draw: the hash of (seed, step), the 32-bit threshold, whether any
// element is kept (false where ceil(p * 2^32) = 2^32, which 32 bits cannot hold) and the scale.
template <typename A> struct dropout_draw {
    unsigned long long base;
    unsigned threshold;
    bool live;
    A scale;
    __device__ __forceinline__ dropout_draw(unsigned long long seed, long long step, double p)
    {
        base = dropout_mix(seed ^ dropout_mix((unsigned long long)step));
        // p * 2^32 is exact; a p within 2^-32 of 1 rounds up to 2^32: no element is kept
        const double t = ceil(p * 4294967296.0);
        live = t < 4294967296.0;
        threshold = live ? (unsigned)t : 0u;
        scale = p < 1.0 ? (A)(1.0 / (1.0 - p)) : (A)0;
    }
    // The keep of elements 2j (first) and 2j + 1 (second).
    __device__ __forceinline__ void keep_pair(long long j, bool &first, bool &second) const
    {
        const unsigned long long h = dropout_mix(base + (unsigned long long)j);
        first = live && (unsigned)h >= threshold;
        second = live && (unsigned)(h >> 32) >= threshold;
    }
    __device__ __forceinline__ bool keep(long long i) const
    {
        const unsigned long long h = dropout_mix(base + (unsigned long long)(i >> 1));
        return live && (unsigned)((i & 1) ? h >> 32 : h) >= threshold;
    }
};

// dst = src * keep / (1 - p) over n elements (training), or dst = src.
template <typename T>
__device__ __forceinline__ void dropout_apply(const T *src, T *dst, long long n, const dropout_draw<typename tocha::compute<T>::type> &d,
                                              bool training)
{
    typedef typename tocha::compute<T>::type A;
    const int V = tocha::vec16<T>::n, U = DROPOUT_VECTORS;
    const long long vectors = ((((unsigned long long)src | (unsigned long long)dst) & 15u) == 0) ? n / V : 0;
    const long long span = (long long)blockDim.x * U;
    for (long long base = blockIdx.x * span + threadIdx.x; base < vectors; base += gridDim.x * span) {
        unsigned w[U][4];
#pragma unroll
        for (int j = 0; j < U; ++j)
            if (base + j * (long long)blockDim.x < vectors) tocha::load_words<16>(src + (base + j * (long long)blockDim.x) * V, w[j]);
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const long long v = base + j * (long long)blockDim.x;
            if (v >= vectors) break;
            tocha::pack16<T> r;
            if (!training) {
                r.w[0] = w[j][0], r.w[1] = w[j][1], r.w[2] = w[j][2], r.w[3] = w[j][3];
            } else {
#pragma unroll
                for (int e = 0; e < V; e += 2) {
                    bool k0, k1;
                    d.keep_pair(v * (V / 2) + e / 2, k0, k1);
                    const A x0 = tocha::to_compute(tocha::element_of<T>(w[j], e));
                    const A x1 = tocha::to_compute(tocha::element_of<T>(w[j], e + 1));
                    r.set(e, tocha::from_compute<T>(k0 ? x0 * d.scale : (A)0));
                    r.set(e + 1, tocha::from_compute<T>(k1 ? x1 * d.scale : (A)0));
                }
            }
            tocha::store_pack(dst + v * V, r);
        }
    }
    for (long long i = vectors * V + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x)
        dst[i] = !training ? src[i] : tocha::from_compute<T>(d.keep(i) ? tocha::to_compute(src[i]) * d.scale : (A)0);
}

template <typename T>
__device__ void tocha_dropout(const T *x, T *y, long long *step, long long n, double p, long long seed, int training,
                              int phase)
{
    typedef typename tocha::compute<T>::type A;
    if (phase == 1) {
        if (training && blockIdx.x == 0 && threadIdx.x == 0) step[0] += 1;
        return;
    }
    const dropout_draw<A> d((unsigned long long)seed, *step, p);
    dropout_apply(x, y, n, d, training != 0);
}

template <typename T>
__device__ void tocha_dropout_backward(const T *dy, T *dx, const long long *step, long long n, double p, long long seed,
                                       int training)
{
    typedef typename tocha::compute<T>::type A;
    const dropout_draw<A> d((unsigned long long)seed, *step - 1, p);
    dropout_apply(dy, dx, n, d, training != 0);
}
