// wmma.h: CUDA's warp matrix functions (nvcuda::wmma) on the simulator, for f16 and bf16 inputs
// (shapes 16x16x16, 32x8x16, 8x32x16) with f32 or f16 accumulators, tf32 (16x16x8) and f64
// (8x8x4). On a GPU a fragment's elements are spread over the warp's lanes in a layout CUDA does
// not define; here every lane holds the whole tile, in row-major order (num_elements is the
// tile's size), which gives every program that uses fragments only through the API, or touches
// x[i] for i < num_elements alike, the same result. Each call is a __syncwarp, as the _sync in
// its name says: the warp's lanes must all reach it. mma_sync adds each product into a double
// and rounds once; tf32 inputs keep their top 19 bits, as the tensor cores read them. The
// toolkit's mma.h, when a kernel includes it, adds nothing on the simulator.
#define __CUDA_MMA_H__

namespace nvcuda {
namespace wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
} // namespace precision

// The rows and columns of a Use's tile in an M x N x K product.
template <typename Use, int M, int N, int K> struct tile_dims;
template <int M, int N, int K> struct tile_dims<matrix_a, M, N, K> { static const int rows = M, cols = K; };
template <int M, int N, int K> struct tile_dims<matrix_b, M, N, K> { static const int rows = K, cols = N; };
template <int M, int N, int K> struct tile_dims<accumulator, M, N, K> { static const int rows = M, cols = N; };

// What a fragment of T holds: tf32 fragments hold floats.
template <typename T> struct storage { typedef T type; };
template <> struct storage<precision::tf32> { typedef float type; };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    typedef typename storage<T>::type element_type;
    static const int rows = tile_dims<Use, M, N, K>::rows, cols = tile_dims<Use, M, N, K>::cols;
    static const int num_elements = rows * cols;
    element_type x[rows * cols];
};

static inline double widen(__half v) { return (double)__half2float(v); }
static inline double widen(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
static inline double widen(float v) { return (double)v; }
static inline double widen(double v) { return v; }
// A tf32 operand: the float with its 13 low mantissa bits dropped.
static inline double widen_tf32(float v)
{
    unsigned b;
    memcpy(&b, &v, 4);
    b &= 0xffffe000u;
    float t;
    memcpy(&t, &b, 4);
    return (double)t;
}
template <typename T> static inline T narrow(double v);
template <> inline float narrow<float>(double v) { return (float)v; }
template <> inline double narrow<double>(double v) { return v; }
template <> inline __half narrow<__half>(double v) { return __double2half(v); }

// Rounds a float to tf32 (nearest, ties away from zero), as cvt.rna.tf32.f32.
static inline float __float_to_tf32(float v)
{
    unsigned b;
    memcpy(&b, &v, 4);
    if ((b & 0x7f800000u) != 0x7f800000u) b = (b + 0x1000u) & 0xffffe000u;
    float t;
    memcpy(&t, &b, 4);
    return t;
}

template <typename Use, int M, int N, int K, typename T, typename Layout, typename V>
static inline void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, const V &v)
{
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = (typename storage<T>::type)v;
}

template <typename F, typename P> static inline void load_tile(F &f, const P *p, unsigned ldm, bool row)
{
    __syncwarp();
    for (int i = 0; i < F::rows; ++i)
        for (int j = 0; j < F::cols; ++j) f.x[i * F::cols + j] = p[row ? (size_t)i * ldm + j : i + (size_t)j * ldm];
}

// matrix_a and matrix_b: the layout is the fragment's.
template <typename Use, int M, int N, int K, typename T, typename P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, row_major> &f, const P *p, unsigned ldm)
{
    load_tile(f, p, ldm, true);
}
template <typename Use, int M, int N, int K, typename T, typename P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, col_major> &f, const P *p, unsigned ldm)
{
    load_tile(f, p, ldm, false);
}
// accumulators: the layout is the call's.
template <int M, int N, int K, typename T>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T> &f, const T *p, unsigned ldm, layout_t layout)
{
    load_tile(f, p, ldm, layout == mem_row_major);
}

template <int M, int N, int K, typename T>
static inline void store_matrix_sync(T *p, const fragment<accumulator, M, N, K, T> &f, unsigned ldm, layout_t layout)
{
    __syncwarp();
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) p[layout == mem_row_major ? (size_t)i * ldm + j : i + (size_t)j * ldm] = f.x[i * N + j];
    __syncwarp();
}

template <typename T> struct operand {
    template <typename E> static double read(E v) { return widen(v); }
};
template <> struct operand<precision::tf32> {
    static double read(float v) { return widen_tf32(v); }
};

// d = a b + c.
template <int M, int N, int K, typename TA, typename LA, typename LB, typename TC, typename TD>
static inline void mma_sync(fragment<accumulator, M, N, K, TD> &d, const fragment<matrix_a, M, N, K, TA, LA> &a,
                            const fragment<matrix_b, M, N, K, TA, LB> &b, const fragment<accumulator, M, N, K, TC> &c)
{
    __syncwarp();
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double s = widen(c.x[i * N + j]);
            for (int k = 0; k < K; ++k) s += operand<TA>::read(a.x[i * K + k]) * operand<TA>::read(b.x[k * N + j]);
            d.x[i * N + j] = narrow<TD>(s);
        }
    __syncwarp();
}

} // namespace wmma
} // namespace nvcuda
