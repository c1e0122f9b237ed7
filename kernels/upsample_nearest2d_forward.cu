// upsample_nearest2d_forward.cu: nearest-neighbour 2-D upsampling, NCHW.
//
//   x: [B, C, H, W]  ->  y: [B, C, OH = H * SCALE_H, OW = W * SCALE_W]
//   y[b, c, oh, ow] = x[b, c, oh / SCALE_H, ow / SCALE_W]      (integer division)
//
// Mapping (v2): each warp writes whole output rows, a row being one (b, c, oh); the CTA's
// BLOCK_OW threads are BLOCK_OW / 32 warps, so BLOCK_OW sets how many rows a CTA writes at
// once. grid.x = ceil(rows / warps per CTA); a grid-stride loop covers what a grid cannot.
// Within a row each lane writes 16-byte vectors (16 / sizeof(D) elements) at 16-byte aligned
// addresses; the few elements before the row's first aligned address and after its last are
// written one by one. Loads are plain: neighbouring lanes read neighbouring inputs, so each
// input byte comes from DRAM once and is reused from L1.
// Every offset is 64-bit: tensors past 2^31 elements are addressed correctly.
//
// History, H200, 512 MB moved per case, % of device-to-device copy (4.23 TB/s):
//   v1 the seed's mapping: one thread per output element, one CTA per (row, BLOCK_OW tile).
//      f32 2x2 24.9%, f16 2x2 10.0%, u8 2x2 5.0%: 4-, 2- and 1-byte stores leave most of each
//      memory transaction unused. (PyTorch 2.11: 45.1%, 26.3%, 14.4%.)
//   v2 16-byte stores, warp per row: no gain at first (f32 2x2 61%): the SASS showed the
//      compiler had split the struct store into 32-bit stores.
//   v3 this file: the same with an explicit 128-bit store (st.global.v4): f32 2x2 84%,
//      f16 2x2 88%, f16 1x2 91%, u8 2x2 63% (sixteen 1-byte loads per store) at W = 1024;
//      widths that are not multiples of 16 (1020, 1023) 55-73%, reason not yet measured.
template <typename D, int SCALE_H, int SCALE_W, int BLOCK_OW>
__device__ void upsample_nearest2d_forward(const D *x, D *y, int B, int C, int H, int W, int OH, int OW)
{
    const int VEC = tocha::vec16<D>::n;
    const int WARPS = BLOCK_OW / 32;
    const long long rows = (long long)B * C * OH;
    const int lane = threadIdx.x & 31;
    const long long stride = (long long)gridDim.x * WARPS;
    for (long long row = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5); row < rows; row += stride) {
        const long long plane = row / OH;
        const int oh = (int)(row - plane * OH);
        const D *in = x + (plane * H + oh / SCALE_H) * (long long)W;
        D *out = y + row * (long long)OW;
        const int head = tocha::head_to_16(out, OW);
        if (lane < head) out[lane] = in[lane / SCALE_W];
        const int vectors = (OW - head) / VEC;
        for (int v = lane; v < vectors; v += 32) {
            const int ow0 = head + v * VEC;
            tocha::pack16<D> p;
#pragma unroll
            for (int e = 0; e < VEC; ++e) p.set(e, in[(ow0 + e) / SCALE_W]);
            tocha::store_pack(out + ow0, p);
        }
        const int tail = head + vectors * VEC;
        if (lane < OW - tail) out[tail + lane] = in[(tail + lane) / SCALE_W];
    }
}
