-- tocha.onnx_fold: the ONNX importer's arithmetic on constants (an exporter's shape arithmetic,
-- masks and index tables that the file fixes at import): values as flat Lua lists, row-major,
-- with their shapes, NumPy's broadcasting between them. Each function returns the result's
-- values and shape, or nil and a message (the importer names the node).
local M = {}

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end
M.numel = numel

-- The shape shapes broadcast to, or nil and why.
function M.broadcast_shape(shapes)
  local r = 0
  for _, s in ipairs(shapes) do r = math.max(r, #s) end
  local out = {}
  for i = 1, r do
    local size = 1
    for _, s in ipairs(shapes) do
      local v = s[i - (r - #s)] or 1
      if v ~= 1 then
        if size ~= 1 and size ~= v then
          local shown = {}
          for k, t in ipairs(shapes) do shown[k] = "[" .. table.concat(t, ", ") .. "]" end
          return nil, ("shapes %s do not broadcast"):format(table.concat(shown, " and "))
        end
        size = v
      end
    end
    out[i] = size
  end
  return out
end

-- The flat index (from 0) into a value of `shape` that element e of `out` (its broadcast shape)
-- reads.
local function source(e, out, shape)
  local rest, at, stride = e, 0, 1
  for d = #out, 1, -1 do
    local i = rest % out[d]
    rest = (rest - i) / out[d]
    local k = d - (#out - #shape)
    if k >= 1 then
      if shape[k] ~= 1 then at = at + i * stride end
      stride = stride * shape[k]
    end
  end
  return at
end

-- fn over the elements of values broadcast together ({values, shape} each), a result of at most
-- `limit` elements.
function M.map(fn, operands, limit)
  local shapes = {}
  for i, o in ipairs(operands) do shapes[i] = o[2] end
  local out, why = M.broadcast_shape(shapes)
  if not out then return nil, why end
  if numel(out) > limit then return nil, ("%d elements: tocha folds constants of at most %d"):format(numel(out), limit) end
  local res, args = {}, {}
  for e = 0, numel(out) - 1 do
    for i, o in ipairs(operands) do args[i] = o[1][source(e, out, o[2]) + 1] end
    res[e + 1] = fn(unpack(args, 1, #operands))
  end
  return res, out
end

-- The elements of a strided view {shape, strides, offset} (in elements) of values.
function M.view(values, v)
  local out = {}
  for e = 0, numel(v.shape) - 1 do
    local rest, at = e, v.offset
    for d = #v.shape, 1, -1 do
      local i = rest % v.shape[d]
      rest = (rest - i) / v.shape[d]
      at = at + i * v.strides[d]
    end
    out[e + 1] = values[at + 1]
  end
  return out, v.shape
end

-- Gather along axis a (1-based) of data by indices (negative from the end), a result of at most
-- `limit` elements.
function M.gather(data, shape, a, indices, index_shape, limit)
  local before, size, after = numel({ unpack(shape, 1, a - 1) }), shape[a], numel({ unpack(shape, a + 1) })
  if before * #indices * after > limit then
    return nil, ("%d elements: tocha folds constants of at most %d"):format(before * #indices * after, limit)
  end
  local out_shape = {}
  for d = 1, a - 1 do out_shape[#out_shape + 1] = shape[d] end
  for _, s in ipairs(index_shape) do out_shape[#out_shape + 1] = s end
  for d = a + 1, #shape do out_shape[#out_shape + 1] = shape[d] end
  local out = {}
  for o = 0, before - 1 do
    for i, k in ipairs(indices) do
      if k < 0 then k = k + size end
      if k < 0 or k >= size then return nil, ("index %d out of range of %d"):format(indices[i], size) end
      for j = 0, after - 1 do
        out[(o * #indices + i - 1) * after + j + 1] = data[(o * size + k) * after + j + 1]
      end
    end
  end
  return out, out_shape
end

-- ScatterND (reduction none): data with the slices indices name replaced by updates.
function M.scatter_nd(data, shape, indices, index_shape, updates)
  local k = index_shape[#index_shape]
  if not k or k < 1 then return nil, "indices without coordinates" end
  if k > #shape then return nil, ("indices of %d coordinates for data of %d dimensions"):format(k, #shape) end
  local slice = numel({ unpack(shape, k + 1) })
  local count = numel(index_shape) / k
  if #updates ~= count * slice then return nil, ("%d updates where the indices name %d"):format(#updates, count * slice) end
  local out = {}
  for i, v in ipairs(data) do out[i] = v end
  for q = 0, count - 1 do
    local at = 0
    for d = 1, k do
      local c = indices[q * k + d]
      if c < 0 then c = c + shape[d] end
      if c < 0 or c >= shape[d] then return nil, ("index %d out of range of %d"):format(indices[q * k + d], shape[d]) end
      at = at * shape[d] + c
    end
    for j = 1, slice do out[at * slice + j] = updates[q * slice + j] end
  end
  return out, shape
end

-- The matrix product of a [..., m, k] by b [..., k, n] (each at least 2-D), their leading
-- dimensions broadcast as NumPy's matmul does; the work (m n k a matrix) bounded by limit.
function M.matmul(a, a_shape, b, b_shape, limit)
  if #a_shape < 2 or #b_shape < 2 then return nil, "a product of vectors: tocha multiplies matrices (2 or more dimensions)" end
  local m, k, n = a_shape[#a_shape - 1], a_shape[#a_shape], b_shape[#b_shape]
  if b_shape[#b_shape - 1] ~= k then return nil, ("A's %d columns and B's %d rows differ"):format(k, b_shape[#b_shape - 1]) end
  local a_lead, b_lead = {}, {}
  for i = 1, #a_shape - 2 do a_lead[i] = a_shape[i] end
  for i = 1, #b_shape - 2 do b_lead[i] = b_shape[i] end
  local lead, why = M.broadcast_shape({ a_lead, b_lead })
  if not lead then return nil, why end
  local batches = numel(lead)
  if batches * m * n * k > limit then return nil, "a product of constants too large to fold" end
  local out = {}
  for e = 0, batches - 1 do
    local ao, bo = source(e, lead, a_lead) * m * k, source(e, lead, b_lead) * k * n
    for i = 0, m - 1 do
      for j = 0, n - 1 do
        local sum = 0
        for t = 0, k - 1 do sum = sum + a[ao + i * k + t + 1] * b[bo + t * n + j + 1] end
        out[#out + 1] = sum
      end
    end
  end
  local shape = {}
  for i, v in ipairs(lead) do shape[i] = v end
  shape[#shape + 1], shape[#shape + 2] = m, n
  return out, shape
end

-- The row-major strides of shape, in elements.
local function strides_of(shape)
  local s, step = {}, 1
  for d = #shape, 1, -1 do s[d], step = step, step * shape[d] end
  return s
end

-- A reduction over dims (1-based) of values, the reduced dimensions kept as 1s: kind "sum",
-- "mean", "max", "min" or "prod" of each element after pre ("square", "abs" or nil), then post
-- ("sqrt" or nil) of each result, as ONNX's Reduce* (a weight standardisation's statistics).
function M.reduce(values, shape, dims, kind, pre, post)
  local out_shape, reduced = {}, {}
  for _, d in ipairs(dims) do reduced[d] = true end
  for d, s in ipairs(shape) do out_shape[d] = reduced[d] and 1 or s end
  local step, out_strides = {}, strides_of(out_shape)
  for d = 1, #shape do step[d] = reduced[d] and 0 or out_strides[d] end
  local count, total = numel(out_shape), numel(shape)
  local start = kind == "max" and -math.huge or kind == "min" and math.huge or kind == "prod" and 1 or 0
  local acc = {}
  for i = 1, count do acc[i] = start end
  local coord, at = {}, 0
  for d = 1, #shape do coord[d] = 0 end
  for e = 1, total do
    local v = values[e]
    if pre == "square" then v = v * v elseif pre == "abs" then v = math.abs(v) end
    local a = acc[at + 1]
    if kind == "max" then
      if v > a or v ~= v then acc[at + 1] = v end
    elseif kind == "min" then
      if v < a or v ~= v then acc[at + 1] = v end
    elseif kind == "prod" then
      acc[at + 1] = a * v
    else
      acc[at + 1] = a + v
    end
    for d = #shape, 1, -1 do -- the next element's coordinates and output position
      coord[d], at = coord[d] + 1, at + step[d]
      if coord[d] < shape[d] then break end
      coord[d], at = 0, at - step[d] * shape[d]
    end
  end
  if kind == "mean" then
    local per = count > 0 and total / count or 0
    for i = 1, count do acc[i] = acc[i] / per end
  end
  if post == "sqrt" then
    for i = 1, count do acc[i] = math.sqrt(acc[i]) end
  end
  return acc, out_shape
end

-- The running sums of values along axis a (1-based), as ONNX's CumSum: exclusive leaves each
-- element out of its own sum, reverse sums from the end.
function M.cumsum(values, shape, a, exclusive, reverse)
  local before, size, after = numel({ unpack(shape, 1, a - 1) }), shape[a], numel({ unpack(shape, a + 1) })
  local out = {}
  for o = 0, before - 1 do
    for j = 0, after - 1 do
      local sum = 0
      for t = 0, size - 1 do
        local k = reverse and size - 1 - t or t
        local at = (o * size + k) * after + j + 1
        if exclusive then out[at], sum = sum, sum + values[at] else sum = sum + values[at] out[at] = sum end
      end
    end
  end
  return out, shape
end

-- values repeated repeats[d] times along each dimension d, as ONNX's Tile, a result of at most
-- `limit` elements.
function M.tile(values, shape, repeats, limit)
  if #repeats ~= #shape then return nil, ("%d repeats for %d dimensions"):format(#repeats, #shape) end
  local out_shape = {}
  for d, s in ipairs(shape) do
    if repeats[d] < 0 then return nil, ("repeat %d of dimension %d is negative"):format(repeats[d], d - 1) end
    out_shape[d] = s * repeats[d]
  end
  local count = numel(out_shape)
  if count > limit then return nil, ("%d elements: tocha folds constants of at most %d"):format(count, limit) end
  local src = strides_of(shape)
  local out = {}
  for e = 0, count - 1 do
    local rest, at = e, 0
    for d = #out_shape, 1, -1 do
      local i = rest % out_shape[d]
      rest = (rest - i) / out_shape[d]
      at = at + (i % shape[d]) * src[d]
    end
    out[e + 1] = values[at + 1]
  end
  return out, out_shape
end

return M
