// attention.cu: scaled dot-product attention of f16 or bf16 heads on the tensor cores, without
// the L x L scores in memory (the flash-attention scheme): o = softmax(scale q k^T [+ causal
// mask]) v for q [BH, LQ, D], k and v [BH, LK, D], o [BH, LQ, D] (heads folded into BH, each
// row of D contiguous), and lse [BH, LQ] (f32, the log of each row's softmax denominator,
// scores scaled: what a backward recomputes the probabilities from). After tensor_core.cuh.
//
// A CTA of 4 warps takes 64 query rows of one head (16 a warp, its q fragments in registers)
// and walks the keys 64 at a time: k and v tiles by cp.async into shared memory (rows padded by
// 16 bytes, so that ldmatrix's 8 rows fall on distinct banks), two buffers of each, so that the
// next block's tiles are in flight while this block's are multiplied, and v's wait comes only
// after q k^T and the softmax (q's tile, read into registers first, lies in the second
// buffer until its first refill), s = q k^T by mma.sync m16n8k16
// into f32 registers, then the running (online) softmax: each row's maximum m and sum l kept
// in registers, the output accumulators rescaled by exp(m_old - m_new) whenever the maximum
// grows, and o += p v with p rounded to T (the C fragments of two 8-key tiles are the A
// fragment of 16 keys, so p never leaves the registers). Scores are kept in base 2 (scale
// log2(e) folded in) so that exp2 does the exponentials. CAUSAL masks key j > query i (PyTorch's
// is_causal: the upper-left triangle kept), and the key tiles wholly above the diagonal are
// not read. Keys past LK are masked, queries past LQ not written. D (a multiple of 16, at most
// 128) and CAUSAL are compile-time constants; the launch gives ATTENTION_SHARED(D) bytes of
// dynamic shared memory; its grid numbers the heads along x and the query tiles along y.

#define ATTENTION_ROW(D) ((D) + 8)
#define ATTENTION_SHARED(D) (4 * 64 * ATTENTION_ROW(D) * 2)

// Two f32 values as the 32-bit register of an A fragment: a in the low half.
template <typename T> __device__ __forceinline__ unsigned attention_pack(float a, float b)
{
    const T pair[2] = {tocha::from_compute<T>(a), tocha::from_compute<T>(b)};
    unsigned bits;
    memcpy(&bits, pair, 4);
    return bits;
}

// 64 rows of D elements from src (rows row0 .. row0 + 63 of `rows`, zero past them) into a
// padded shared tile, 16 bytes a cp.async, by the CTA's 128 threads.
template <typename T, int D>
__device__ __forceinline__ void attention_load(T (*tile)[ATTENTION_ROW(D)], const T *src, long long row0,
                                               long long rows)
{
    const int chunks = D / 8; // 16-byte chunks a row
    for (int e = threadIdx.x; e < 64 * chunks; e += 128) {
        const int r = e / chunks, c = e % chunks;
        const bool in = row0 + r < rows;
        tocha::cp_async16(&tile[r][c * 8], in ? src + (row0 + r) * D + c * 8 : src, in ? 16 : 0);
    }
    tocha::cp_async_commit();
}

// One block of 64 keys' online-softmax step for a thread's two rows row[h] (its warp's rows g
// and g + 8): the scores S(j, e) (row row[e >> 1], key k0 + 8 j + 2 t + (e & 1), j < 8, e < 4:
// the mma.sync and wgmma accumulator layout) scaled to base 2 and masked (keys past lk; CAUSAL,
// keys after the row), each row's new maximum m over the quad that holds it, l scaled by
// alpha = exp2(m_old - m_new), and the scores replaced by p = exp2(s - m), added to l. A row
// with no key yet (all masked) keeps m = -inf: alpha 1, p 0. The caller scales its output
// accumulators by alpha[h].
template <int CAUSAL, typename S>
__device__ __forceinline__ void attention_softmax_block(S score, int k0, int lk, const int row[2], int t, float scale2,
                                                        float m[2], float l[2], float alpha[2])
{
    const float neg_inf = -tocha::infinity<float>();
    float top[2] = {m[0], m[1]};
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int col = k0 + j * 8 + 2 * t + (e & 1);
            const bool masked = col >= lk || (CAUSAL && col > row[e >> 1]);
            float &v = score(j, e);
            v = masked ? neg_inf : v * scale2;
            top[e >> 1] = fmaxf(top[e >> 1], v);
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffu, top[h], 1));
        top[h] = fmaxf(top[h], __shfl_xor_sync(0xffffffffu, top[h], 2));
        alpha[h] = top[h] == neg_inf ? 1.0f : exp2f(m[h] - top[h]);
        m[h] = top[h];
        l[h] *= alpha[h];
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float &v = score(j, e);
            v = m[e >> 1] == neg_inf ? 0.0f : exp2f(v - m[e >> 1]);
            l[e >> 1] += v;
        }
}

