// optim.cu: one optimizer step over every parameter of a model in one launch (a multi-tensor
// kernel). `table` holds, for each of `tensors` parameters, six 64-bit integers: the parameter's
// address, its gradient's, its two state buffers' (SGD: the momentum buffer and an unused one;
// AdamW: exp_avg and exp_avg_sq), its element count and the index of its first chunk; a CTA
// takes one chunk of CHUNK elements of one parameter, found by a binary search of the first
// chunks. T is the parameters' and gradients' dtype; the states are S (f32, f64 for f64), so
// that halves keep their moments in f32.
//
// KIND 0, SGD as PyTorch's: g += weight_decay p; with momentum, buf = g on the first step, else
// momentum buf + (1 - dampening) g, and g = nesterov ? g + momentum buf : buf; p -= lr g.
// KIND 1, AdamW as PyTorch's: p -= lr weight_decay p; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= (lr / bc1) m / (sqrt(v) / bc2 + eps), with bc1 = 1 - b1^t and
// bc2 = sqrt(1 - b2^t) given by the host.

#define OPTIM_CHUNK 8192

template <typename S> __device__ __forceinline__ S optim_sqrt(S v);
template <> __device__ __forceinline__ float optim_sqrt<float>(float v) { return sqrtf(v); }
template <> __device__ __forceinline__ double optim_sqrt<double>(double v) { return sqrt(v); }

// Four neighbouring elements, aligned so that a copy is one vector access.
template <typename X> struct alignas(4 * sizeof(X)) optim_quad {
    X v[4];
};

template <typename X> __device__ __forceinline__ bool optim_aligned(const X *p)
{
    return ((unsigned long long)p % (4 * sizeof(X))) == 0;
}

// One element's update: w and the states from the gradient gr (see above for KIND's rules).
template <int KIND, typename S>
__device__ __forceinline__ void optim_update(S &w, S gr, S &s1, S &s2, double lr, double a, double b, double c,
                                             double weight_decay, double bc1, double bc2, int nesterov, int first)
{
    if (KIND == 0) {
        // a: momentum, b: dampening
        if (weight_decay != 0.0) gr += (S)weight_decay * w;
        if (a != 0.0) {
            const S buf = first ? gr : (S)a * s1 + ((S)1 - (S)b) * gr;
            s1 = buf;
            gr = nesterov ? gr + (S)a * buf : buf;
        }
        w -= (S)lr * gr;
    } else {
        // a: beta1, b: beta2, c: eps
        w -= (S)(lr * weight_decay) * w;
        const S m = (S)a * s1 + ((S)1 - (S)a) * gr;
        const S v = (S)b * s2 + ((S)1 - (S)b) * gr * gr;
        s1 = m, s2 = v;
        w -= (S)(lr / bc1) * m / (optim_sqrt(v) / (S)bc2 + (S)c);
    }
}

template <typename T, int KIND>
__device__ void tocha_optim_step(const long long *table, long long tensors, double lr, double a, double b,
                                 double c, double weight_decay, double bc1, double bc2, int nesterov, int first)
{
    typedef typename tocha::compute<T>::type S;
    // The parameter whose chunks hold this CTA's: the last one whose first chunk is <= it.
    const long long chunk = blockIdx.x;
    long long lo = 0, hi = tensors - 1;
    while (lo < hi) {
        const long long mid = (lo + hi + 1) / 2;
        if (table[mid * 6 + 5] <= chunk) lo = mid; else hi = mid - 1;
    }
    const long long *e = table + lo * 6;
    T *p = (T *)e[0];
    const T *g = (const T *)e[1];
    // SGD without momentum has no state: its state pointers stand in with the parameter's.
    const bool states = KIND == 1 || a != 0.0;
    S *s1 = (S *)e[2], *s2 = (S *)e[3];
    const long long n = e[4], start = (chunk - e[5]) * OPTIM_CHUNK;
    const long long end = start + OPTIM_CHUNK < n ? start + OPTIM_CHUNK : n;
    long long i = start;
    // Whole quads from vector loads where every pointer allows (a chunk starts on a multiple
    // of 8192 elements, so the parameter's own alignment decides).
    if (optim_aligned(p) && optim_aligned(g) && (!states || (optim_aligned(s1) && (KIND == 0 || optim_aligned(s2))))) {
        const long long quads = (end - start) / 4;
        for (long long q = threadIdx.x; q < quads; q += blockDim.x) {
            const long long at = start + 4 * q;
            optim_quad<T> pw = *(const optim_quad<T> *)(p + at);
            const optim_quad<T> gw = *(const optim_quad<T> *)(g + at);
            optim_quad<S> m1, m2;
            if (states) m1 = *(const optim_quad<S> *)(s1 + at);
            if (KIND == 1) m2 = *(const optim_quad<S> *)(s2 + at);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                S w = tocha::to_compute(pw.v[k]), x1 = states ? m1.v[k] : (S)0, x2 = KIND == 1 ? m2.v[k] : (S)0;
                optim_update<KIND>(w, (S)tocha::to_compute(gw.v[k]), x1, x2, lr, a, b, c, weight_decay, bc1, bc2, nesterov,
                                   first);
                pw.v[k] = tocha::from_compute<T>(w);
                if (states) m1.v[k] = x1;
                if (KIND == 1) m2.v[k] = x2;
            }
            *(optim_quad<T> *)(p + at) = pw;
            if (states) *(optim_quad<S> *)(s1 + at) = m1;
            if (KIND == 1) *(optim_quad<S> *)(s2 + at) = m2;
        }
        i = start + quads * 4;
    }
    for (i += threadIdx.x; i < end; i += blockDim.x) {
        S w = tocha::to_compute(p[i]), x1 = states ? s1[i] : (S)0, x2 = KIND == 1 ? s2[i] : (S)0;
        optim_update<KIND>(w, (S)tocha::to_compute(g[i]), x1, x2, lr, a, b, c, weight_decay, bc1, bc2, nesterov, first);
        p[i] = tocha::from_compute<T>(w);
        if (states) s1[i] = x1;
        if (KIND == 1) s2[i] = x2;
    }
}
