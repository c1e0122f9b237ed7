-- tocha.tensor_print: a tensor as people read one (tostring, print, the REPL's =x).
--
--   [1,1,:,:]
--    0.1250  -1.5000   2.0000
--    3.0000   0.0000  -0.7500
--
--   tocha.Tensor f32 [1x1x2x3] sim
--
-- One 2-D slice at a time under its index (Lua's 1-based; a 1-D tensor is one row), the columns
-- aligned and every value of the tensor in one format: integers as integers, floats with four
-- decimals, and when the largest magnitude is 1e5 or more or under 1e-3 a common scale printed
-- first ("1e+05 *"), as Torch7 does. Tensors of more than THRESHOLD elements show EDGE items at
-- each end of every dimension, "..." between. The last line names dtype, shape and device; an
-- empty tensor (a size 0) is that line alone, ending in "(empty)".
local ffi = require "ffi"
local dtype = require "tocha.dtype"

local M = {}

M.THRESHOLD = 1000
M.EDGE = 3

-- The indices (1-based) shown along a dimension of size n: all, or the edges with false between.
local function shown(n, summarise)
  if not summarise or n <= 2 * M.EDGE then
    local all = {}
    for i = 1, n do all[i] = i end
    return all
  end
  local out = {}
  for i = 1, M.EDGE do out[#out + 1] = i end
  out[#out + 1] = false
  for i = n - M.EDGE + 1, n do out[#out + 1] = i end
  return out
end

-- Reads the rows to print: for every shown index of the leading dimensions, the shown elements
-- of the last one (a read per run of them). Returns a list of {index, values-with-false}.
local function gather(t, dims, summarise)
  local name = dtype.name(t.elem_type)
  local ctype = dtype.host_ctype(name)
  local ndim = #dims
  local strides = {}
  local s = 1
  for d = ndim, 1, -1 do strides[d] = s; s = s * dims[d] end
  local cols = shown(dims[ndim], summarise)
  local rows = {}
  local lead = {}
  local function walk(d, offset)
    if d == ndim then
      local values, run_start, run = {}, nil, {}
      local function flush()
        if not run_start then return end
        local buf = ffi.new(ctype .. "[?]", #run)
        t:read(buf, offset + run_start - 1, #run)
        for k, col in ipairs(run) do values[col] = dtype.decode(name, buf, k - 1) end
        run_start, run = nil, {}
      end
      for _, c in ipairs(cols) do
        if c then
          run_start = run_start or c
          run[#run + 1] = c
        else
          flush()
        end
      end
      flush()
      local row = {}
      for k, c in ipairs(cols) do row[k] = c and values[c] or false end
      local index = {}
      for k = 1, ndim - 1 do index[k] = lead[k] end
      rows[#rows + 1] = { index = index, values = row }
      return
    end
    for _, i in ipairs(shown(dims[d], summarise)) do
      if i then
        lead[d] = i
        walk(d + 1, offset + (i - 1) * strides[d])
      else
        lead[d] = false
        rows[#rows + 1] = { index = { unpack(lead, 1, d) }, skip = d }
      end
    end
  end
  walk(1, 0)
  return rows
end

-- How every value is written: a format, a scale to divide by, and the scale's line.
local function number_format(rows, integer)
  local largest, all_integers = 0, true
  for _, r in ipairs(rows) do
    for _, v in ipairs(r.values or {}) do
      if v and v == v and v ~= math.huge and v ~= -math.huge then
        largest = math.max(largest, math.abs(v))
        if v ~= math.floor(v) then all_integers = false end
      end
    end
  end
  if integer or (all_integers and largest < 1e9) then return "%d", 1, nil end
  if largest > 0 and (largest >= 1e5 or largest < 1e-3) then
    local e = math.floor(math.log10(largest))
    return "%.4f", 10 ^ e, ("%.0e *"):format(10 ^ e)
  end
  return "%.4f", 1, nil
end

local function write(v, fmt, scale)
  if v == false then return "..." end
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  if fmt == "%d" then return ("%d"):format(v) end
  return fmt:format(v / scale)
end

-- The one line naming t: "tocha.Tensor f32 [2x3] sim" (" (freed)" after a freed one's,
-- " (empty)" after one with a size 0: "tocha.Tensor f32 [2x0x3] sim (empty)").
function M.head(t)
  local dims = t:shape()
  local head = ("tocha.Tensor %s [%s] %s"):format(dtype.name(t.elem_type), table.concat(dims, "x"),
    require("tocha.device").wrap(t.dev).name)
  if t.freed ~= 0 then return head .. " (freed)" end
  return t.count == 0 and head .. " (empty)" or head
end

-- The text tostring(t) gives.
function M.format(t)
  local name = dtype.name(t.elem_type)
  local dims = t:shape()
  local head = M.head(t)
  if t.freed ~= 0 or t.count == 0 then return head end -- no values to show
  local summarise = tonumber(t.count) > M.THRESHOLD
  local ok, rows = pcall(gather, t, dims, summarise)
  if not ok then return head .. " (its values could not be read: " .. tostring(rows) .. ")" end
  local fmt, scale, scale_line = number_format(rows, dtype.is_integer(name))
  local width = 0
  local cells = {}
  for k, r in ipairs(rows) do
    if r.values then
      cells[k] = {}
      for c, v in ipairs(r.values) do
        local text = write(v, fmt, scale)
        cells[k][c] = text
        if v ~= false then width = math.max(width, #text) end -- "..." may stand wider
      end
    end
  end
  local lines = {}
  if scale_line then lines[#lines + 1] = scale_line end
  local ndim = #dims
  local last_slice
  for k, r in ipairs(rows) do
    if r.skip then
      if r.skip < ndim - 1 then
        lines[#lines + 1] = "..."
        lines[#lines + 1] = ""
        last_slice = nil
      else
        lines[#lines + 1] = "..."
      end
    else
      if ndim > 2 then
        local slice = table.concat(r.index, ",", 1, ndim - 2)
        if slice ~= last_slice then
          if last_slice then lines[#lines + 1] = "" end
          lines[#lines + 1] = ("[%s,:,:]"):format(slice)
          last_slice = slice
        end
      end
      local padded = {}
      for c, text in ipairs(cells[k]) do padded[c] = (" "):rep(math.max(width - #text, 0)) .. text end
      lines[#lines + 1] = " " .. table.concat(padded, "  ")
    end
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = head
  return table.concat(lines, "\n")
end

return M
