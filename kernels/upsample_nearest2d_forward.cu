// upsample_nearest2d_forward.cu: nearest-neighbour 2-D upsampling, NCHW.
//
//   x: [B, C, H, W]  ->  y: [B, C, OH = H * SCALE_H, OW = W * SCALE_W]
//   y[b, c, oh, ow] = x[b, c, oh / SCALE_H, ow / SCALE_W]      (integer division)
//
// One output row per input row (SCALE_H == 1): the whole tensor is one 1-D upsampling (y's
// element o is x's o / SCALE_W whatever its row), its items SEGMENT warp steps of y's own
// 16-byte slots on its 128-byte line grid (upsample_flat, v13 below). Otherwise:
// Mapping: a warp's work item is one segment of an input row, a row being one (b, c, ih), and
// the item writes that segment of the row's SCALE_H output rows (oh = ih * SCALE_H + r), so
// the input is read once. A segment is 32 * TOCHA_UPSAMPLE_SEGMENT(_SHORT) 16-byte output vectors
// (segments = max(1, floor(OW / vector elements) / that, rounded up)), so that short and long
// rows alike give the GPU enough independent warps. The CTA's BLOCK_OW threads are
// BLOCK_OW / 32 warps; grid.x = ceil(B * C * H * segments / warps per CTA); a grid-stride
// loop covers what a grid cannot.
// Within an output row: the elements up to the first 16-byte boundary one by one, then
// 16-byte vectors (16 / sizeof(D) elements) with lanes side by side on the 128-byte line grid,
// so that every store instruction of the warp fills whole lines, then the last few elements
// one by one. A vector's inputs (16 / sizeof(D) / SCALE_W of them) come in one 4-, 8- or
// 16-byte load (shifted into place when only element-aligned), from an 8-byte window for
// 3x3-style scales, else one by one. Every offset is 64-bit.
// Row ends (v14, row_end_stores): where rows are stored by upsample_rows_segment (not whole
// lines, or y off 16 bytes), a row's last single elements and the next row's first, the 16
// bytes around its end, go out in one store of the row's last segment; not for 2x2, rows
// shorter than two vectors, or row images.
// Bulk copies (sm_90 on, when the launch gives each warp a buffer in dynamic shared memory;
// the host does so for several output rows that are whole 16-byte vectors but not whole
// lines): the segment's vectors are built once into shared memory and the TMA copies them to
// each row (upsample_rows_bulk), instead of each row being built and stored on its own.
// Row images (when the launch gives the same buffer; the host does so for four or more output
// rows that are not whole 16-byte vectors): the segment's columns are built once into shared
// memory and each row's lanes read their vectors from it at the row's own place against 16
// bytes, then store them as the per-row path does (upsample_rows_image).
//
// History, H200, 512 MB moved per case, % of device-to-device copy (4.23 TB/s):
//   v1 the seed's mapping: one thread per output element, one CTA per (row, BLOCK_OW tile).
//      f32 2x2 24.9%, f16 2x2 10.0%, u8 2x2 5.0%: 4-, 2- and 1-byte stores leave most of each
//      memory transaction unused. (PyTorch 2.11: 45.1%, 26.3%, 14.4%.)
//   v2 16-byte stores, warp per row: no gain at first (f32 2x2 61%): the SASS showed the
//      compiler had split the struct store into 32-bit stores.
//   v3 the same with an explicit 128-bit store (st.global.v4): f32 2x2 84%, f16 2x2 87%,
//      f16 1x2 90%, u8 2x2 64% (sixteen 1-byte loads per store) at W = 1024; widths that are
//      not multiples of 16 (1020, 1023) 53-73%. Prediction for v4: a row that starts inside
//      a 128-byte line makes each warp store touch 5 lines instead of 4 (25% more L2
//      requests), and loads of single elements are most of the instructions.
//   v4 warp stores start on 128-byte boundaries; inputs loaded as vectors: unaligned widths
//      +5-10 points (f32 2x2 W=1023 67%, f16 2x2 W=1020 77%), u8 2x2 81%, u8 2x1 92%.
//   v5 work items of row segments instead of whole rows: f32 2x2 86.7% (W=1024), 77.5%
//      (W=1020); f32 1x2 89.5%; u8 3x3 48.7% (results/2026-11-30-h200-8b00370).
//      Prediction for v6: the SCALE_H output rows of one input row were separate items, so
//      each read its input again through L2 (1x2, which reads it once, is the fastest case);
//      L2 throughput was at 89%. One item per input row segment, writing all SCALE_H rows,
//      reads the input once: 2x2 and 2x1 closer to 1x2.
//   v6 a work item is one segment of an input row and writes its SCALE_H output rows; when
//      those rows lie alike against 128-byte lines (SCALE_H == 1, or a row is a whole number
//      of lines) each vector is built once and stored SCALE_H times, else the rows are
//      written one after another and their input reloads hit L1. f32 2x2 91.5% (W=1024),
//      3x3 88.6%, u8 3x3 84.3%; medians f32 83%, f16 82%, u8 78%. Storing the vectors to
//      rows that lie differently (16-byte aligned, warp stores over 5 lines) was 3-11 points
//      worse. Still short: u8 and f16 rows of odd width (scalar input loads, up to 127
//      single-byte head stores per row), 3x3 (inputs loaded one by one).
//   v7 single elements only up to the row's first 16-byte boundary, 16-byte
//      vectors from there (the first segment's lanes fill the partial line); element-aligned
//      input spans from the 4-byte words around them (tocha::load_span); for SCALE_W not
//      dividing the vector (3x3), an 8-byte input window with each element shifted out;
//      launch bounds (32 registers for SCALE_H == 1, else 40). u8 2x2 W=1023 61% -> 78%,
//      f16 3x3 W=1020 73% -> 75%, f32 1x2 W=1024 90.5% -> 92.4%; medians f32 84.0%, f16
//      84.3%, u8 81.5% (results/2026-11-30-h200-c907d4a).
//   v8 for 3x3-style scales each output word of a vector is one byte permute of the
//      8-byte window, its selector picked by the vector's place in its input element's run
//      (u8 3x3 W=1020 49% -> 78%, f16 3x3 W=1020 75% -> 80%); where measured better, each
//      lane builds four vectors before storing them (4x4 +1-6 points,
//      f32 2x1 +1-9, f32 3x3 +1.5-2); a row's vectors on the line grid from its first 16-byte
//      boundary, the partial first line taken in the first warp step instead of a step of
//      its own (u8 2x1 W=1020 83% -> 86%, f32 2x1 W=1023 83% -> 85%, most cases within a
//      point: that extra step was not what holds 1x2 W=1020 at 86%). Medians f32 85.2%, f16
//      84.3%, u8 83.3% (results/2026-11-30-h200-4d03ac2).
//      Tried and not kept: the output as one flat range with lines filled across rows' ends
//      (per-vector row tracking: 1x2 W=1024 92.5% -> 86.8%, u8 2x2 W=1020 81% -> 59%);
//      batches of two at 40 registers (within 1-3 points either way; spills at 32).
//   v9 three measured changes (A/B runs in results/2026-11-30-h200-ab-*):
//      (1) batched packs only where a row's spans are aligned, which leaves the batched loop
//      one load path, and batching for every multi-row f32/f16/bf16 case and u8 4x4: f32 2x2
//      W=1020 85% -> 90.4%, f16 2x2 W=1020 84.9% -> 90.4%, 4x4 +1-3.5; (2) the register
//      budget per case (forward_plan: 48 registers for f16/bf16 2x1); (3) cache hints: every
//      input load asks L2 for its 256-byte block (ld.global.nc.L2::256B; a warp's next loads
//      along the row then hit L2), and the multi-row stores of alike rows stream
//      (st.global.cs): 1x2 W=1020 f32 87.0% -> 90.2%, f16 85.7% -> 89.2%; u8 3x3 W=1020
//      78.5% -> 81.5%; f16 3x3 W=1020 83.8% -> 86.6%; 4x4 W=1023 +2.5.
//      Tried and not kept: a persistent grid (16 or 32 CTAs per SM, each warp looping over
//      items) with and without an L2 prefetch of the warp's next item: 2-31 points worse
//      everywhere; L1::no_allocate loads: up to 28 points worse (rows of non-alike widths
//      reload their inputs from L1); streaming stores for every row: 1x2, 2x1 and odd widths
//      1-3 points worse; streaming for non-alike rows of 2x2-4x4 too: +1 on f32/f16 W=1020,
//      -1.5 on u8 W=1023; block width 128 instead of 64: within 1 point.
//   v10 work items of several alike rows half as long (TOCHA_UPSAMPLE_SEGMENT_SHORT,
//      2 vectors per lane; results/2026-11-30-h200-ab-segment): every multi-row case at
//      W = 1024 +1.2-2.4 (f32 3x3 90.3% -> 92.3%, u8 3x3 89.6% -> 91.5%, u8 4x4 88.4% ->
//      90.0%); short items for every case lost up to 15 points on rows that are not alike,
//      long ones (8) lost everywhere. Every forward case at W = 1024 now meets 90%
//      (results/2026-11-30-h200-220945b). u8 3x3 at W = 1020/1023 measured 1.8-2.4 points
//      lower: the item count is one run-time division at the entry now (constant divisions
//      recovered it but spilled u8 2x2 at 40 registers, -8 points; not kept).
//      Since: the count by a shift (both lengths are powers of two) brought u8 3x3 back
//      (W=1020 79.3% -> 81.1%, W=1023 80.1% -> 81.3%; results/2026-11-30-h200-ab-segment).
//   v11 bulk copies for several output rows that are whole vectors but not whole
//      lines (results/2026-11-30-h200-ab-bulk): each segment is built once into shared memory
//      and the TMA copies it to every row (cp.async.bulk), where each row used to be built
//      and stored on its own. f32 2x2 W=1020 90.0% -> 94.3%, f32 3x3 W=1020 87.7% -> 91.8%,
//      f32 4x4 W=1023 86.0% -> 90.7%, f16 4x4 W=1020 85.7% -> 91.0%, u8 4x4 W=1020 84.8% ->
//      89.5%; 13 cases better, none worse. What the A/B runs taught, in order: static shared
//      memory in every launch cost every case that reloads inputs from L1 (3-12 points: the
//      carveout shrinks L1), hence dynamic shared memory given by the host only where used;
//      a copy whose shared-memory source and global destination lie differently against 32
//      bytes (16 bytes apart) runs 4-6 points slower, whether or not its destination is
//      aligned, hence the segment on each row's line grid and the second image one vector
//      on; alike rows (W = 1024) gained on 2x1 (+1) and lost on u8 2x2 (-3) and 3x3 (-0.5),
//      so they keep their stores. One buffer per warp: a warp does one item (but past 2^31
//      items), so a second buffer (tried first) only took shared memory. The simulator runs
//      this path too, lane 0 doing each warp's work (TOCHA_BULK_LANES).
//      Tried and not kept: bulk copies for rows of any width (each row's copy from its first
//      16-byte boundary, an image shifted by funnel shifts for each row that starts inside a
//      vector): correct, but 5-30 points slower, also on vector rows and on cases that do not
//      take the path (registers; docs/performance.md, "Bulk copies").
//   v12 row images for four or more output rows that are not whole vectors
//      (results/2026-11-30-h200-ab-image): each segment built once into shared memory, each
//      row's vectors read from it (aligned shared loads, funnel-shifted where the row starts
//      1-3 bytes off a word) and stored on the row's line grid. f16 and bf16 4x4 W=1023
//      83.5% -> 87.9%, u8 4x4 W=1023 83.3% -> 84.7%, W=1020 89.3% -> 89.7%. For two and three
//      rows the same path lost 3-30 points (f16 2x2 W=1023 86.7% -> 72.0%, f16 3x3 W=1020
//      85.4% -> 77.6%; u8 spilled at 40 registers): building a row again from L1 costs less
//      than the image's build, the warp's wait for it and its shared loads, until four rows
//      share one build.
//      Then: one-step items for several alike rows where they measured better (forward_plan's
//      alike_steps: four or more rows, u8 but 2x2): f32 4x4 W=1024 90.7% -> 91.7%, u8 4x4
//      89.8% -> 90.9%, u8 3x3 91.6% -> 92.6%, u8 2x1 92.8% -> 94.9%, f16/bf16 4x4 +0.7; none
//      worse by more than 0.5 (results/2026-11-30-h200-ab-steps).
//      Tried and not kept: lanes sharing their loads of shifted spans (each lane one aligned
//      load, its neighbour's by a shuffle, instead of two or three word loads): 3-18 points
//      worse wherever it ran (f16 2x2 W=1023 87.2% -> 75.4%, f32 2x1 W=1023 84.9% -> 78.1%) and
//      it spilled the 1x2 kernels (results/2026-11-30-h200-ab-lanes).
//   v13 one output row per input row (1x2) as one 1-D upsampling of the whole
//      tensor, on y's own line grid (upsample_flat): every warp store fills whole lines across
//      rows' ends, only y's two ends take single elements, and with x and y aligned every
//      span is an aligned load whatever the width. Every 1x2 case 92.0-92.6% (W = 1020/1023
//      from 83.2-90.4%: u8 W=1023 83.2% -> 92.0%, f16 W=1023 87.3% -> 92.6%; results/
//      2026-11-30-h200-ab-flat/ab-flat-1x2.txt). The flat range tried in v8 tracked each
//      vector's row and column for every scale and lost; with one row per input row there is
//      nothing to track.
//      Then: a shifted 16-byte span at an 8-byte boundary as two 8-byte loads (load_span): f32
//      2x1 W=1023 84.3% -> 85.6%, f16/bf16 2x1 W=1020 +0.4 (results/2026-11-30-h200-ab-k4-ld8).
//      Measured and not possible: the TMA cannot store rows that are not whole vectors (its
//      1-D tensor stores fault at destinations not 16-byte aligned; bench/tma_probe.cu,
//      results/2026-11-30-h200-tma-probe).
//   v14 row-end stores for rows apart (2x1, 3x3 and the like; not 2x2, where they
//      measured 0.7-2 points slower): the 16 bytes around a row's end, its last single elements
//      and the next row's first, go out in one store instruction of the row's last segment,
//      where each row stored its own from two warps. Probes first (results/2026-11-30-h200-row-
//      ends-probes): building each segment once for all rows apart measured within a point of
//      building each row, but rows of whole lines with y moved 1-15 bytes lost 3-9 points (f32
//      2x2 W=1024 93.5% -> 86.3%, u8 2x1 94.5% -> 85.9%), so the rows' ends are the cost. u8 2x1
//      W=1023 84.4% -> 87.1%, W=1020 86.9% -> 88.5%, f16/bf16 2x1 W=1023 +1.4-1.5, f16/bf16 3x3
//      +0.5-0.8 (results/2026-11-30-h200-row-ends/ab-row-ends.txt); f32 2x1 W=1024 93.2% -> 90.9%
//      in both runs (its alike loop's code changed; without row ends there, u8 2x1 spilled 28
//      bytes). Not kept: row ends for row images (4x4 W=1023 -4 to -14).
//   v15 rows of 16-byte spans (SCALE_W == 1) batched when the spans are shifted too,
//      and f16/bf16 2x1 at 64 registers (results/2026-11-30-h200-rows-apart-tries): f32 2x1
//      W=1023 85.9% -> 88.1%, W=1024 90.2% -> 92.8% (v14's loss back), f16/bf16 2x1 W=1020
//      88.0% -> 90.6-90.9%, W=1023 85.1% -> 82.7% (ab-batch-shifted-64.txt; at 48 registers
//      89.4% and 85.2%, ab-batch-shifted.txt). Batching every shifted span lost on 2x2 (f16
//      W=1023 87.3% -> 80.5%, ab-batch-shifted-all.txt). What led there: x moved with
//      y so that the spans stay aligned (bench/offsets.lua) takes back most of what rows whose
//      ends are not 16-byte boundaries lose, where the aligned spans are batched (f32 2x2 y+8
//      87.4% -> 93.1%, f16 2x1 y+2 86.5% -> 90.2%), and none of it for u8, never batched there
//      (u8 2x1 y+1 87.1% -> 87.6%). Tried and not kept, each against v14 on one machine: rows
//      apart as one range of y on its own line grid, every line written by one warp (as v13's
//      1x2; -8 to -25: each output row then reads its inputs again through L2, from another
//      warp); a row's last segment also storing the next row's first line (-1 to -7); the
//      single elements loaded before a segment's vectors and stored after them (-1.5 to -5;
//      the SASS had them hoisted); the 16 bytes around a row's end as one vector store, built
//      by one lane (-0.5 to -20) or gathered by shuffles (-0.5 to -3).
//   v16 this file: rows whose lanes take one pack at a time (u8 below 4x4, shifted spans of 2x2)
//      ask L1 for the lane's next span before loading this one (prefetch.global.L1): u8 2x1
//      W=1020 88.6% -> 91.7%, W=1023 87.1% -> 90.3%, f32 2x2 W=1023 89.1% -> 90.3%, f16/bf16 2x2
//      W=1023 +1.4-1.5, u8 2x2 +0.8-1.9; for 3x3 windows it lost 7 (u8 3x3 W=1020 81.6% ->
//      74.2%), so they do not (results/2026-11-30-h200-rows-apart-tries/ab-prefetch.txt).
//      Tried and not kept: the prefetch in the first row of each input row's rows alone (the
//      others reread from L1): within 0.5 on all 48 cases; with the 3x3 windows prefetching too,
//      u8 3x3 W=1020/1023 -4 (results/2026-11-30-h200-ab-item-split/ab-pf-first.txt): the windows'
//      loss is not the other rows' prefetches. upsample_flat's loop is for_each_item since
//      (within 0.5 on every 1x2 case, ab-flat-fei.txt); the loop of several rows stays written
//      out (through for_each_item u8 4x4 spilled 4 bytes and W=1023 lost 0.5-0.9 in three runs;
//      ab-main-loop.txt, ab-main-loop-u8.txt).
namespace tocha {

// The byte-permute selector of output word k of a vector whose first element is m outputs
// into its input element's run: byte b of the word is byte j of element e, which is input
// (m + e) / SCALE_W of the window, so window byte ((m + e) / SCALE_W) * sizeof(D) + j.
template <typename D, int SCALE_W>
__device__ __forceinline__ unsigned window_selector(int k, int m)
{
    unsigned sel = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
        const int e = (4 * k + b) / (int)sizeof(D), j = (4 * k + b) % (int)sizeof(D);
        sel |= (unsigned)((m + e) / SCALE_W * (int)sizeof(D) + j) << (4 * b);
    }
    return sel;
}

