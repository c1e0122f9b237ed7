// elementwise.cu: y = f(x) and y = g(a, b) element by element, and their gradients; the
// function is a compile-time constant (F, one of the structs below, baked in at construction).
// Every float dtype; f16 and bf16 are computed in f32, f64 in f64. Where every pointer is
// 16-byte aligned (tensors' blocks always are) a thread reads and writes whole 16-byte vectors;
// the elements past the last whole vector, and misaligned pointers, go one by one.
//
// Unary: neg, abs, exp, log, sqrt, and activation.cuh's relu, sigmoid, tanh, silu, gelu (that
// file comes first in the source). Binary: add, sub, mul, div, max, min. Gradients follow
// PyTorch's: abs' is sign(x) (0 at 0); max and min split the gradient in halves between equal
// operands.

__device__ __forceinline__ float ew_log(float v) { return logf(v); }
__device__ __forceinline__ double ew_log(double v) { return log(v); }
__device__ __forceinline__ float ew_sqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double ew_sqrt(double v) { return sqrt(v); }

// The functions, by name (with activation.cuh's): tocha.Elementwise.new("relu") bakes
// ew_fn_relu in as the kernels' template argument F. A unary one has value(x) and grad(x, dy) =
// dy * f'(x), from x alone (the forward's output is recomputed where f' needs it); a binary one
// value(a, b) and grad(a, b, dy, da, db). A is the compute type (f32 for halves).
#define EW_DEV template <typename A> static __device__ __forceinline__
struct ew_fn_neg {
    EW_DEV A value(A x) { return -x; }
    EW_DEV A grad(A, A dy) { return -dy; }
};
struct ew_fn_abs {
    EW_DEV A value(A x) { return x < (A)0 ? -x : x; }
    EW_DEV A grad(A x, A dy) { return x > (A)0 ? dy : x < (A)0 ? -dy : (A)0; }
};
struct ew_fn_exp {
    EW_DEV A value(A x) { return ew_exp(x); }
    EW_DEV A grad(A x, A dy) { return dy * ew_exp(x); }
};
struct ew_fn_log {
    EW_DEV A value(A x) { return ew_log(x); }
    EW_DEV A grad(A x, A dy) { return dy / x; }
};
struct ew_fn_sqrt {
    EW_DEV A value(A x) { return ew_sqrt(x); }
    EW_DEV A grad(A x, A dy) { return dy / ((A)2 * ew_sqrt(x)); }
};
struct ew_fn_add {
    EW_DEV A value(A a, A b) { return a + b; }
    EW_DEV void grad(A, A, A dy, A &da, A &db) { da = dy, db = dy; }
};
struct ew_fn_sub {
    EW_DEV A value(A a, A b) { return a - b; }
    EW_DEV void grad(A, A, A dy, A &da, A &db) { da = dy, db = -dy; }
};
struct ew_fn_mul {
    EW_DEV A value(A a, A b) { return a * b; }
    EW_DEV void grad(A a, A b, A dy, A &da, A &db) { da = dy * b, db = dy * a; }
};
struct ew_fn_div {
    EW_DEV A value(A a, A b) { return a / b; }
    EW_DEV void grad(A a, A b, A dy, A &da, A &db) { da = dy / b, db = -dy * a / (b * b); }
};
struct ew_fn_max {
    EW_DEV A value(A a, A b) { return a > b || a != a ? a : b; } // NaN in either operand gives NaN
    EW_DEV void grad(A a, A b, A dy, A &da, A &db)
    {
        da = a > b ? dy : a < b ? (A)0 : dy * (A)0.5;
        db = a < b ? dy : a > b ? (A)0 : dy * (A)0.5;
    }
};
struct ew_fn_min {
    EW_DEV A value(A a, A b) { return a < b || a != a ? a : b; }
    EW_DEV void grad(A a, A b, A dy, A &da, A &db)
    {
        da = a < b ? dy : a > b ? (A)0 : dy * (A)0.5;
        db = a > b ? dy : a < b ? (A)0 : dy * (A)0.5;
    }
};
// prelu(x, w): x for x > 0, else w x (PyTorch's and ONNX's PRelu; a model's per-channel slope
// through tocha.Broadcast); gradients as PyTorch's: dx = dy or w dy, dw = 0 or x dy.
struct ew_fn_prelu {
    EW_DEV A value(A a, A b) { return a > (A)0 ? a : a * b; }
    EW_DEV void grad(A a, A b, A dy, A &da, A &db) { da = a > (A)0 ? dy : dy * b, db = a > (A)0 ? (A)0 : dy * a; }
};
#undef EW_DEV

