// dropout.cu: y = x * keep / (1 - p) with keep drawn afresh for each forward, and its
// gradient dx = dy * keep / (1 - p) from the same draw; in inference (training 0) y = x and
// dx = dy. keep for element i is u >= p, u a uniform value in [0, 1) from 53 bits of a hash of
// (seed, step, i) (splitmix64 twice), so a draw depends on those alone: the same on every
// device and grid. `step` is a counter on the device: the forward's phase 0 draws with it, its
// phase 1 (one thread) adds 1; the backward draws with step - 1, the last forward's.

__device__ __forceinline__ unsigned long long dropout_mix(unsigned long long z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__device__ __forceinline__ bool dropout_keep(unsigned long long seed, long long step, long long i, double p)
{
    const unsigned long long h = dropout_mix(dropout_mix(seed ^ dropout_mix((unsigned long long)step)) + (unsigned long long)i);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0) >= p;
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
    const long long s = *step, stride = (long long)blockDim.x * gridDim.x;
    const A scale = p < 1.0 ? (A)(1.0 / (1.0 - p)) : (A)0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (!training) {
            y[i] = x[i];
            continue;
        }
        const bool keep = dropout_keep((unsigned long long)seed, s, i, p);
        y[i] = tocha::from_compute<T>(keep ? tocha::to_compute(x[i]) * scale : (A)0);
    }
}

template <typename T>
__device__ void tocha_dropout_backward(const T *dy, T *dx, const long long *step, long long n, double p, long long seed,
                                       int training)
{
    typedef typename tocha::compute<T>::type A;
    const long long s = *step - 1, stride = (long long)blockDim.x * gridDim.x;
    const A scale = p < 1.0 ? (A)(1.0 / (1.0 - p)) : (A)0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (!training) {
            dx[i] = dy[i];
            continue;
        }
        const bool keep = dropout_keep((unsigned long long)seed, s, i, p);
        dx[i] = tocha::from_compute<T>(keep ? tocha::to_compute(dy[i]) * scale : (A)0);
    }
}