// How forward_pack loads a vector's inputs, for the paths that build packs: IN inputs per
// vector where SCALE_W divides the vector (else 0), IN_BYTES of them; SPAN when those bytes are
// one 4-, 8- or 16-byte load; WINDOW when SCALE_W does not divide the vector (3x3) but the
// inputs of any vector fit in 8 bytes.
template <typename D, int SCALE_W> struct pack_inputs {
    static const int VEC = vec16<D>::n;
    static const int IN = VEC % SCALE_W == 0 ? VEC / SCALE_W : 0;
    static const int IN_BYTES = IN * (int)sizeof(D);
    static const bool SPAN = IN_BYTES == 4 || IN_BYTES == 8 || IN_BYTES == 16;
    static const bool WINDOW = IN == 0 && sizeof(D) < 8 && ((SCALE_W + VEC - 2) / SCALE_W + 1) * sizeof(D) <= 8;
};

// The 16-byte pack of output elements ow0 .. ow0 + VEC - 1 of a row whose W inputs are `in`.
// SPAN (the vector's inputs can be IN_BYTES = 4, 8 or 16 contiguous bytes) and `whole` (they
// are: ow0 starts an input element): loaded at once, with one load when `aligned`, else from
// the words around them (in the input's last row, only when those words end inside it).
// WINDOW (SCALE_W does not divide VEC, as for 3x3, but the inputs any vector needs fit in 8
// bytes): the 8 bytes from its first input, when they lie in the row (the same check for
// their words in the last row), each element then shifted out of them. Otherwise one by one.
template <typename D, int SCALE_W, bool SPAN, bool WINDOW>
__device__ __forceinline__ pack16<D> forward_pack(const D *in, bool last_row, int W, int ow0, bool whole, bool aligned)
{
    const int VEC = vec16<D>::n;
    const int IN_BYTES = SPAN ? VEC / SCALE_W * (int)sizeof(D) : 4;
    pack16<D> p;
    const int i0 = ow0 / SCALE_W;
    if (SPAN && whole && (aligned || !last_row || span_fits<IN_BYTES>(in + i0, in + W))) {
        unsigned w[4];
        if (aligned)
            load_words<IN_BYTES, true>(in + i0, w);
        else
            load_span<IN_BYTES, true>(in + i0, w);
#pragma unroll
        for (int e = 0; e < VEC; ++e) p.set(e, element_of<D>(w, e / SCALE_W));
    } else if (WINDOW && i0 + 8 / (int)sizeof(D) <= W && (!last_row || span_fits<8>(in + i0, in + W))) {
        unsigned w[4];
        load_span<8, true>(in + i0, w);
        const int m = ow0 - i0 * SCALE_W; // ow0's place in its input element's run
        // Each output word is one byte permute of the window; its selector depends on m alone,
        // so the SCALE_W candidates are constants and m picks one.
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            unsigned sel = window_selector<D, SCALE_W>(k, 0);
#pragma unroll
            for (int mm = 1; mm < (SCALE_W <= 8 ? SCALE_W : 1); ++mm)
                if (m == mm) sel = window_selector<D, SCALE_W>(k, mm);
            if (SCALE_W > 8) sel = window_selector<D, SCALE_W>(k, m);
            p.w[k] = __byte_perm(w[0], w[1], sel);
        }
    } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) p.set(e, in[(ow0 + e) / SCALE_W]);
    }
    return p;
}