// 16 bytes of T at p (16-byte aligned) into v, and back.
template <typename T> __device__ __forceinline__ void ew_load(const T *p, T *v)
{
    unsigned w[4];
    tocha::load_words<16>(p, w);
    memcpy(v, w, 16);
}
template <typename T> __device__ __forceinline__ void ew_store(T *p, const T *v)
{
    tocha::pack16<T> x;
    memcpy(x.w, v, 16);
    tocha::store_pack(p, x);
}

__device__ __forceinline__ bool ew_aligned(const void *a, const void *b, const void *c = 0, const void *d = 0,
                                           const void *e = 0)
{
    return (((unsigned long long)a | (unsigned long long)b | (unsigned long long)c | (unsigned long long)d |
             (unsigned long long)e) & 15u) == 0;
}

#define EW_THREAD_LOOP(i, count)                                                                        \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (count);                    \
         i += (long long)blockDim.x * gridDim.x)

template <typename T, typename F> __device__ void tocha_unary(const T *x, T *y, long long n)
{
    const int V = 16 / (int)sizeof(T);
    const long long vectors = ew_aligned(x, y) ? n / V : 0;
    EW_THREAD_LOOP(i, vectors) {
        T a[V], r[V];
        ew_load(x + i * V, a);
#pragma unroll
        for (int e = 0; e < V; e++) r[e] = tocha::from_compute<T>(F::value(tocha::to_compute(a[e])));
        ew_store(y + i * V, r);
    }
    const long long done = vectors * V;
    EW_THREAD_LOOP(i, n - done) y[done + i] = tocha::from_compute<T>(F::value(tocha::to_compute(x[done + i])));
}

template <typename T, typename F> __device__ void tocha_unary_backward(const T *x, const T *dy, T *dx, long long n)
{
    const int V = 16 / (int)sizeof(T);
    const long long vectors = ew_aligned(x, dy, dx) ? n / V : 0;
    EW_THREAD_LOOP(i, vectors) {
        T a[V], g[V], r[V];
        ew_load(x + i * V, a);
        ew_load(dy + i * V, g);
#pragma unroll
        for (int e = 0; e < V; e++) r[e] = tocha::from_compute<T>(F::grad(tocha::to_compute(a[e]), tocha::to_compute(g[e])));
        ew_store(dx + i * V, r);
    }
    const long long done = vectors * V;
    EW_THREAD_LOOP(i, n - done) dx[done + i] = tocha::from_compute<T>(F::grad(tocha::to_compute(x[done + i]), tocha::to_compute(dy[done + i])));
}

template <typename T, typename F> __device__ void tocha_binary(const T *a, const T *b, T *y, long long n)
{
    const int V = 16 / (int)sizeof(T);
    const long long vectors = ew_aligned(a, b, y) ? n / V : 0;
    EW_THREAD_LOOP(i, vectors) {
        T va[V], vb[V], r[V];
        ew_load(a + i * V, va);
        ew_load(b + i * V, vb);
#pragma unroll
        for (int e = 0; e < V; e++) r[e] = tocha::from_compute<T>(F::value(tocha::to_compute(va[e]), tocha::to_compute(vb[e])));
        ew_store(y + i * V, r);
    }
    const long long done = vectors * V;
    EW_THREAD_LOOP(i, n - done) y[done + i] = tocha::from_compute<T>(F::value(tocha::to_compute(a[done + i]), tocha::to_compute(b[done + i])));
}

template <typename T, typename F>
__device__ void tocha_binary_backward(const T *a, const T *b, const T *dy, T *da, T *db, long long n)
{
    typedef typename tocha::compute<T>::type A;
    const int V = 16 / (int)sizeof(T);
    const long long vectors = ew_aligned(a, b, dy, da, db) ? n / V : 0;
    EW_THREAD_LOOP(i, vectors) {
        T va[V], vb[V], g[V], ra[V], rb[V];
        ew_load(a + i * V, va);
        ew_load(b + i * V, vb);
        ew_load(dy + i * V, g);
#pragma unroll
        for (int e = 0; e < V; e++) {
            A ga, gb;
            F::grad(tocha::to_compute(va[e]), tocha::to_compute(vb[e]), tocha::to_compute(g[e]), ga, gb);
            ra[e] = tocha::from_compute<T>(ga);
            rb[e] = tocha::from_compute<T>(gb);
        }
        ew_store(da + i * V, ra);
        ew_store(db + i * V, rb);
    }
    const long long done = vectors * V;
    EW_THREAD_LOOP(i, n - done) {
        A ga, gb;
        F::grad(tocha::to_compute(a[done + i]), tocha::to_compute(b[done + i]), tocha::to_compute(dy[done + i]), ga, gb);
        da[done + i] = tocha::from_compute<T>(ga);
        db[done + i] = tocha::from_compute<T>(gb);
    }
}
