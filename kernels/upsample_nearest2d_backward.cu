// upsample_nearest2d_backward.cu: the gradient of nearest-neighbour 2-D upsampling, NCHW.
//
//   dy: [B, C, OH = H * SCALE_H, OW = W * SCALE_W]  ->  dx: [B, C, H, W]
//   dx[b, c, ih, iw] = sum over i < SCALE_H, j < SCALE_W of dy[b, c, ih * SCALE_H + i, iw * SCALE_W + j]
//
// A gather: each dx element is the only reader of its SCALE_H x SCALE_W block of dy, so it
// is written exactly once, with no atomics (dx needs no zeroing) and a fixed summation order
// (i, then j: deterministic). The sum is kept in tocha::accumulator<D> (f32 for f16 and bf16).
//
// Mapping: a warp's work item is one segment of a dx row (with SCALE_H == 1, of the whole dx
// taken as one row: v11 below), a row being one (b, c, ih) and a segment 32 * K *
// TOCHA_UPSAMPLE_SEGMENT(_SHORT) elements of it; BLOCK_IW / 32 warps per CTA, grid.x =
// ceil(rows * segments / warps per CTA), grid-stride beyond. Reading dy is most of the
// traffic, so the mapping serves the loads: each lane takes K consecutive dx elements, K = 16
// / (SCALE_W * sizeof(D)) (at least 1), so that its share of each dy row is 16 bytes, read
// with one 16-byte load when the dy row is 16-byte aligned (a warp then reads 512 contiguous
// bytes per instruction), else with 8-byte loads when it is 8-byte aligned, else (when it is
// a multiple of 4 bytes) from the 4-byte words around it, else element by element. The lanes'
// runs start after the dx row's first few elements, up to its first boundary of K * sizeof(D)
// bytes when that is 4, 8 or 16, so that each lane stores its K dx elements at once; those
// first elements and the ones after the row's last whole run are summed one per lane by the
// row's first and last segments.
//
// History, H200, % of device-to-device copy (4.23 TB/s):
//   v1 the seed's mapping, one thread per dx element: f32 2x2 93%, 4x4 101%, 2x1 59%;
//      f16 2x2 49%, 2x1 20% (2-byte stores, 4-byte loads). (PyTorch 2.11: f32 2x2 70%,
//      f16/bf16 2x2 38%.)
//   v2 16-byte dx stores, warp per row: f32 2x2 92%, 2x1 95%, but 4x4 49% and f16 4x4 25%:
//      a lane reading 16 x SCALE_W consecutive bytes per dy row strides the warp's loads
//      across 32 x 64 bytes, and L1 serves each sector several times.
//   v3 loads first, as above: f32 2x2 90%, 4x4 77%, f16 2x2 92%, 4x4 85%, but f16 2x1 41%:
//      its eight 2-byte dx stores per lane cost more than v2's one 16-byte store.
//   v4 v3, and dx stored 8 or 16 bytes at once where a lane's elements allow: f16 2x1 93% at
//      W = 1024, but 42% at W = 1023, where every other dy row is not 16-byte aligned and
//      falls back to loads of single elements.
//   v5 such rows take the widest aligned load (8 or 4 bytes) instead: f16 2x1 W=1023 47%,
//      but f32 3x3 70% and 4x4 58% (from 96% and 77%): 4-byte loads through the read-only
//      path are slower than plain ones, and a warp per whole row leaves too few warps when
//      rows are few and long (4x4 f32: 7,700 rows for 8,448 warp slots).
//   v6 no 4-byte path; work items of row segments instead of whole rows: f32 95.9%, f16 83.8%
//      (medians), but f16 2x1 W=1023 43%, 1x2 W=1023 68%. Loading those element-aligned dy
//      runs from shifted words (one load per 4 bytes) left them where they were (43%, 68%):
//      the dx side is the cost there, eight 2-byte stores per lane in 16-byte strides.
//      Prediction for v7: lanes aligned to the dx row's 16-byte boundaries store 16 bytes at
//      once; f16 2x1 W=1023 near its W=1024 figure (92%).
//   v7 lanes' runs start on the dx row's boundaries, with launch bounds (32 registers:
//      without them v7 took 37 and lost 5-6 points on 2x2). f16 2x1 W=1023 43% -> 79%, 1x2
//      W=1023 68% -> 92%, f16 3x3 80% -> 92%; medians f32 95.7%, f16 91.7%
//      (results/2026-11-30-h200-c907d4a).
//   v8 dx stored with the streaming hint (st.global.cs: written once, never read
//      here): +0.2-1.5 points, f16 2x1 W=1023 78.7% -> 80.2%, f16 2x2 W=1023 89.7% -> 90.5%
//      (results/2026-11-30-h200-ab-cache-hints). Shifted runs load their words through the
//      read-only path like the aligned ones (within 0.3 points). Fetching 256 bytes into L2
//      per load (the forward's hint) lost up to 3 points here (4x4 W=1020/1023).
//   v9 work items half as long (TOCHA_UPSAMPLE_SEGMENT_SHORT) where a lane reads
//      several dy rows in whole 16-byte loads (2x2, 4x4, 2x1): twice the warps, each with
//      half the rows' loads to wait on; 4x4 +2.6-5.6 points (f16 4x4 W=1023 86.2% -> 91.8%),
//      2x1 +2-5.5 (f16 2x1 W=1020 83.7% -> 88.8%), 2x2 +1.5-2.6. 1x2 (one dy row) lost 1.4-4.8
//      with short items and 3x3 (12-byte runs) moved -1.3 to +0.9, so they keep the long
//      one. Medians f32 96.7%, f16/bf16 91.9% (results/2026-11-30-h200-220945b).
//   v10 a row's elements after its last whole run summed one per lane, as its head
//      is, where the last run's lane did them element after element (K one-element stores,
//      each an L2 request, and SCALE_H * K * SCALE_W single loads, on every row whose width is
//      not whole runs; the code also spilled f16 2x1, 2x2 and 4x4 at 32 registers, and no longer
//      does); a lane's K dx in one 4-byte store where they make 4 bytes (f16 3x3). Over the 45
//      cases 30 better, none worse (results/2026-11-30-h200-ab-tail/ab-tail.txt): f16 2x1
//      W=1023 85.7% -> 91.8%, W=1024 94.0% -> 98.5%, f16 2x2 W=1023 90.1% -> 93.1%, f16 4x4
//      W=1023 91.8% -> 94.8%; the 4-byte stores +0.5-0.7 on f16/bf16 3x3 at W = 1020/1023.
//      Tried and not kept: the runs on the 128-byte line grid (as the forward's vectors, the
//      lanes before the row idle in its first step): 0.5-6 points worse on most odd widths
//      (f16 2x2 W=1023 93.2% -> 87.9%), and it spilled f16 2x1 again (ab-line-grid.txt).
//   v11 one dy row per dx row (SCALE_H == 1) as one row of the whole tensor (dx's
//      element i sums dy's SCALE_W elements from i * SCALE_W whatever its row), cut into items
//      that are rows of their own, so that no row's ends cost single elements or partial runs:
//      every 1x2 case 99.5-99.8% (W = 1020/1023 from 93.0-97.9%; results/2026-11-30-h200-ab-flat/
//      ab-flat-backward-1x2.txt). The forward does the same (upsample_flat).
//      Tried and not kept: four dx elements a lane for f16/bf16 3x3 (24 bytes of each dy row,
//      8-byte stores): f16 W=1020 90.4% -> 87.6%, W=1023 88.6% -> 87.5%; it spilled 16 bytes
//      (results/2026-11-30-h200-ab-k4-ld8/ab-backward-k4.txt).
//      Then: 40 registers for f32 with SCALE_W == 3 (TOCHA_ENTRY_BOUNDS): f32 3x3 +0.9-2.4.
//      Tried and not kept: L2 256-byte fetches for the 12-byte runs of 3x3 (within 0.4 points);
//      the word past a shifted run taken from the next lane by a shuffle (f16 3x3 W=1023 88.4%
//      -> 85.0%, f32 3x3 -14: a lane waits on its neighbour's load; ab-lanes-shuffle.txt).
//   v12 this file: an item's dy rows from its dx row alone (row * SCALE_H * OW, as OH = H *
//      SCALE_H), where each item took (b, c, ih) apart by a 64-bit division first: 16 of the 36
//      cases of several rows +0.5-1.2, none worse (f16 3x3 W=1023 87.8% -> 88.6%, bf16 2x2 W=1023
//      92.7% -> 93.8%; results/2026-11-30-h200-ab-item-split/ab-bwd-mend.txt). The item's own
//      division (item / segs) stays: taken in 32 bits where the item count fits them, with the
//      64-bit one inline or out of line for the rest, the 2x1, 2x2 and 4x4 kernels spilled 12-64
//      bytes at 32 registers; by a double reciprocal, every kernel of several rows 16-32 bytes
//      (neither run; the forward's spilled too, with segs 1 taken apart: u8 3x3, 68 bytes).
// Adds a lane's run of K * SCALE_W dy elements at r into sum[K], in loads of LW bytes.
template <int LW, int K, int SCALE_W, typename D, typename A>
__device__ __forceinline__ void upsample_nearest2d_backward_run(const D *r, A *sum)
{
    const int PER = LW / (int)sizeof(D); // elements per load
#pragma unroll
    for (int g = 0; g < K * SCALE_W / PER; ++g) {
        unsigned w[4];
        tocha::load_words<LW>(r + g * PER, w);
#pragma unroll
        for (int q = 0; q < PER; ++q) sum[(g * PER + q) / SCALE_W] += tocha::widen<A>(tocha::element_of<D>(w, q));
    }
}