// Whether rows of OW elements take row-end stores (upsample_rows_segment): each row at least two
// vectors long, so that the 16 bytes from a row's last whole vector end inside the next row's
// head, and not 2x2, where they measured 0.7-2 points slower (f16 W=1023 86.7% -> 84.7%; 2x1 and
// 3x3 +0.7-2.6, results/2026-11-30-h200-row-ends). Rows whose ends are not 16-byte boundaries ran
// 4-9 points slower than rows that are, the single elements at either side of a row's end
// stored by two warps (measured with y moved off 16 bytes on whole-line rows;
// docs/performance.md, "Row ends").
template <typename D, int SCALE_H, int SCALE_W> __device__ __forceinline__ bool row_end_stores(int OW)
{
    return OW >= 2 * vec16<D>::n && !(SCALE_H == 2 && SCALE_W == 2);
}

// Writes segment `seg` of `segs` (SEG vector slots each) of ROWS output rows, `OW` elements
// apart, that all come from the input row `in`; the rows must lie alike against 128-byte
// lines when ROWS > 1. y_start: out's first row is y's first; group_end: out's last row is the
// last of in's SCALE_H rows, so that the next output row comes from the next input row (and
// there is none after the input's last row) rather than from `in`.
// Each lane builds BATCH packs (1, or forward_plan's batch) before it stores them; STREAM:
// the vectors are stored with the streaming hint (store_pack).
// A row: single elements up to its first 16-byte boundary (at most VEC - 1), then 16-byte
// vectors, then at most VEC - 1 single elements. The vectors sit in slots of the 128-byte
// line grid, slot 0 at the line boundary at or before the first vector, `skip` slots before
// it: lane l of a warp takes slot 32k + l, so every warp store fills whole lines, and the
// partial line at the row's start costs no warp step of its own.
// Row ends (row_end_stores): the 16 bytes from a row's last whole vector on hold its last
// single elements and the next row's first ones, and the row's last segment stores them all in
// one instruction, so that no 16 bytes of y are written by two warps.
template <typename D, int SCALE_H, int SCALE_W, int ROWS, int BATCH, bool STREAM, int SEG>
__device__ __forceinline__ void upsample_rows_segment(const D *in, bool last_row, D *out, int W, int OW, int seg, int segs, int lane,
                                                      bool y_start, bool group_end)
{
    const int VEC = pack_inputs<D, SCALE_W>::VEC, IN_BYTES = pack_inputs<D, SCALE_W>::IN_BYTES;
    const bool SPAN = pack_inputs<D, SCALE_W>::SPAN, WINDOW = pack_inputs<D, SCALE_W>::WINDOW;
    const int single = head_to<16>(out, OW);
    const int skip = slots_past_line(out + single);
    const int lined = single - skip * VEC;           // slot 0's column (negative when skip > 0)
    const int vectors = skip + (OW - single) / VEC; // slots up to the row's last whole vector
    const bool first = seg == 0, last = seg == segs - 1;
    // Whether every vector starts on an input element, and whether its inputs are then aligned
    // for one load: the same for all vectors of the row, each starting IN inputs after the last.
    const bool whole = SPAN && single % SCALE_W == 0;
    const bool aligned = whole && aligned_to(in + single / SCALE_W, SPAN ? IN_BYTES : 1);
    // A row's head singles are the previous row's to store (row_end_stores), but y's first.
    const bool ends = row_end_stores<D, SCALE_H, SCALE_W>(OW);
    if (first && lane < single) {
        const D v = in[lane / SCALE_W];
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
            if (!ends || (r == 0 && y_start)) out[(long long)r * OW + lane] = v;
    }
    const int v_end = last ? vectors : min_int(vectors, (seg + 1) * SEG);
    // One pack at a time: unbatched cases, and rows of shifted spans of two or more inputs per
    // vector (measured better so: batched, f16 2x2 W=1023 -7). Shifted spans of one input per
    // vector (SCALE_W == 1, 16-byte spans) are batched: with one pack in flight a lane waited
    // on each, and rows whose ends are not 16-byte boundaries lost 4-6 points more that way
    // than batched (bench/offsets.lua). This loop is kept apart from the batched one, which at
    // BATCH 1 would do the same work: that form spilled 16 bytes at 32 registers (f32 1x2).
    if (BATCH == 1 || (SPAN && !aligned && SCALE_W != 1)) {
        for (int v = seg * SEG + lane; v < v_end; v += 32) {
            if (v < skip) continue;
            const int ow0 = lined + v * VEC;
            // The lane's next span into L1 while this one loads (v16): u8 2x1 W=1020 88.6% ->
            // 91.7%, W=1023 87.1% -> 90.3%, f32 2x2 W=1023 89.1% -> 90.3%; not for windows
            // (u8 3x3 W=1020 81.6% -> 74.2%).
            if (SPAN && v + 32 < v_end) prefetch_l1(in + (ow0 + 32 * VEC) / SCALE_W);
            const pack16<D> p = forward_pack<D, SCALE_W, SPAN, WINDOW>(in, last_row, W, ow0, whole, aligned);
#pragma unroll
            for (int r = 0; r < ROWS; ++r) store_pack<STREAM>(out + (long long)r * OW + ow0, p);
        }
    } else {
        // All BATCH packs first, then their stores: BATCH loads in flight per lane. Spans here
        // are aligned (whole and aligned are SPAN), which leaves the compiler one load path,
        // but for SCALE_W == 1, whose shifted spans come here too.
        for (int v = seg * SEG + lane; v < v_end; v += 32 * BATCH) {
            pack16<D> p[BATCH];
#pragma unroll
            for (int u = 0; u < BATCH; ++u)
                if (v + 32 * u >= skip && v + 32 * u < v_end)
                    p[u] = forward_pack<D, SCALE_W, SPAN, WINDOW>(in, last_row, W, lined + (v + 32 * u) * VEC, SPAN, SCALE_W == 1 ? aligned : SPAN);
#pragma unroll
            for (int u = 0; u < BATCH; ++u)
                if (v + 32 * u >= skip && v + 32 * u < v_end) {
#pragma unroll
                    for (int r = 0; r < ROWS; ++r) store_pack<STREAM>(out + (long long)r * OW + lined + (v + 32 * u) * VEC, p[u]);
                }
        }
    }
    const int tail = lined + vectors * VEC;
    if (last && ends) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            // Lanes up to OW - tail take the row's last elements, the next ones up to the 16-byte
            // boundary the next row's head (y's last row has no next row).
            const D *after = r < ROWS - 1 || !group_end ? in : last_row ? nullptr : in + W;
            const int n = after ? (OW > tail ? VEC : 0) : OW - tail;
            if (lane < n) {
                const int c = tail + lane;
                out[(long long)r * OW + c] = c < OW ? in[c / SCALE_W] : after[(c - OW) / SCALE_W];
            }
        }
    } else if (last && lane < OW - tail) {
        const D v = in[(tail + lane) / SCALE_W];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) out[(long long)r * OW + tail + lane] = v;
    }
}