// The forward's end for a thread's two rows: each row's sum l over its quad, o = acc / l (ACC(j,
// c + 2 h): row row[h], column 8 j + 2 t + c) rounded once to T, and lse (natural log) from the
// base-2 maximum and sum; rows past lq are not written.
template <typename T, int D, typename ACC>
__device__ __forceinline__ void attention_finish(ACC acc, float l[2], const float m[2], const int row[2], int lq, int t,
                                                 T *o, float *lse)
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (row[h] >= lq) continue;
        const float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
            const unsigned bits = attention_pack<T>(acc(j, 2 * h) * inv, acc(j, 2 * h + 1) * inv);
            *(unsigned *)(o + (long long)row[h] * D + j * 8 + 2 * t) = bits;
        }
        if (t == 0) lse[row[h]] = l[h] > 0.0f ? (m[h] + log2f(l[h])) * 0.6931471805599453f : -tocha::infinity<float>();
    }
}

template <typename T, int D, int CAUSAL>
__device__ void tocha_attention_forward(const T *q, const T *k, const T *v, T *o, float *lse,
                                        long long heads, int lq, int lk, float scale)
{
    static_assert(D % 16 == 0 && D <= 128,
                  "tocha_attention_forward: head size a multiple of 16, at most 128");
    extern __shared__ __align__(16) unsigned char attention_shared[];
    // buffers b = 0, 1: k's tile at 128 b, v's at 128 b + 64 (rows); q's tile in buffer 1's k
    T(*tiles)[ATTENTION_ROW(D)] = reinterpret_cast<T(*)[ATTENTION_ROW(D)]>(attention_shared);
    T(*sq)[ATTENTION_ROW(D)] = tiles + 128;
    if (blockDim.x != 128) __trap();
    const long long bh = blockIdx.x;
    const int q0 = blockIdx.y * 64;
    if (bh >= heads || q0 >= lq) return;
    q += bh * lq * D, k += bh * lk * D, v += bh * lk * D, o += bh * lq * D;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const int kend = CAUSAL ? (lk < q0 + 64 ? lk : q0 + 64) : lk, blocks = (kend + 63) / 64;
    attention_load<T, D>(sq, q, q0, lq);
    if (blocks > 0) { // the first block's k and v, in flight behind q
        attention_load<T, D>(tiles, k, 0, lk);
        attention_load<T, D>(tiles + 64, v, 0, lk);
        tocha::cp_async_wait<2>();
    } else {
        tocha::cp_async_wait<0>();
    }
    __syncthreads();
    unsigned qa[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
        tocha::ldmatrix<4>(qa[kk], &sq[warp * 16 + lane % 16][kk * 16 + 8 * (lane / 16)]);
    const float scale2 = scale * 1.4426950408889634f; // scores in base 2
    const float neg_inf = -tocha::infinity<float>();
    float acc[D / 8][4];
#pragma unroll
    for (int j = 0; j < D / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    float m[2] = {neg_inf, neg_inf}, l[2] = {0.0f, 0.0f}; // rows g and g + 8: max, this thread's sum
    const int row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    for (int i = 0; i < blocks; ++i) {
        const int k0 = i * 64;
        T(*sk)[ATTENTION_ROW(D)] = tiles + 128 * (i & 1);
        T(*sv)[ATTENTION_ROW(D)] = sk + 64;
        const bool next = i + 1 < blocks;
        // every warp is done with the other buffer (the last block's tiles, or q at the first):
        // refill it with the next block's while this one's are used
        __syncthreads();
        if (next) {
            T(*nk)[ATTENTION_ROW(D)] = tiles + 128 * ((i + 1) & 1);
            attention_load<T, D>(nk, k, k0 + 64, lk);
            attention_load<T, D>(nk + 64, v, k0 + 64, lk);
            tocha::cp_async_wait<3>(); // this block's k landed (its v and the next block's may not)
        } else {
            tocha::cp_async_wait<1>();
        }
        __syncthreads();
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
            for (int j = 0; j < 8; j += 2) {
                // k's rows are the columns of k^T (B, column-major): two 8-key tiles a load
                unsigned r[4];
                tocha::ldmatrix<4>(
                    r, &sk[j * 8 + 8 * (lane / 16) + lane % 8][kk * 16 + 8 * (lane / 8 % 2)]);
                const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                tocha::mma_16816<T>(s[j], qa[kk], b0, s[j]);
                tocha::mma_16816<T>(s[j + 1], qa[kk], b1, s[j + 1]);
            }
        float alpha[2];
        attention_softmax_block<CAUSAL>([&](int j, int e) -> float & { return s[j][e]; }, k0, lk, row, t, scale2, m, l,
                                        alpha);
#pragma unroll
        for (int j = 0; j < D / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[j][e] *= alpha[e >> 1];
        // this block's v landed (the next block's tiles may still be in flight)
        if (next)
            tocha::cp_async_wait<2>();
        else
            tocha::cp_async_wait<0>();
        __syncthreads();
        // o += p v: p's C fragments of key tiles 2 kk and 2 kk + 1 are the A fragment of keys
        // 16 kk .. 16 kk + 15; v [key][d] is B row-major, read transposed
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            const unsigned pa[4] = {attention_pack<T>(s[2 * kk][0], s[2 * kk][1]),
                                    attention_pack<T>(s[2 * kk][2], s[2 * kk][3]),
                                    attention_pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    attention_pack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int j = 0; j < D / 8; j += 2) {
                unsigned r[4];
                tocha::ldmatrix<4, true>(
                    r, &sv[kk * 16 + 8 * (lane / 8 % 2) + lane % 8][j * 8 + 8 * (lane / 16)]);
                const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                tocha::mma_16816<T>(acc[j], pa, b0, acc[j]);
                tocha::mma_16816<T>(acc[j + 1], pa, b1, acc[j + 1]);
            }
        }
    }
    attention_finish<T, D>([&](int j, int c) { return acc[j][c]; }, l, m, row, lq, t, o, lse + bh * lq);
}

// ---- the forward on wgmma (sm_90 and the simulator), head sizes 64 and 128 ----
//
// The same scheme as tocha_attention_forward, the products on the warpgroup's wgmma: the CTA's
// four warps are one warpgroup, s = q k^T is one m64n64 product a block of 64 keys (q and k
// K-major in 128-byte swizzled tiles: warpgroup.cuh), its f32 accumulators laid out as
// mma.sync's (so the online softmax is the same code), p is stored as T to a swizzled tile of
// 64 x 64 and o += p v is one m64nD product (v MN-major: its rows are the keys). The k and v
// tiles are double-buffered as in tocha_attention_forward. The launch gives
// ATTENTION_WG_SHARED(D) bytes: q's tile, two k and two v tiles (each D / 64 blocks of 64 rows
// x 128 bytes), p's tile, and 1 KiB to align them (wgmma's swizzle follows address bits).
#if defined(TOCHA_SIM) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TOCHA_ATTENTION_WGMMA 1
#endif
#define ATTENTION_WG_TILE(D) ((D) / 64 * 8192)
#define ATTENTION_WG_SHARED(D) (5 * ATTENTION_WG_TILE(D) + 8192 + 1024)

#ifdef TOCHA_ATTENTION_WGMMA
// 64 rows of D elements from src (rows row0 .. row0 + 63 of `rows`, zero past them) into a
// swizzled tile: chunk c of row r at block c / 8, chunk c % 8 of row r (warpgroup.cuh's layout,
// K-major for q and k; for v, whose rows are k of the product, MN-major), 16 bytes a cp.async.
template <typename T, int D>
__device__ __forceinline__ void attention_wg_load(unsigned char *tile, const T *src, long long row0, long long rows)
{
    const int chunks = D / 8;
    for (int e = threadIdx.x; e < 64 * chunks; e += 128) {
        const int r = e / chunks, c = e % chunks;
        const bool in = row0 + r < rows;
        tocha::cp_async16(tile + (c / 8) * 8192 + tocha::swizzle128(r, c % 8), in ? src + (row0 + r) * D + c * 8 : src,
                          in ? 16 : 0);
    }
    tocha::cp_async_commit();
}
#endif

template <typename T, int D, int CAUSAL>
__device__ void tocha_attention_forward_wg(const T *q, const T *k, const T *v, T *o, float *lse, long long heads,
                                           int lq, int lk, float scale)
{
    static_assert(D == 64 || D == 128, "tocha_attention_forward_wg: head size 64 or 128");
#ifdef TOCHA_ATTENTION_WGMMA
    extern __shared__ __align__(1024) unsigned char attention_shared[];
    unsigned char *sq = tocha::align_1024(attention_shared);
    const int TILE = ATTENTION_WG_TILE(D);
    unsigned char *sp = sq + 5 * TILE; // k tiles at sq + TILE (1 + b), v tiles at sq + TILE (3 + b)
    if (blockDim.x != 128) __trap();
    const long long bh = blockIdx.x;
    const int q0 = blockIdx.y * 64;
    if (bh >= heads || q0 >= lq) return;
    q += bh * lq * D, k += bh * lk * D, v += bh * lk * D, o += bh * lq * D;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const int kend = CAUSAL ? (lk < q0 + 64 ? lk : q0 + 64) : lk, blocks = (kend + 63) / 64;
    attention_wg_load<T, D>(sq, q, q0, lq);
    if (blocks > 0) {
        attention_wg_load<T, D>(sq + TILE, k, 0, lk);
        attention_wg_load<T, D>(sq + 3 * TILE, v, 0, lk);
    }
    const float scale2 = scale * 1.4426950408889634f; // scores in base 2
    const float neg_inf = -tocha::infinity<float>();
    float acc[D / 2]; // o's accumulators: rows g and g + 8 of the warp's 16, columns 8 j + 2 t (+1)
#pragma unroll
    for (int j = 0; j < D / 2; ++j) acc[j] = 0.0f;
    float m[2] = {neg_inf, neg_inf}, l[2] = {0.0f, 0.0f};
    const int row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    for (int i = 0; i < blocks; ++i) {
        const int k0 = i * 64;
        const unsigned char *sk = sq + TILE * (1 + (i & 1)), *sv = sq + TILE * (3 + (i & 1));
        const bool next = i + 1 < blocks;
        // every warp is done with the other buffers and with p (the last block's products were
        // waited for): refill them with the next block's tiles while this block's are used
        __syncthreads();
        if (next) {
            attention_wg_load<T, D>(sq + TILE * (1 + ((i + 1) & 1)), k, k0 + 64, lk);
            attention_wg_load<T, D>(sq + TILE * (3 + ((i + 1) & 1)), v, k0 + 64, lk);
            tocha::cp_async_wait<3>(); // q and this block's k landed
        } else {
            tocha::cp_async_wait<1>();
        }
        tocha::fence_async_shared();
        __syncthreads();
        float s[32]; // s[4 j + e]: row g + 8 (e >> 1), key 8 j + 2 t + (e & 1)
#pragma unroll
        for (int j = 0; j < 32; ++j) s[j] = 0.0f;
        tocha::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            tocha::wgmma<T, 64, 0, 0>(s, sq + (kk / 4) * 8192 + 32 * (kk % 4), 8192, 1024,
                                      sk + (kk / 4) * 8192 + 32 * (kk % 4), 8192, 1024);
        tocha::wgmma_commit();
        tocha::wgmma_wait<0>();
        float alpha[2];
        attention_softmax_block<CAUSAL>([&](int j, int e) -> float & { return s[4 * j + e]; }, k0, lk, row, t, scale2, m,
                                        l, alpha);
#pragma unroll
        for (int j = 0; j < D / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[4 * j + e] *= alpha[e >> 1];
        // p, rounded to T, into its tile (K-major: rows the queries, 128 bytes of keys)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *(unsigned *)(sp + tocha::swizzle128(warp * 16 + g + 8 * h, j) + 4 * t) =
                    attention_pack<T>(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]);
        tocha::fence_async_shared();
        // this block's v landed (the next block's tiles may still be in flight)
        if (next)
            tocha::cp_async_wait<2>();
        else
            tocha::cp_async_wait<0>();
        tocha::fence_async_shared();
        __syncthreads();
        tocha::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            tocha::wgmma<T, D, 0, 1>(acc, sp + 32 * kk, 8192, 1024, sv + 2048 * kk, 8192, 1024);
        tocha::wgmma_commit();
        tocha::wgmma_wait<0>();
    }
    if (blocks == 0) tocha::cp_async_wait<0>();
    attention_finish<T, D>([&](int j, int c) { return acc[4 * j + c]; }, l, m, row, lq, t, o, lse + bh * lq);
#else
    (void)q, (void)k, (void)v, (void)o, (void)lse, (void)heads, (void)lq, (void)lk, (void)scale;
    __trap(); // the host takes it only where wgmma is
#endif
}

// ---- the backward ----
//
// From q, k, v, the forward's o and lse, and do: dq, dk, dv. First delta [BH, LQ] = the sum over
// d of do o a row (f32), with dq's f32 accumulator zeroed (tocha_attention_backward_delta);
// then a CTA a head and 64 keys (tocha_attention_backward), walking the query tiles that can
// see them: it recomputes the probabilities p = exp(scale q k^T - lse) from the scores, and
// with ds = p (do v^T - delta) adds p^T do into dv and ds^T q into dk (registers, 16 keys a
// warp) and ds k into dq (atomically, in f32: every key tile adds to it); last dq = the
// accumulator rounded (tocha_attention_backward_dq). The probabilities and ds are rounded to T
// as the operands of their products.

// delta[r] = sum over d of do[r, d] o[r, d], and dq_acc's row r zeroed: a thread a row.
template <typename T, int D>
__device__ void tocha_attention_backward_delta(const T *o, const T *dout, float *delta, float *dq_acc,
                                               long long rows)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += stride) {
        float s = 0.0f;
        for (int c = 0; c < D; ++c) {
            s = fmaf(tocha::to_compute(dout[r * D + c]), tocha::to_compute(o[r * D + c]), s);
            dq_acc[r * D + c] = 0.0f;
        }
        delta[r] = s;
    }
}