// The entry point's launch bounds: BLOCK threads per CTA and room for 2048 threads per SM,
// so at most 32 registers a thread. A memory-bound kernel needs every warp it can get to keep
// loads in flight; without the bound v7 of the backward took 37 registers (25 CTAs of 64 per
// SM, not 32) and lost 5-6 points on 2x2. But 4-byte elements with SCALE_W == 3 (f32
// measured: a lane's one dx element from 12-byte runs): 1536 threads, 40 registers, +0.9-2.4
// points on 3x3 (W=1023 91.5% -> 93.9%), where f16/bf16 3x3 lost 10 at 40 registers
// (results/2026-11-30-h200-ab-bwd-3x3/ab-fetch256-registers40.txt).
#define TOCHA_ENTRY_BOUNDS(D, SCALE_H, SCALE_W, BLOCK) \
    __launch_bounds__(BLOCK, (sizeof(D) == 4 && (SCALE_W) == 3 ? 1536 : 2048) / (BLOCK))

// A lane's share of a dx row: K consecutive dx elements, K = 16 / (SCALE_W * sizeof(D)) (at
// least 1), so that its run of each dy row is RUN bytes (16 where K * SCALE_W fills them).
// SHIFTED_LOADS: a shifted run can be loaded as the words around it (4 to 16 bytes, whole
// words), SPAN_BYTES wide (else a placeholder 4 for the branch that never runs). RUN_STORES:
// the K dx make BYTES = 4, 8 or 16 bytes, stored at once from the row's first boundary of BYTES.
template <typename D, int SCALE_W> struct backward_plan {
    static const int K = tocha::vec16<D>::n / SCALE_W > 0 ? tocha::vec16<D>::n / SCALE_W : 1;
    static const int RUN = K * SCALE_W * (int)sizeof(D);
    static const bool SHIFTED_LOADS = RUN % 4 == 0 && RUN <= 16;
    static const int SPAN_BYTES = SHIFTED_LOADS ? RUN : 4;
    static const int BYTES = K * (int)sizeof(D);
    static const bool RUN_STORES = BYTES == 4 || BYTES == 8 || BYTES == 16;
};