// The whole launch when each input row has one output row (SCALE_H == 1): rows are contiguous in
// x and in y and OW = W * SCALE_W, so y's element o, counted over the whole tensor, is x's
// element o / SCALE_W whatever its row, and the launch is one 1-D upsampling of n_in elements.
// Its vectors lie in slots of y's own 128-byte line grid (slot 0 at the line boundary at or
// before y's first 16-byte boundary, `skip` slots before it), a work item being SEG slots, so
// every warp store fills whole lines, rows' ends included; the only single elements are those
// before y's first 16-byte boundary and after its last whole vector (the first and the last
// item write them). Packs are built as in upsample_rows_segment, one at a time; each item
// rebases x to its first vector's input, so that the packs' columns are ints.
template <typename D, int SCALE_W, int SEG, int WARPS>
__device__ __forceinline__ void upsample_flat(const D *x, D *y, long long n_in, int lane)
{
    const int VEC = pack_inputs<D, SCALE_W>::VEC, IN_BYTES = pack_inputs<D, SCALE_W>::IN_BYTES;
    const bool SPAN = pack_inputs<D, SCALE_W>::SPAN, WINDOW = pack_inputs<D, SCALE_W>::WINDOW;
    const long long n = n_in * SCALE_W;
    const int single = head_to<16>(y, n);
    const int skip = slots_past_line(y + single);
    const long long lined = single - skip * VEC; // slot 0's element (negative when skip > 0)
    const long long slots = skip + (n - single) / VEC;
    const long long items = slots > SEG ? (slots + SEG - 1) / SEG : 1;
    // Every vector starts IN inputs after the last, so whether they start on an input element,
    // and are then aligned for one load, holds for all of them.
    const bool whole = SPAN && single % SCALE_W == 0;
    const bool aligned = whole && aligned_to(x + single / SCALE_W, SPAN ? IN_BYTES : 1);
    for_each_item<WARPS>(items, 1, [&](long long item, int, bool last_item) {
        const long long s0 = item * SEG;
        const long long i_base = (lined + max_ll(s0, skip) * VEC) / SCALE_W; // the item's first input
        const D *in = x + i_base;
        const long long c0 = i_base * SCALE_W;
        const int rest = (int)min_ll(n_in - i_base, 0x7fffffff); // inputs from `in` to x's end
        // Only the last vector's span or window can reach past x's end (by up to 3 bytes): the
        // last two items check theirs (the last may hold only single elements).
        const bool near_end = item >= items - 2;
        const int s_end = (int)min_ll(SEG, slots - s0);
        for (int s = lane; s < s_end; s += 32) {
            if (s0 + s < skip) continue;
            const long long e = lined + (s0 + s) * VEC;
            const pack16<D> p = forward_pack<D, SCALE_W, SPAN, WINDOW>(in, near_end, rest, (int)(e - c0), whole, aligned);
            store_pack<false>(y + e, p);
        }
        if (item == 0 && lane < single) y[lane] = x[lane / SCALE_W];
        const long long tail = lined + slots * VEC;
        if (last_item && lane < n - tail) y[tail + lane] = x[(tail + lane) / SCALE_W];
    });
}