// The query tile's lse (to base 2) and delta into shared memory; rows past lq get lse +inf, so
// that their probabilities are 0.
__device__ __forceinline__ void attention_stage_rows(float *slse, float *sdelta, const float *lse, const float *delta,
                                                     int q0, int lq)
{
    for (int r = threadIdx.x; r < 64; r += 128) {
        slse[r] = q0 + r < lq ? lse[q0 + r] * 1.4426950408889634f : tocha::infinity<float>();
        sdelta[r] = q0 + r < lq ? delta[q0 + r] : 0.0f;
    }
}

// p^T = exp2(scale2 s^T - lse2), 0 where masked, into S(j, e); ds^T = p^T (dp^T - delta) into
// DP(j, e): key key[e >> 1], query q0 + 8 j + 2 t + (e & 1) (the accumulator layout of both
// kernels).
template <int CAUSAL, typename S, typename DP>
__device__ __forceinline__ void attention_probabilities(S s, DP dp, const int key[2], int q0, int lk, int t, float scale2,
                                                        const float *slse, const float *sdelta)
{
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int col = j * 8 + 2 * t + (e & 1), query = q0 + col, kr = key[e >> 1];
            const bool masked = kr >= lk || (CAUSAL && kr > query);
            const float p = masked ? 0.0f : exp2f(s(j, e) * scale2 - slse[col]);
            s(j, e) = p;
            dp(j, e) = p * (dp(j, e) - sdelta[col]);
        }
}

