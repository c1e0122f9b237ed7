-- tocha.upsample_tuning: the block width new() picks when none is given. Any block width a
-- caller passes still works; this only chooses the default.
--
-- The kernels give each thread one 16-byte vector (forward, 2048 threads per SM) or a batch of
-- runs (backward, 1024) per step of a flat grid-stride loop, so the block width only decides
-- how the CTAs fill the SMs: 128 threads leave small tensors (a few thousand vectors) spread
-- over more SMs than 256 would, and large ones lose nothing. bench/upsample.lua --sweep
-- measures every width per case; M.best takes a case's measured best where it beats 128 by
-- more than the noise.
local M = {}

-- Measured best block widths, keyed "op dtype layout"; unlisted cases take M.fallback.
M.best = {}
M.fallback = 128

-- The default block width for (op, dtype, layout); the scales are accepted for when they change
-- the choice.
function M.block(scale_h, scale_w, dtype_name, op, layout)
  local _ = scale_h and scale_w
  return M.best[("%s %s %s"):format(op or "forward", dtype_name or "f32", layout or "nchw")] or M.fallback
end

return M