#ifdef TOCHA_BULK_COPIES
// Segment `seg` of `segs` of ROWS output rows that all come from the input row `in`, by bulk
// copies. The rows must be 16-byte aligned and a whole number of vectors long, so that a
// vector is the same 16 bytes in every row; they may lie differently against 128-byte lines.
// As in upsample_rows_segment, the segment is slots seg * SEG .. of each row's own line grid
// (a row's slot 0 at the line boundary at or before its start), so that each copy starts and
// ends on line boundaries (but at the row's ends) and no line is written by two items. The
// rows' slots start at most 7 vectors apart, so the lanes build the segment's vectors from the
// earliest row's first slot on (at most SEG + 7) into image A of `buf`; a copy reads its
// source at the same place against 32 bytes as it writes, so where a row needs the other
// phase the vectors also go to image B, one vector further on (buf holds 2 * (SEG + 16)
// vectors, 128-byte aligned). Then lane 0 issues one copy per row, as one bulk group; the
// caller waits before buf is reused. Packs are built as in upsample_rows_segment.
template <typename D, int SCALE_W, int ROWS, int BATCH, int SEG>
__device__ __forceinline__ void upsample_rows_bulk(const D *in, bool last_row, D *out, int W, int OW, int seg, int segs, int lane, uint4 *buf)
{
    const int VEC = pack_inputs<D, SCALE_W>::VEC, IN_BYTES = pack_inputs<D, SCALE_W>::IN_BYTES;
    const bool SPAN = pack_inputs<D, SCALE_W>::SPAN, WINDOW = pack_inputs<D, SCALE_W>::WINDOW;
    const int IMAGE = SEG + 16;
    if (TOCHA_BULK_LANES == 1 && lane != 0) return; // the simulator: lane 0 does the warp's work
    const int vectors = OW / VEC;
    int most_skip = 0;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) most_skip = max_int(most_skip, slots_past_line(out + (long long)r * OW));
    const int v0 = max_int(0, seg * SEG - most_skip);
    const int v_end = seg == segs - 1 ? vectors : min_int(vectors, (seg + 1) * SEG);
    // Row r's copy [lo, hi) reads image A at buf + lo - v0; image B where that is not at the
    // copy's destination's place against 32 bytes.
    bool need_b = false;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const unsigned long long row = (unsigned long long)(out + (long long)r * OW);
        const int lo = max_int(0, seg * SEG - slots_past_line(out + (long long)r * OW));
        need_b |= (((row + (unsigned long long)lo * 16u) ^ ((unsigned long long)(lo - v0) * 16u)) & 16u) != 0;
    }
    const bool aligned = SPAN && aligned_to(in, IN_BYTES); // every vector starts an input element
    if (TOCHA_BULK_LANES == 1 || BATCH == 1 || (SPAN && !aligned)) {
        for (int v = v0 + lane; v < v_end; v += TOCHA_BULK_LANES) {
            const pack16<D> p = forward_pack<D, SCALE_W, SPAN, WINDOW>(in, last_row, W, v * VEC, SPAN, aligned);
            const uint4 b = make_uint4(p.w[0], p.w[1], p.w[2], p.w[3]);
            buf[v - v0] = b;
            if (need_b) buf[IMAGE + 1 + v - v0] = b;
        }
    } else {
        for (int v = v0 + lane; v < v_end; v += 32 * BATCH) {
            pack16<D> p[BATCH];
#pragma unroll
            for (int u = 0; u < BATCH; ++u)
                if (v + 32 * u < v_end) p[u] = forward_pack<D, SCALE_W, SPAN, WINDOW>(in, last_row, W, (v + 32 * u) * VEC, SPAN, SPAN);
#pragma unroll
            for (int u = 0; u < BATCH; ++u)
                if (v + 32 * u < v_end) {
                    const uint4 b = make_uint4(p[u].w[0], p[u].w[1], p[u].w[2], p[u].w[3]);
                    buf[v + 32 * u - v0] = b;
                    if (need_b) buf[IMAGE + 1 + v + 32 * u - v0] = b;
                }
        }
    }
    fence_shared_for_bulk();
    warp_sync();
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            D *const row = out + (long long)r * OW;
            const int lo = max_int(0, seg * SEG - slots_past_line(row));
            const int hi = seg == segs - 1 ? vectors : min_int(vectors, (seg + 1) * SEG - slots_past_line(row));
            const bool b = ((((unsigned long long)(row + (long long)lo * VEC)) ^ ((unsigned long long)(lo - v0) * 16u)) & 16u) != 0;
            if (hi > lo) bulk_store(row + (long long)lo * VEC, buf + (b ? IMAGE + 1 : 0) + (lo - v0), (unsigned)(hi - lo) * 16u);
        }
        bulk_commit();
    }
}
#endif

