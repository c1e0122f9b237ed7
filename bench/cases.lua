-- bench/cases.lua: the benchmark's cases, shared by the Lua benchmark and (through the CSV it
-- writes) the PyTorch one. Every case moves at least 256 MB (input read once + output
-- written once): sizes are chosen for about 512 MB.
local M = {}

M.scales = { { 2, 2 }, { 3, 3 }, { 4, 4 }, { 2, 1 }, { 1, 2 } }
-- Input widths: a multiple of 16, a multiple of 4 but not 8, and an odd one.
M.widths = { 1024, 1020, 1023 }
M.forward_dtypes = { "f32", "f16", "bf16", "u8" }
M.backward_dtypes = { "f32", "f16", "bf16" }
local SIZES = { f32 = 4, f16 = 2, bf16 = 2, u8 = 1 }

local function shape_for(dtype, sh, sw, W, target_bytes)
  local B, C = 8, 16
  local per_input_elem = SIZES[dtype] * (1 + sh * sw)
  local H = math.max(1, math.ceil(target_bytes / per_input_elem / (B * C * W)))
  return { B, C, H, W }
end

-- Every case: {op, dtype, shape = {B, C, H, W}, sh, sw, bytes}.
function M.list(opts)
  opts = opts or {}
  local target = opts.target_bytes or 512 * 2 ^ 20
  local out = {}
  local function add(op, dtype, sh, sw, W)
    local shape = shape_for(dtype, sh, sw, W, target)
    local n = shape[1] * shape[2] * shape[3] * shape[4]
    out[#out + 1] = { op = op, dtype = dtype, shape = shape, sh = sh, sw = sw,
      bytes = n * SIZES[dtype] * (1 + sh * sw) }
  end
  for _, dtype in ipairs(M.forward_dtypes) do
    for _, s in ipairs(M.scales) do
      for _, W in ipairs(M.widths) do add("forward", dtype, s[1], s[2], W) end
    end
  end
  for _, dtype in ipairs(M.backward_dtypes) do
    for _, s in ipairs(M.scales) do
      for _, W in ipairs(M.widths) do add("backward", dtype, s[1], s[2], W) end
    end
  end
  if opts.quick then
    local few = {}
    for i = 1, #out, 7 do few[#few + 1] = out[i] end
    out = few
  end
  return out
end

M.columns = { "impl", "op", "dtype", "B", "C", "H", "W", "scale_h", "scale_w", "block", "bytes",
  "median_ms", "gbps", "pct_copy", "copy_gbps" }

return M