// dk = scale GK and dv = GV for the thread's two keys (GK(j, c + 2 h): key key[h], column 8 j +
// 2 t + c), rounded to T; keys past lk are not written.
template <typename T, int D, typename GK, typename GV>
__device__ __forceinline__ void attention_store_keys(GK gk, GV gv, const int key[2], int lk, int t, float scale, T *dk,
                                                     T *dv)
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (key[h] >= lk) continue;
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
            *(unsigned *)(dk + (long long)key[h] * D + j * 8 + 2 * t) =
                attention_pack<T>(gk(j, 2 * h) * scale, gk(j, 2 * h + 1) * scale);
            *(unsigned *)(dv + (long long)key[h] * D + j * 8 + 2 * t) = attention_pack<T>(gv(j, 2 * h), gv(j, 2 * h + 1));
        }
    }
}

#define ATTENTION_BACKWARD_SHARED(D) (4 * 64 * ATTENTION_ROW(D) * 2 + 64 * 72 * 2 + 2 * 64 * 4)

// The CTA of a head (grid.x) and 64 keys (grid.y); 4 warps, warp w the keys 16 w .. 16 w + 15
// of the tile for dk and dv, and the queries 16 w .. of each query tile for dq. The launch gives
// The backward's CTA (128 threads, head blockIdx.x, keys from 64 blockIdx.y): moves the
// pointers to its head's rows; false for a CTA past the heads or the keys.
template <int D, typename T>
__device__ __forceinline__ bool attention_backward_head(const T *&q, const T *&k, const T *&v, const T *&dout,
                                                        const float *&lse, const float *&delta, float *&dq_acc,
                                                        T *&dk, T *&dv, long long heads, int lq, int lk)
{
    if (blockDim.x != 128) __trap();
    const long long bh = blockIdx.x;
    if (bh >= heads || (long long)blockIdx.y * 64 >= lk) return false;
    q += bh * lq * D, k += bh * lk * D, v += bh * lk * D, dout += bh * lq * D;
    lse += bh * lq, delta += bh * lq, dq_acc += bh * lq * D, dk += bh * lk * D, dv += bh * lk * D;
    return true;
}