#ifdef TOCHA_BULK_COPIES
// The 16 bytes at byte b of shared buffer `base`, b's place against 16 bytes being ph (the same
// for every lane of a row): the widest aligned shared loads that place allows, shifted into
// place where it is not a multiple of 4 (then up to 3 bytes past the 16 are read).
__device__ __forceinline__ void read_shared16(const unsigned char *base, int b, unsigned ph, unsigned w[4])
{
    const unsigned char *p = base + b;
    if (ph == 0) {
        const uint4 t = *(const uint4 *)p;
        w[0] = t.x, w[1] = t.y, w[2] = t.z, w[3] = t.w;
    } else if ((ph & 7u) == 0) {
        const uint2 a = *(const uint2 *)p, c = *(const uint2 *)(p + 8);
        w[0] = a.x, w[1] = a.y, w[2] = c.x, w[3] = c.y;
    } else if ((ph & 3u) == 0) {
#pragma unroll
        for (int k = 0; k < 4; ++k) w[k] = ((const unsigned *)p)[k];
    } else {
        const unsigned *q = (const unsigned *)(p - (ph & 3u));
        unsigned raw[5];
#pragma unroll
        for (int k = 0; k < 5; ++k) raw[k] = q[k];
#pragma unroll
        for (int k = 0; k < 4; ++k) w[k] = __funnelshift_r(raw[k], raw[k + 1], 8u * (ph & 3u));
    }
}

// Where an output row's vectors lie (as in upsample_rows_segment): `single` elements up to its
// first 16-byte boundary, its slots on the 128-byte line grid from `lined` (slot 0's column,
// `skip` slots before the first vector), `vectors` slots up to its last whole vector, and the
// slots lo .. hi - 1 that segment `seg` (of SEG slots; the last takes the rest) stores, and
// `tail`, the column after its last whole vector.
template <typename D, int SEG> struct row_slots {
    int single, lined, lo, hi, tail;
    __device__ __forceinline__ row_slots(const D *row, int OW, int seg, bool last)
    {
        const int VEC = vec16<D>::n;
        single = head_to<16>(row, OW);
        const int skip = slots_past_line(row + single), vectors = skip + (OW - single) / VEC;
        lined = single - skip * VEC;
        lo = max_int(seg * SEG, skip);
        hi = last ? vectors : min_int(vectors, (seg + 1) * SEG);
        tail = lined + vectors * VEC;
    }
};

