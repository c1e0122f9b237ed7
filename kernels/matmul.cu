// matmul.cu: C = A x B (+ bias), A [m, k], B [k, n], C [m, n] row-major, a batch of them along
// grid.z (stride_* elements between a batch's matrices, 0 to repeat one), bias [n] added to
// every row when has_bias. TA: A is stored column-major (A's transpose [k, m] row-major, as a
// transposed view holds it); TB likewise for B ([n, k]): y = x w^T reads w [n, k] as it is.
// Both kernels take CTAs of 256 threads (launch bounds; any other block traps). Two kernels:
// - tocha_matmul_tc (f16, bf16): the tensor cores (tensor_core.cuh, built before this file),
//   f32 accumulators rounded once to T. A CTA of 8 warps computes a 128 x 128 tile of C, each
//   warp a 64 x 32 part of it (4 x 4 mma tiles of 16 x 8); A's and B's slices over 32 of k go
//   to shared memory by cp.async in 16-byte chunks along each operand's consecutive elements,
//   two buffers so that the next slice loads while the warps multiply this one, and reach the
//   fragments through ldmatrix (transposed where the stored layout is the fragment's
//   transpose). Rows of shared memory are padded by 16 bytes, so that the eight rows an
//   ldmatrix phase reads fall on distinct banks. Needs each operand's consecutive dimension a
//   multiple of 8 and A, B 16-byte aligned (each chunk wholly inside the matrix or wholly out:
//   chunks past an edge are zero-filled); the host sends other shapes to tocha_matmul_simt.
// - tocha_matmul_simt (any float dtype, any shape): 64 x 64 tiles of C on 256 threads, each 4 x
//   4 outputs (rows ty + 16i, columns tx + 16j), A's and B's 64 x 16 slices staged in shared
//   memory in the compute type; sums in k order, one fma a product (f32 for halves, f64 for
//   f64).

// A's and B's slices in shared memory, two buffers each, rows padded by 8 elements: a row-major
// A's [128 rows of m][32 of k], a column-major A's [32 of k][128 of m]; a row-major B's [32 of
// k][128 of n], a column-major B's [128 of n][32 of k].
template <typename T, bool TA, bool TB> struct mm_tc_tiles {
    T a[2][TA ? 32 : 128][TA ? 128 + 8 : 32 + 8];
    T b[2][TB ? 128 : 32][TB ? 32 + 8 : 128 + 8];
};

// Starts the copies of A's rows [row0, row0 + 128) and B's columns [col0, col0 + 128) over
// k in [k0, k0 + 32) into buffer `buf`, as one cp.async group: 512 chunks of 16 bytes each,
// two a thread, along each operand's consecutive elements.
template <typename T, bool TA, bool TB>
__device__ __forceinline__ void mm_tc_load(mm_tc_tiles<T, TA, TB> &s, int buf, const T *a, const T *b,
                                           long long m, long long n, long long k, long long row0,
                                           long long col0, long long k0)
{
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int chunk = tid + i * 256;
        if (!TA) { // 128 rows of m, 4 chunks of k each
            const int r = chunk / 4, cc = (chunk % 4) * 8;
            const long long gr = row0 + r, gk = k0 + cc;
            const bool in = gr < m && gk < k;
            tocha::cp_async16(&s.a[buf][r][cc], in ? a + gr * k + gk : a, in ? 16 : 0);
        } else { // 32 rows of k, 16 chunks of m each
            const int r = chunk / 16, cc = (chunk % 16) * 8;
            const long long gk = k0 + r, gr = row0 + cc;
            const bool in = gk < k && gr < m;
            tocha::cp_async16(&s.a[buf][r][cc], in ? a + gk * m + gr : a, in ? 16 : 0);
        }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int chunk = tid + i * 256;
        if (!TB) { // 32 rows of k, 16 chunks of n each
            const int r = chunk / 16, cc = (chunk % 16) * 8;
            const long long gk = k0 + r, gc = col0 + cc;
            const bool in = gk < k && gc < n;
            tocha::cp_async16(&s.b[buf][r][cc], in ? b + gk * n + gc : b, in ? 16 : 0);
        } else { // 128 rows of n, 4 chunks of k each
            const int r = chunk / 4, cc = (chunk % 4) * 8;
            const long long gc = col0 + r, gk = k0 + cc;
            const bool in = gc < n && gk < k;
            tocha::cp_async16(&s.b[buf][r][cc], in ? b + gc * k + gk : b, in ? 16 : 0);
        }
    }
    tocha::cp_async_commit();
}