// ATTENTION_BACKWARD_SHARED(D) bytes of dynamic shared memory: k, v, q, do tiles, ds^T [64
// keys][64 queries], and the query tile's lse (base 2) and delta.
template <typename T, int D, int CAUSAL>
__device__ void tocha_attention_backward(const T *q, const T *k, const T *v, const T *dout,
                                         const float *lse, const float *delta, float *dq_acc, T *dk,
                                         T *dv, long long heads, int lq, int lk, float scale)
{
    extern __shared__ __align__(16) unsigned char attention_shared[];
    T(*sk)[ATTENTION_ROW(D)] = reinterpret_cast<T(*)[ATTENTION_ROW(D)]>(attention_shared);
    T(*sv)[ATTENTION_ROW(D)] = sk + 64;
    T(*sq)[ATTENTION_ROW(D)] = sv + 64;
    T(*sdo)[ATTENTION_ROW(D)] = sq + 64;
    T(*sds)[72] = reinterpret_cast<T(*)[72]>(sdo + 64);
    float *slse = reinterpret_cast<float *>(sds + 64), *sdelta = slse + 64;
    const int k0 = blockIdx.y * 64;
    if (!attention_backward_head<D>(q, k, v, dout, lse, delta, dq_acc, dk, dv, heads, lq, lk)) return;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    attention_load<T, D>(sk, k, k0, lk);
    attention_load<T, D>(sv, v, k0, lk);
    const float scale2 = scale * 1.4426950408889634f;
    float gk[D / 8][4], gv[D / 8][4]; // dk and dv of the warp's 16 keys
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) gk[j][e] = gv[j][e] = 0.0f;
    const int key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
    for (int q0 = CAUSAL ? k0 / 64 * 64 : 0; q0 < lq; q0 += 64) {
        __syncthreads(); // the previous tiles are read
        attention_load<T, D>(sq, q, q0, lq);
        attention_load<T, D>(sdo, dout, q0, lq);
        attention_stage_rows(slse, sdelta, lse, delta, q0, lq);
        tocha::cp_async_wait<0>();
        __syncthreads();
        // s^T = k q^T and dp^T = v do^T: the warp's 16 keys by 64 queries
        float s[8][4], dp[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            unsigned ka[4], va[4];
            tocha::ldmatrix<4>(ka, &sk[warp * 16 + lane % 16][kk * 16 + 8 * (lane / 16)]);
            tocha::ldmatrix<4>(va, &sv[warp * 16 + lane % 16][kk * 16 + 8 * (lane / 16)]);
#pragma unroll
            for (int j = 0; j < 8; j += 2) {
                unsigned r[4];
                tocha::ldmatrix<4>(
                    r, &sq[j * 8 + 8 * (lane / 16) + lane % 8][kk * 16 + 8 * (lane / 8 % 2)]);
                const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                tocha::mma_16816<T>(s[j], ka, b0, s[j]);
                tocha::mma_16816<T>(s[j + 1], ka, b1, s[j + 1]);
                tocha::ldmatrix<4>(
                    r, &sdo[j * 8 + 8 * (lane / 16) + lane % 8][kk * 16 + 8 * (lane / 8 % 2)]);
                const unsigned c0[2] = {r[0], r[1]}, c1[2] = {r[2], r[3]};
                tocha::mma_16816<T>(dp[j], va, c0, dp[j]);
                tocha::mma_16816<T>(dp[j + 1], va, c1, dp[j + 1]);
            }
        }
        attention_probabilities<CAUSAL>([&](int j, int e) -> float & { return s[j][e]; },
                                        [&](int j, int e) -> float & { return dp[j][e]; }, key, q0, lk, t, scale2, slse,
                                        sdelta);
            // dv += p^T do, dk += ds^T q: the C fragments of query tiles 2 kk, 2 kk + 1 are the A
            // fragment of queries 16 kk .. 16 kk + 15; do and q [query][d] are B row-major
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            const unsigned pa[4] = {attention_pack<T>(s[2 * kk][0], s[2 * kk][1]),
                                    attention_pack<T>(s[2 * kk][2], s[2 * kk][3]),
                                    attention_pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    attention_pack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            const unsigned da[4] = {attention_pack<T>(dp[2 * kk][0], dp[2 * kk][1]),
                                    attention_pack<T>(dp[2 * kk][2], dp[2 * kk][3]),
                                    attention_pack<T>(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                                    attention_pack<T>(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
            for (int j = 0; j < D / 8; j += 2) {
                unsigned r[4];
                tocha::ldmatrix<4, true>(
                    r, &sdo[kk * 16 + 8 * (lane / 8 % 2) + lane % 8][j * 8 + 8 * (lane / 16)]);
                const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                tocha::mma_16816<T>(gv[j], pa, b0, gv[j]);
                tocha::mma_16816<T>(gv[j + 1], pa, b1, gv[j + 1]);
                tocha::ldmatrix<4, true>(
                    r, &sq[kk * 16 + 8 * (lane / 8 % 2) + lane % 8][j * 8 + 8 * (lane / 16)]);
                const unsigned c0[2] = {r[0], r[1]}, c1[2] = {r[2], r[3]};
                tocha::mma_16816<T>(gk[j], da, c0, gk[j]);
                tocha::mma_16816<T>(gk[j + 1], da, c1, gk[j + 1]);
            }
        }
        // ds^T into shared memory (T, as the products take it), for dq = ds k over all 64 keys
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *(unsigned *)&sds[warp * 16 + g + 8 * h][j * 8 + 2 * t] =
                    attention_pack<T>(dp[j][2 * h], dp[j][2 * h + 1]);
        __syncthreads();
        float gq[D / 8][4];
#pragma unroll
        for (int j = 0; j < D / 8; ++j) gq[j][0] = gq[j][1] = gq[j][2] = gq[j][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            // ds [query][key] is ds^T read transposed: the A fragment of the warp's 16 queries
            unsigned a[4];
            tocha::ldmatrix<4, true>(
                a, &sds[kk * 16 + 8 * (lane / 16) + lane % 8][warp * 16 + 8 * (lane / 8 % 2)]);
#pragma unroll
            for (int j = 0; j < D / 8; j += 2) {
                unsigned r[4];
                tocha::ldmatrix<4, true>(
                    r, &sk[kk * 16 + 8 * (lane / 8 % 2) + lane % 8][j * 8 + 8 * (lane / 16)]);
                const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                tocha::mma_16816<T>(gq[j], a, b0, gq[j]);
                tocha::mma_16816<T>(gq[j + 1], a, b1, gq[j + 1]);
            }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int query = q0 + warp * 16 + g + 8 * h;
            if (query >= lq) continue;
#pragma unroll
            for (int j = 0; j < D / 8; ++j) {
                atomicAdd(&dq_acc[(long long)query * D + j * 8 + 2 * t], gq[j][2 * h] * scale);
                atomicAdd(&dq_acc[(long long)query * D + j * 8 + 2 * t + 1], gq[j][2 * h + 1] * scale);
            }
        }
    }
    tocha::cp_async_wait<0>(); // k and v's copies, where no query tile was walked
    attention_store_keys<T, D>([&](int j, int c) { return gk[j][c]; }, [&](int j, int c) { return gv[j][c]; }, key, lk, t,
                               scale, dk, dv);
}

// The backward's main pass on wgmma (sm_90 and the simulator), head sizes 64 and 128: the same
// scheme as tocha_attention_backward, each product a warpgroup's from swizzled tiles. s^T = k
// q^T and dp^T = v do^T are m64n64 products (k, v, q and do K-major); p^T and ds^T, rounded to
// T, go to swizzled tiles (rows the keys, 128 bytes of queries), from which dv += p^T do and dk
// += ds^T q (do and q MN-major) and dq = ds k (ds^T read as an MN-major A, k MN-major) are
// m64nD products; dq is added to the f32 accumulator atomically as before. The launch gives
// ATTENTION_WG_BACKWARD_SHARED(D) bytes: k, v, q, do, p^T's and ds^T's tiles, the query
// tile's lse and delta, and 1 KiB to align the tiles.
#define ATTENTION_WG_BACKWARD_SHARED(D) (4 * ATTENTION_WG_TILE(D) + 2 * 8192 + 2 * 64 * 4 + 1024)

template <typename T, int D, int CAUSAL>
__device__ void tocha_attention_backward_wg(const T *q, const T *k, const T *v, const T *dout, const float *lse,
                                            const float *delta, float *dq_acc, T *dk, T *dv, long long heads,
                                            int lq, int lk, float scale)
{
    static_assert(D == 64 || D == 128, "tocha_attention_backward_wg: head size 64 or 128");
#ifdef TOCHA_ATTENTION_WGMMA
    extern __shared__ __align__(1024) unsigned char attention_shared[];
    unsigned char *sk = tocha::align_1024(attention_shared);
    const int TILE = ATTENTION_WG_TILE(D);
    unsigned char *sv = sk + TILE, *sq = sv + TILE, *sdo = sq + TILE, *spt = sdo + TILE, *sdst = spt + 8192;
    float *slse = reinterpret_cast<float *>(sdst + 8192), *sdelta = slse + 64;
    const int k0 = blockIdx.y * 64;
    if (!attention_backward_head<D>(q, k, v, dout, lse, delta, dq_acc, dk, dv, heads, lq, lk)) return;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    attention_wg_load<T, D>(sk, k, k0, lk);
    attention_wg_load<T, D>(sv, v, k0, lk);
    const float scale2 = scale * 1.4426950408889634f;
    float gk[D / 2], gv[D / 2]; // dk and dv of the warp's 16 keys: rows g and g + 8, columns 8 j + 2 t (+1)
#pragma unroll
    for (int j = 0; j < D / 2; ++j) gk[j] = gv[j] = 0.0f;
    const int key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
    for (int q0 = CAUSAL ? k0 / 64 * 64 : 0; q0 < lq; q0 += 64) {
        __syncthreads(); // the previous tiles are read (every product of them waited for)
        attention_wg_load<T, D>(sq, q, q0, lq);
        attention_wg_load<T, D>(sdo, dout, q0, lq);
        attention_stage_rows(slse, sdelta, lse, delta, q0, lq);
        tocha::cp_async_wait<0>();
        tocha::fence_async_shared();
        __syncthreads();
        // s^T = k q^T and dp^T = v do^T: 64 keys by 64 queries, s[4 j + e] at key row
        // 16 w + g + 8 (e >> 1), query 8 j + 2 t + (e & 1)
        float s[32], dp[32];
#pragma unroll
        for (int j = 0; j < 32; ++j) s[j] = dp[j] = 0.0f;
        tocha::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const int at = (kk / 4) * 8192 + 32 * (kk % 4);
            tocha::wgmma<T, 64, 0, 0>(s, sk + at, 8192, 1024, sq + at, 8192, 1024);
            tocha::wgmma<T, 64, 0, 0>(dp, sv + at, 8192, 1024, sdo + at, 8192, 1024);
        }
        tocha::wgmma_commit();
        tocha::wgmma_wait<0>();
        attention_probabilities<CAUSAL>([&](int j, int e) -> float & { return s[4 * j + e]; },
                                        [&](int j, int e) -> float & { return dp[4 * j + e]; }, key, q0, lk, t, scale2,
                                        slse, sdelta);
        // p^T and ds^T to their tiles as T
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int at = tocha::swizzle128(warp * 16 + g + 8 * h, j) + 4 * t;
                *(unsigned *)(spt + at) = attention_pack<T>(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]);
                *(unsigned *)(sdst + at) = attention_pack<T>(dp[4 * j + 2 * h], dp[4 * j + 2 * h + 1]);
            }
        tocha::fence_async_shared();
        __syncthreads();
        // dv += p^T do, dk += ds^T q, dq = ds k (ds^T read as an MN-major A)
        float gq[D / 2];
#pragma unroll
        for (int j = 0; j < D / 2; ++j) gq[j] = 0.0f;
        tocha::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            tocha::wgmma<T, D, 0, 1>(gv, spt + 32 * kk, 8192, 1024, sdo + 2048 * kk, 8192, 1024);
            tocha::wgmma<T, D, 0, 1>(gk, sdst + 32 * kk, 8192, 1024, sq + 2048 * kk, 8192, 1024);
            tocha::wgmma<T, D, 1, 1>(gq, sdst + 2048 * kk, 8192, 1024, sk + 2048 * kk, 8192, 1024);
        }
        tocha::wgmma_commit();
        tocha::wgmma_wait<0>();
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int query = q0 + warp * 16 + g + 8 * h;
            if (query >= lq) continue;
#pragma unroll
            for (int j = 0; j < D / 8; ++j) {
                atomicAdd(&dq_acc[(long long)query * D + j * 8 + 2 * t], gq[4 * j + 2 * h] * scale);
                atomicAdd(&dq_acc[(long long)query * D + j * 8 + 2 * t + 1], gq[4 * j + 2 * h + 1] * scale);
            }
        }
    }
    tocha::cp_async_wait<0>(); // k and v's copies, where no query tile was walked
    attention_store_keys<T, D>([&](int j, int c) { return gk[4 * j + c]; }, [&](int j, int c) { return gv[4 * j + c]; },
                               key, lk, t, scale, dk, dv);
#else
    (void)q, (void)k, (void)v, (void)dout, (void)lse, (void)delta, (void)dq_acc, (void)dk, (void)dv, (void)heads;
    (void)lq, (void)lk, (void)scale;
    __trap(); // the host takes it only where wgmma is
#endif
}

// dq = the f32 accumulator rounded to T, count elements.
template <typename T>
__device__ void tocha_attention_backward_dq(const float *dq_acc, T *dq, long long count)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count; e += stride)
        dq[e] = tocha::from_compute<T>(dq_acc[e]);
}