// Segment `seg` of `segs` of ROWS output rows that come from the input row `in` and lie
// differently against 16-byte vectors (a row is not a whole number of them), through shared
// memory: the lanes build the segment's columns once, element-contiguous, into `buf` (the
// image), then store each row's vectors on that row's own line grid as upsample_rows_segment
// does, each read from the image at the row's own place against 16 bytes; a row's single
// elements at its ends come from the input, one by one (row-end stores, as upsample_rows_segment
// takes them, measured 4-14 points slower here: f16 4x4 W=1023 87.7% -> 83.4%, u8 84.8% ->
// 70.8%). The image starts at an input element, moved back to where the vectors' inputs are
// aligned loads when they can be.
template <typename D, int SCALE_W, int ROWS, int SEG>
__device__ __forceinline__ void upsample_rows_image(const D *in, bool last_row, D *out, int W, int OW, int seg, int segs, int lane, uint4 *buf)
{
    const int VEC = pack_inputs<D, SCALE_W>::VEC, IN_BYTES = pack_inputs<D, SCALE_W>::IN_BYTES;
    const bool SPAN = pack_inputs<D, SCALE_W>::SPAN, WINDOW = pack_inputs<D, SCALE_W>::WINDOW;
    if (TOCHA_BULK_LANES == 1 && lane != 0) return; // the simulator: lane 0 does the warp's work
    const bool first = seg == 0, last = seg == segs - 1;
    warp_sync(); // the warp's previous item has read buf
    // The columns the rows' vectors of this segment cover.
    int c_lo = OW, c_hi = 0;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const row_slots<D, SEG> g(out + (long long)r * OW, OW, seg, last);
        if (g.hi > g.lo) {
            c_lo = min_int(c_lo, g.lined + g.lo * VEC);
            c_hi = max_int(c_hi, g.lined + g.hi * VEC);
        }
    }
    int i0 = c_lo / SCALE_W;
    if (SPAN) i0 = max_int(0, i0 - (int)(((unsigned long long)(in + i0) & (unsigned)(IN_BYTES - 1)) / sizeof(D)));
    const int c0 = i0 * SCALE_W;
    const bool aligned = SPAN && aligned_to(in + i0, SPAN ? IN_BYTES : 1);
    const int n = c_hi > c0 ? (c_hi - c0 + VEC - 1) / VEC : 0;
    for (int j = lane; j < n; j += TOCHA_BULK_LANES) {
        const int ow0 = c0 + j * VEC;
        pack16<D> p;
        if (ow0 + VEC <= OW || !last_row) { // past OW: columns no row stores
            p = forward_pack<D, SCALE_W, SPAN, WINDOW>(in, last_row, W, ow0, SPAN, aligned);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; ++e)
                if (ow0 + e < OW) p.set(e, in[(ow0 + e) / SCALE_W]);
        }
        buf[j] = make_uint4(p.w[0], p.w[1], p.w[2], p.w[3]);
    }
    warp_sync();
    const unsigned char *image = (const unsigned char *)buf;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        D *const row = out + (long long)r * OW;
        const row_slots<D, SEG> g(row, OW, seg, last);
        const unsigned ph = (unsigned)((g.lined - c0) * (int)sizeof(D)) & 15u;
        for (int v = g.lo + lane; v < g.hi; v += TOCHA_BULK_LANES) {
            pack16<D> p;
            read_shared16(image, (g.lined + v * VEC - c0) * (int)sizeof(D), ph, p.w);
            store_pack<false>(row + g.lined + v * VEC, p);
        }
        if (first)
            for (int t = lane; t < g.single; t += TOCHA_BULK_LANES) row[t] = in[t / SCALE_W];
        if (last)
            for (int t = g.tail + lane; t < OW; t += TOCHA_BULK_LANES) row[t] = in[t / SCALE_W];
    }
}
#endif

// How a case runs: how many packs a lane builds before storing them (batch), and how many
// threads per SM the launch bounds leave room for (threads: the register budget, 65536 /
// threads, so 32, 40, 48 or 64). A table of measured cases written as a rule; the numbers
// are in the history above and in docs/performance.md.
// - One output row per input row (SCALE_H == 1): one pack at a time, 2048 threads (32
//   registers, full occupancy: 1x2 f32 93% against 90.5% unbounded at 48 registers; batched
//   at 32 registers it spilled and lost up to 20 points).
// - Several rows: four packs per lane, four loads in flight, for f32, f16 and bf16 (and u8
//   4x4; u8's spans and windows are costly to build, and batched it lost up to 7 below
//   4x4). Batched against one at a time (results/2026-11-30-h200-ab-aligned-batch): 2x2
//   +1.8-5.5 points at W = 1024 and 1020 (to 90-91%), 4x4 +2.5-3.5. Rows of shifted spans
//   take one at a time anyway, but those of 16-byte spans (SCALE_W == 1; upsample_rows_segment).
//   u8 2x1 batched lost 7-12 points at 48 and at 64 registers (results/2026-11-30-h200-rows-
//   apart-tries/ab-u8-batched.txt).
// - Registers for the batched: 64 (1024 threads). f16/bf16 2x1 had 48 (1280) while their
//   shifted spans went one pack at a time (W=1020 86.0% -> 87.8%, W=1023 81.3% -> 83.9%;
//   results/2026-11-30-h200-ab-plan); with those spans batched (v15), 64 against 48: W=1020
//   89.4% -> 91.0-91.3%, W=1023 85.2% -> 83.3% (results/2026-11-30-h200-rows-apart-tries/
//   ab-batch-shifted.txt): even widths, the common ones, took the choice. 48 for every
//   batched case lost up to 2 points elsewhere; at 40 registers the batched spill.
// - Unbatched several rows: 1536 threads (40 registers; at 32 they spilled 28-36 bytes and
//   lost 8-18 points; 40 measured the same as no bound).
// - The work item of several rows alike against lines (alike_steps, warp steps per item):
//   one step for four or more rows and for u8 but 2x2, else TOCHA_UPSAMPLE_SEGMENT_SHORT's
//   two. One step against two (results/2026-11-30-h200-ab-segment/ab-shift-short1.txt):
//   4x4 W=1024 +1-1.3 (f32 89.9% -> 91.2%), u8 3x3 +1.3, u8 2x1 +2; 2x2, 3x3 and 2x1 of the
//   other dtypes lost 6-17 (f16 2x2 92.8% -> 75.6%), u8 2x2 1.4. The host's grid takes the
//   same rule (host/src/upsample.c, alike_steps()).
template <typename D, int SCALE_H, int SCALE_W> struct forward_plan {
    static const int batch = SCALE_H >= 2 && (sizeof(D) >= 2 || SCALE_H >= 4) ? 4 : 1;
    static const int alike_steps = SCALE_H >= 4 || (sizeof(D) == 1 && !(SCALE_H == 2 && SCALE_W == 2)) ? 1 : TOCHA_UPSAMPLE_SEGMENT_SHORT;
    static const int threads = SCALE_H == 1                     ? 2048
                               : batch == 1                     ? 1536
                                                                : 1024;
};

} // namespace tocha