// Segment `seg` of `segs` (SEG dx elements each, from the row's first boundary of a run's bytes;
// the last takes the rest) of the dx row `out` of W elements, whose SCALE_H dy rows of OW
// elements start at `src`; last_row: src's last row is dy's last (its shifted runs then check
// that their words end inside it).
template <typename D, int SCALE_H, int SCALE_W, int SEG>
__device__ __forceinline__ void upsample_nearest2d_backward_segment(const D *src, D *out, int W, int OW, int seg, int segs, bool last_row, int lane)
{
    typedef typename tocha::accumulator<D>::type A;
    typedef backward_plan<D, SCALE_W> plan;
    const int K = plan::K, RUN = plan::RUN, SPAN_BYTES = plan::SPAN_BYTES, BYTES = plan::BYTES;
    const bool SHIFTED_LOADS = plan::SHIFTED_LOADS, RUN_STORES = plan::RUN_STORES;
    // dx elements outside the lanes' whole runs: before the row's first boundary of a run's
    // bytes (when that is 4, 8 or 16) and after its last whole run, each summed by a lane of
    // the row's first or last segment. The tail one per lane (in one store instruction)
    // rather than by the last run's lane element after element: that took K stores of one
    // element each and SCALE_H * K * SCALE_W single loads, each a warp instruction and the
    // stores each an L2 request, on every row whose width is not whole runs.
    const int head = RUN_STORES ? tocha::head_to<(RUN_STORES ? BYTES : 4)>(out, W) : 0;
    const int runs_end = head + (W - head) / K * K;
    // Both are under K <= 16 elements: lanes 0-15 take the head, 16-31 the tail (a row of one
    // segment has both).
    const int single = lane < 16 ? (seg == 0 && lane < head ? lane : -1)
                                 : (seg == segs - 1 && runs_end + lane - 16 < W ? runs_end + lane - 16 : -1);
    if (single >= 0) {
        A sum = A(0);
#pragma unroll
        for (int i = 0; i < SCALE_H; ++i)
#pragma unroll
            for (int j = 0; j < SCALE_W; ++j)
                sum += tocha::widen<A>(src[(long long)i * OW + (long long)single * SCALE_W + j]);
        out[single] = tocha::narrow<D>(sum);
    }
    const int iw_end = seg == segs - 1 ? runs_end : tocha::min_int(runs_end, head + (seg + 1) * SEG);
    for (int iw0 = head + seg * SEG + lane * K; iw0 < iw_end; iw0 += 32 * K) {
        A sum[K];
#pragma unroll
        for (int e = 0; e < K; ++e) sum[e] = A(0);
#pragma unroll
        for (int i = 0; i < SCALE_H; ++i) {
            const D *r = src + (long long)i * OW + (long long)iw0 * SCALE_W;
            // The widest load the row's alignment allows (the same for every lane).
            if (RUN % 16 == 0 && tocha::aligned_to(r, 16)) {
                upsample_nearest2d_backward_run<16, K, SCALE_W>(r, sum);
            } else if (RUN % 8 == 0 && tocha::aligned_to(r, 8)) {
                upsample_nearest2d_backward_run<8, K, SCALE_W>(r, sum);
            } else if (SHIFTED_LOADS &&
                       (!(last_row && i == SCALE_H - 1) ||
                        tocha::span_fits<SPAN_BYTES>(r, src + (long long)i * OW + OW))) {
                // Only element-aligned: the words around the run, shifted into place.
                unsigned w[4];
                tocha::load_span<SPAN_BYTES>(r, w);
#pragma unroll
                for (int q = 0; q < K * SCALE_W; ++q)
                    sum[q / SCALE_W] += tocha::widen<A>(tocha::element_of<D>(w, q));
            } else {
#pragma unroll
                for (int e = 0; e < K; ++e)
#pragma unroll
                    for (int j = 0; j < SCALE_W; ++j)
                        sum[e] += tocha::widen<A>(r[e * SCALE_W + j]);
            }
        }
        // dx: the lane's K elements in one store where they make 4, 8 or 16 bytes (aligned:
        // the runs start at the row's first boundary of that many bytes), else one by one.
        if (RUN_STORES) {
            tocha::pack16<D> p;
#pragma unroll
            for (int e = 0; e < K; ++e) p.set(e, tocha::narrow<D>(sum[e]));
            tocha::store_words<(RUN_STORES ? BYTES : 4), true>(out + iw0, p);
        } else {
#pragma unroll
            for (int e = 0; e < K; ++e) out[iw0 + e] = tocha::narrow<D>(sum[e]);
        }
    }
}

