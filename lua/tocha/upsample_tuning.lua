-- tocha.upsample_tuning: the block width new() picks when none is given, per case, from the
-- benchmark's sweep on the H200 (bench/upsample.lua --sweep; the run is in
-- results/2026-11-30-h200-8b00370-sweep/). Any block width a caller passes still works; this
-- only chooses the default.
--
-- What the sweep showed (15 cases x 6 widths): 64 and 128 threads are within 1-2 points of
-- each other everywhere; 32 loses 5-20 points (too few warps per SM slot), 1024 loses 10-30
-- (a CTA of 32 warps waits on its slowest). 64 was ahead for every f32, f16 and bf16 case and
-- for the backward; u8 forward preferred 128 (3x3: 47.0% against 37.3%).
-- Checked again on the forward v9 kernels (results/2026-11-30-h200-ab-registers/): 128 against
-- 64 for f32, f16 and bf16 was within a point on every case, so 64 stays. The u8 forward and
-- the backward swept again on forward v12 (results/2026-11-30-h200-sweep-v12/, 60 cases x 6
-- widths): the defaults are within half a point of each case's best but for u8 4x4 (256 +0.8
-- at W = 1024 and +0.4 at 1020 but -2.3 at 1023; 32 +1.4 at 1023 only) and the backward at W =
-- 1023 (128 +0.3-0.6 there, -0.1-0.5 at 1024), so no width is better across a case's widths and
-- the table stays. The whole-tensor 1x2 paths (forward v13, backward v11) and the backward
-- 3x3 swept on those kernels (results/2026-11-30-h200-sweep-v13/): 64 (128 for u8 forward) is
-- each case's best or within 0.1 of it.
local M = {}

-- Measured best block widths, keyed "op dtype"; unlisted cases take M.fallback.
M.best = {
  ["forward f32"] = 64, ["forward f16"] = 64, ["forward bf16"] = 64, ["forward u8"] = 128,
  ["backward f32"] = 64, ["backward f16"] = 64, ["backward bf16"] = 64,
}
M.fallback = 128

-- The default block width for (op, dtype); scales do not change the choice on what was
-- measured, so they are accepted for when they do.
function M.block(scale_h, scale_w, dtype_name, op)
  local _ = scale_h and scale_w
  return M.best[(op or "forward") .. " " .. (dtype_name or "f32")] or M.fallback
end

return M