// The entry point's launch bounds: forward_plan's threads per SM.
#define TOCHA_ENTRY_BOUNDS(D, SCALE_H, SCALE_W, BLOCK) \
    __launch_bounds__(BLOCK, tocha::forward_plan<D, SCALE_H, SCALE_W>::threads / (BLOCK))

template <typename D, int SCALE_H, int SCALE_W, int BLOCK_OW>
__device__ void upsample_nearest2d_forward(const D *x, D *y, int B, int C, int H, int W, int OH, int OW)
{
    const int VEC = tocha::vec16<D>::n;
    const int BATCH = tocha::forward_plan<D, SCALE_H, SCALE_W>::batch;
    const int WARPS = BLOCK_OW / 32;
    if (SCALE_H == 1) {
        tocha::upsample_flat<D, SCALE_W, 32 * TOCHA_UPSAMPLE_SEGMENT, WARPS>(x, y, (long long)B * C * H * W, threadIdx.x & 31);
        return;
    }
    // Several output rows per input row from here. They lie alike against 128-byte lines when
    // each row is a whole number of lines long; alike rows take a short work item
    // (forward_plan's alike_steps), the shared-memory paths the short one (tocha.cuh).
    const bool lines = (long long)OW * sizeof(D) % 128 == 0;
    // Vectors per item: a constant in each branch below, so that the loops know it.
    const int SEG_ALIKE = 32 * tocha::forward_plan<D, SCALE_H, SCALE_W>::alike_steps;
    const int SEG_APART = 32 * TOCHA_UPSAMPLE_SEGMENT;
    const int SEG_SHARED = 32 * TOCHA_UPSAMPLE_SEGMENT_SHORT; // the shared-memory paths' items
    // Items per row by a shift: both lengths are powers of two (a run-time division here
    // cost u8 3x3 W=1020 2 points, and constant divisions in each branch spilled u8 2x2).
    const int SEG_SHIFT = lines ? tocha::log2_of<SEG_ALIKE>::value : tocha::log2_of<SEG_APART>::value;
    const int segs = tocha::max_int(1, (OW / VEC + (1 << SEG_SHIFT) - 1) >> SEG_SHIFT);
    const long long items = (long long)B * C * H * segs;
    const int lane = threadIdx.x & 31;
    const long long stride = (long long)gridDim.x * WARPS;
#ifdef TOCHA_BULK_COPIES
    // When the launch gave each warp a buffer in dynamic shared memory (the host does so where
    // the paths below measured faster), items are the short length. Bulk copies where the rows
    // allow them: 16-byte multiples, y aligned (upsample_rows_bulk).
    const int BULK_SLOTS = 2 * (SEG_SHARED + 16);
    // The two paths' item counts are computed in each branch: computed once here, before
    // them, they cost u8 3x3 at W = 1020/1023 and u8 4x4 at W = 1023 a point each (u8 runs at
    // the edge of its 40 registers; results/2026-11-30-h200-ab-steps/ab-item-count.txt). Their
    // loops are for_each_item (against the loops written out: within 0.4 points but f32 2x2
    // W=1023 +0.6; ab-item-loop.txt).
    const bool buffer = tocha::dynamic_shared_bytes() >= WARPS * BULK_SLOTS * 16u && OW >= VEC;
    if (buffer && (long long)OW * sizeof(D) % 16 == 0 && tocha::aligned_to(y, 16)) {
        uint4 *const buf = tocha::warp_shared_slots(BULK_SLOTS);
        const int shared_segs = tocha::max_int(1, (OW / VEC + SEG_SHARED - 1) >> tocha::log2_of<SEG_SHARED>::value);
        tocha::for_each_item<WARPS>((long long)B * C * H, shared_segs, [&](long long in_row, int seg, bool last_row) {
            // A warp's second item (grid-stride) waits until the first one's copies have read buf.
            if (lane == 0) tocha::bulk_wait_read();
            tocha::warp_sync();
            tocha::upsample_rows_bulk<D, SCALE_W, SCALE_H, BATCH, SEG_SHARED>(
                x + in_row * W, last_row, y + in_row * SCALE_H * (long long)OW, W, OW, seg, shared_segs, lane, buf);
        });
        // Shared memory must outlive the copies that read it.
        if (lane == 0) tocha::bulk_wait_all();
        return;
    }
    // Four or more rows that are not whole vectors (or not 16-byte aligned), when the launch
    // gave the buffer: through an image of the segment in shared memory (upsample_rows_image;
    // with two or three rows it measured 3-30 points slower than building each row, with four
    // 1.5-4.5 faster). Items are the short length.
    if (SCALE_H >= 4 && buffer && !lines) {
        uint4 *const buf = tocha::warp_shared_slots(BULK_SLOTS);
        const int shared_segs = tocha::max_int(1, (OW / VEC + SEG_SHARED - 1) >> tocha::log2_of<SEG_SHARED>::value);
        tocha::for_each_item<WARPS>((long long)B * C * H, shared_segs, [&](long long in_row, int seg, bool last_row) {
            tocha::upsample_rows_image<D, SCALE_W, SCALE_H, SEG_SHARED>(
                x + in_row * W, last_row, y + in_row * SCALE_H * (long long)OW, W, OW, seg, shared_segs, lane, buf);
        });
        return;
    }
#endif
    // for_each_item's loop written out: through the helper u8 4x4 spills 4 bytes at its 64
    // registers and W=1023 lost 0.5-0.9 (results/2026-11-30-h200-ab-item-split/ab-main-loop-u8.txt).
    for (long long item = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5); item < items; item += stride) {
        const long long in_row = item / segs; // (b, c, ih): output rows in_row * SCALE_H + r
        const int seg = (int)(item - in_row * segs);
        const D *in = x + in_row * W;
        const bool last_row = item >= items - segs; // the input's last row
        D *out = y + in_row * SCALE_H * (long long)OW;
        if (lines) {
            tocha::upsample_rows_segment<D, SCALE_H, SCALE_W, SCALE_H, BATCH, true, SEG_ALIKE>(in, last_row, out, W, OW, seg, segs, lane, in_row == 0, true);
        } else {
            for (int r = 0; r < SCALE_H; ++r)
                tocha::upsample_rows_segment<D, SCALE_H, SCALE_W, 1, BATCH, false, SEG_APART>(in, last_row, out + (long long)r * OW, W, OW, seg, segs, lane,
                                                                                 in_row == 0 && r == 0, r == SCALE_H - 1);
        }
    }
}
