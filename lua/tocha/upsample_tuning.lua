-- tocha.upsample_tuning: the block width new() picks when none is given. Any block width a
-- caller passes still works; this only chooses the default.
--
-- The kernels give each thread one 16-byte vector (forward, 2048 threads per SM) or a run of
-- dx (backward NCHW at 2048, NHWC a batch of runs at 1024) per step of a flat grid-stride
-- loop, so the block width only decides how the CTAs fill the SMs. On the H200, over every
-- seventh case of the three suites at widths 32 to 1024 (bench/upsample.lua --quick --blocks),
-- 128 is the best median in each of forward/backward x NCHW/NHWC and within 0.7% of any width
-- from 64 to 512, and no case's best beats it by more than the noise of its size: M.best is
-- empty. A case whose measured best beats 128 by more than the noise goes into M.best.
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
