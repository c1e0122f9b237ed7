// upsample_nearest2d_backward.cu: the gradient of nearest-neighbour 2-D upsampling, NCHW.
//
//   dy: [B, C, OH = H * SCALE_H, OW = W * SCALE_W]  ->  dx: [B, C, H, W]
//   dx[b, c, ih, iw] = sum over i < SCALE_H, j < SCALE_W of dy[b, c, ih * SCALE_H + i, iw * SCALE_W + j]
//
// A gather: each dx element is the only reader of its SCALE_H x SCALE_W block of dy, so it
// is written exactly once, with no atomics (dx needs no zeroing) and a fixed summation order
// (deterministic). The sum is kept in tocha::accumulator<D> (f32 for f16 and bf16).
//
// Grid: one CTA per (row, iw-tile), a row being one (b, c, ih) and a tile BLOCK_IW input
// columns, one thread each; rows split over grid y and z as in the forward kernel.
template <typename D, int SCALE_H, int SCALE_W, int BLOCK_IW>
__device__ void upsample_nearest2d_backward(const D *dy, D *dx, int B, int C, int H, int W, int OH, int OW)
{
    typedef typename tocha::accumulator<D>::type A;
    const long long rows = (long long)B * C * H;
    const long long row = blockIdx.y + (long long)blockIdx.z * gridDim.y;
    const int iw = blockIdx.x * BLOCK_IW + threadIdx.x;
    if (row >= rows || iw >= W) return;
    const long long plane = row / H;
    const int ih = (int)(row - plane * H);
    const D *src = dy + (plane * OH + (long long)ih * SCALE_H) * OW + (long long)iw * SCALE_W;
    A sum = A(0);
#pragma unroll
    for (int i = 0; i < SCALE_H; ++i)
#pragma unroll
        for (int j = 0; j < SCALE_W; ++j)
            sum += tocha::widen<A>(src[(long long)i * OW + j]);
    dx[row * W + iw] = tocha::narrow<D>(sum);
}
