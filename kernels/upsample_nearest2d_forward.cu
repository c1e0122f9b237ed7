// upsample_nearest2d_forward.cu: nearest-neighbour 2-D upsampling, NCHW.
//
//   x: [B, C, H, W]  ->  y: [B, C, OH = H * SCALE_H, OW = W * SCALE_W]
//   y[b, c, oh, ow] = x[b, c, oh / SCALE_H, ow / SCALE_W]      (integer division)
//
// Grid (the seed's mapping, made safe for every shape): one CTA per (row, ow-tile), where a
// row is one (b, c, oh) and a tile BLOCK_OW output columns, one thread each.
//   blockIdx.x            = ow tile          (num_ow_tiles = ceil(OW / BLOCK_OW))
//   blockIdx.y + z * gridDim.y = row = (b * C + c) * OH + oh
// Rows are split over y and z so that no grid dimension overflows (65535 each), and every
// offset is 64-bit, so tensors past 2^31 elements are addressed correctly.
//
// v1 (this file): the seed's one-element-per-thread mapping.
template <typename D, int SCALE_H, int SCALE_W, int BLOCK_OW>
__device__ void upsample_nearest2d_forward(const D *x, D *y, int B, int C, int H, int W, int OH, int OW)
{
    const long long rows = (long long)B * C * OH;
    const long long row = blockIdx.y + (long long)blockIdx.z * gridDim.y;
    const int ow = blockIdx.x * BLOCK_OW + threadIdx.x;
    if (row >= rows || ow >= OW) return;
    const long long plane = row / OH; // b * C + c
    const int oh = (int)(row - plane * OH);
    const int ih = oh / SCALE_H, iw = ow / SCALE_W;
    y[row * OW + ow] = x[(plane * H + ih) * W + iw];
}
