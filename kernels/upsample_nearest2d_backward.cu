// upsample_nearest2d_backward.cu: the gradient of nearest-neighbour 2-D upsampling, NCHW.
//
//   dy: [B, C, OH = H * SCALE_H, OW = W * SCALE_W]  ->  dx: [B, C, H, W]
//   dx[b, c, ih, iw] = sum over i < SCALE_H, j < SCALE_W of dy[b, c, ih * SCALE_H + i, iw * SCALE_W + j]
//
// A gather: each dx element is the only reader of its SCALE_H x SCALE_W block of dy, so it
// is written exactly once, with no atomics (dx needs no zeroing) and a fixed summation order
// (i, then j: deterministic). The sum is kept in tocha::accumulator<D> (f32 for f16 and bf16).
//
// Mapping (v2): each warp computes whole dx rows, a row being one (b, c, ih); BLOCK_IW / 32
// warps per CTA, grid.x = ceil(rows / warps per CTA), grid-stride beyond. Each lane writes
// 16-byte vectors of dx (16 / sizeof(D) elements) at aligned addresses, reading for them
// SCALE_H runs of 16 / sizeof(D) * SCALE_W consecutive dy elements; the elements before a
// row's first aligned address and after its last are done one by one.
//
// History, H200, % of device-to-device copy (4.23 TB/s):
//   v1 the seed's mapping, one thread per dx element: f32 2x2 93%, 2x1 59%; f16 2x2 49%,
//      2x1 20% (2-byte stores). (PyTorch 2.11: f32 2x2 70%, f16/bf16 2x2 38%.)
//   v2 this file: 16-byte dx stores, warp per row.
template <typename D, int SCALE_H, int SCALE_W, int BLOCK_IW>
__device__ void upsample_nearest2d_backward(const D *dy, D *dx, int B, int C, int H, int W, int OH, int OW)
{
    typedef typename tocha::accumulator<D>::type A;
    const int VEC = tocha::vec16<D>::n;
    const int WARPS = BLOCK_IW / 32;
    const long long rows = (long long)B * C * H;
    const int lane = threadIdx.x & 31;
    const long long stride = (long long)gridDim.x * WARPS;
    for (long long row = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5); row < rows; row += stride) {
        const long long plane = row / H;
        const int ih = (int)(row - plane * H);
        const D *src = dy + (plane * OH + (long long)ih * SCALE_H) * OW;
        D *out = dx + row * (long long)W;
        const int head = tocha::head_to_16(out, W);
        const int vectors = (W - head) / VEC;
        const int tail = head + vectors * VEC;
        // Single elements: the head and the tail of the row.
        const int single = lane < head ? lane : tail + lane - head;
        if (lane < head + (W - tail)) {
            A sum = A(0);
#pragma unroll
            for (int i = 0; i < SCALE_H; ++i)
#pragma unroll
                for (int j = 0; j < SCALE_W; ++j)
                    sum += tocha::widen<A>(src[(long long)i * OW + (long long)single * SCALE_W + j]);
            out[single] = tocha::narrow<D>(sum);
        }
        for (int v = lane; v < vectors; v += 32) {
            const int iw0 = head + v * VEC;
            A sum[tocha::vec16<D>::n];
#pragma unroll
            for (int e = 0; e < VEC; ++e) sum[e] = A(0);
#pragma unroll
            for (int i = 0; i < SCALE_H; ++i) {
                const D *r = src + (long long)i * OW + (long long)iw0 * SCALE_W;
#pragma unroll
                for (int e = 0; e < VEC; ++e)
#pragma unroll
                    for (int j = 0; j < SCALE_W; ++j) sum[e] += tocha::widen<A>(r[e * SCALE_W + j]);
            }
            tocha::pack<D, tocha::vec16<D>::n> p;
#pragma unroll
            for (int e = 0; e < VEC; ++e) p.v[e] = tocha::narrow<D>(sum[e]);
            tocha::store_pack(out + iw0, p);
        }
    }
}