template <typename D, int SCALE_H, int SCALE_W, int BLOCK_IW>
__device__ void upsample_nearest2d_backward(const D *dy, D *dx, int B, int C, int H, int W, int OH, int OW)
{
    typedef backward_plan<D, SCALE_W> plan;
    const int K = plan::K;
    const int WARPS = BLOCK_IW / 32;
    // dx elements per work item: the short item (tocha.cuh) where a lane reads several dy rows
    // in whole 16-byte loads.
    const int SEG = 32 * K * (SCALE_H > 1 && plan::RUN == 16 ? TOCHA_UPSAMPLE_SEGMENT_SHORT : TOCHA_UPSAMPLE_SEGMENT);
    const int lane = threadIdx.x & 31;
    if (SCALE_H == 1) {
        // One dy row per dx row: rows are contiguous in both and OW = W * SCALE_W, so dx's
        // element i, counted over the whole tensor, is the sum of dy's SCALE_W elements from
        // i * SCALE_W whatever its row: the launch is one row of n elements. Item 0 is its head
        // and first segment, each later item one segment (SEG elements from the head, each
        // starting on a run's boundary), the last the rest; each is a row of its own to
        // upsample_nearest2d_backward_segment, so that no row's ends cost single elements.
        const long long n = (long long)B * C * H * W;
        const int head = plan::RUN_STORES ? tocha::head_to<(plan::RUN_STORES ? plan::BYTES : 4)>(dx, n) : 0;
        const long long items = n > head + SEG ? 1 + (n - head - 1) / SEG : 1;
        tocha::for_each_item<WARPS>(items, 1, [&](long long item, int, bool) {
            const long long base = item == 0 ? 0 : head + item * SEG;
            const int width = (int)tocha::min_ll(n - base, item == 0 ? head + SEG : SEG);
            upsample_nearest2d_backward_segment<D, 1, SCALE_W, SEG>(dy + base * SCALE_W, dx + base, width, width * SCALE_W, 0, 1,
                                                                    item >= items - 2, lane);
        });
        return;
    }
    const int segs = tocha::max_int(1, (W + SEG - 1) / SEG);
    tocha::for_each_item<WARPS>((long long)B * C * H, segs, [&](long long row, int seg, bool last_row) {
        // dx row `row` is (b, c, ih); its dy rows start at (b, c, ih * SCALE_H), as OH = H * SCALE_H.
        upsample_nearest2d_backward_segment<D, SCALE_H, SCALE_W, SEG>(dy + row * SCALE_H * (long long)OW, dx + row * (long long)W,
                                                                      W, OW, seg, segs, last_row, lane);
    });
}