template <typename T, int TA, int TB>
__device__ void tocha_matmul_tc(const T *a, const T *b, const T *bias, T *c, long long m, long long n,
                                long long k, long long stride_a, long long stride_b, long long stride_c,
                                int has_bias)
{
    __shared__ __align__(16) mm_tc_tiles<T, TA != 0, TB != 0> s;
    if (blockDim.x != 256) __trap(); // the tile's maps take 8 warps
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = warp / 4, wn = warp % 4; // 2 x 4 warps
    const long long row0 = (long long)blockIdx.y * 128, col0 = (long long)blockIdx.x * 128;
    a += blockIdx.z * stride_a, b += blockIdx.z * stride_b, c += blockIdx.z * stride_c;
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    const long long slices = (k + 31) / 32;
    if (slices > 0) mm_tc_load(s, 0, a, b, m, n, k, row0, col0, 0);
    for (long long t = 0; t < slices; ++t) {
        const int buf = (int)(t & 1);
        if (t + 1 < slices) {
            mm_tc_load(s, buf ^ 1, a, b, m, n, k, row0, col0, (t + 1) * 32);
            tocha::cp_async_wait<1>();
        } else {
            tocha::cp_async_wait<0>();
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 32; kk += 16) {
            unsigned fa[4][4], fb[4][2];
            // Lane l gives a row of matrix l / 8 of the four: A's (m 0-7, k 0-7), (m 8-15, k 0-7),
            // (m 0-7, k 8-15), (m 8-15, k 8-15) of an mma tile; B's (k 0-7, n tile j), (k 8-15,
            // tile j), then the same of tile j + 1. A column-major A's matrices are read
            // transposed, and a row-major B's (its fragment is column-major).
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                if (!TA)
                    tocha::ldmatrix<4>(fa[i],
                                       &s.a[buf][wm * 64 + i * 16 + lane % 16][kk + 8 * (lane / 16)]);
                else
                    tocha::ldmatrix<4, true>(fa[i], &s.a[buf][kk + 8 * (lane / 16) + lane % 8]
                                                        [wm * 64 + i * 16 + 8 * (lane / 8 % 2)]);
            }
#pragma unroll
            for (int j = 0; j < 4; j += 2) {
                unsigned r[4];
                if (!TB)
                    tocha::ldmatrix<4, true>(
                        r, &s.b[buf][kk + lane % 16][wn * 32 + j * 8 + 8 * (lane / 16)]);
                else
                    tocha::ldmatrix<4>(r, &s.b[buf][wn * 32 + j * 8 + 8 * (lane / 16) + lane % 8]
                                              [kk + 8 * (lane / 8 % 2)]);
                fb[j][0] = r[0], fb[j][1] = r[1], fb[j + 1][0] = r[2], fb[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) tocha::mma_16816<T>(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads(); // the buffer is refilled two slices on
    }
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const long long r = row0 + wm * 64 + i * 16 + g + 8 * h,
                                col = col0 + wn * 32 + j * 8 + 2 * q;
                if (r >= m || col >= n) continue;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                c[r * n + col] =
                    tocha::from_compute<T>(has_bias ? v0 + tocha::to_compute(bias[col]) : v0);
                if (col + 1 < n)
                    c[r * n + col + 1] =
                        tocha::from_compute<T>(has_bias ? v1 + tocha::to_compute(bias[col + 1]) : v1);
            }
}

template <typename T, int TA, int TB>
__device__ void tocha_matmul_simt(const T *a, const T *b, const T *bias, T *c, long long m, long long n,
                                  long long k, long long stride_a, long long stride_b,
                                  long long stride_c, int has_bias)
{
    typedef typename tocha::compute<T>::type A;
    __shared__ A sa[16][64 + 1], sb[16][64 + 1]; // [k][row], [k][column]
    if (blockDim.x != 256) __trap();             // 16 x 16 threads, each 4 x 4 outputs
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const long long row0 = (long long)blockIdx.y * 64, col0 = (long long)blockIdx.x * 64;
    a += blockIdx.z * stride_a, b += blockIdx.z * stride_b, c += blockIdx.z * stride_c;
    A acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = (A)0;
    for (long long k0 = 0; k0 < k; k0 += 16) {
        for (int e = threadIdx.x; e < 64 * 16; e += blockDim.x) {
            const int r = e / 16, ka = e % 16; // A: consecutive threads along k
            const long long gr = row0 + r, gk = k0 + ka;
            sa[ka][r] = gr < m && gk < k ? tocha::to_compute(a[TA ? gk * m + gr : gr * k + gk]) : (A)0;
            const int kb = e / 64, col = e % 64; // B: consecutive threads along a row
            const long long gkb = k0 + kb, gc = col0 + col;
            sb[kb][col] =
                gkb < k && gc < n ? tocha::to_compute(b[TB ? gc * k + gkb : gkb * n + gc]) : (A)0;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            A av[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) av[i] = sa[kk][ty + 16 * i], bv[i] = sb[kk][tx + 16 * i];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const long long r = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
            if (r < m && col < n)
                c[r * n + col] = tocha::from_compute<T>(
                    has_bias ? acc[i][j] + tocha::to_compute(bias[col]) : acc[i][j]);
        }
}
