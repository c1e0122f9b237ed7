-- tocha.Embedding: rows of a table picked by integer indices, forward against the table read
-- here in Lua, backward against each row's sum of dy worked out here in f64 (every row of the
-- gradient checked, poisoned first), for every float dtype, both index dtypes, 1- and 0-based
-- indices, negative ones counted from the end, a padding row, many repeats of one index across
-- the sort's chunks; the same bits on a second run; in a model whose input is the indices;
-- bad arguments and indices outside the table. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"
local fails = require("support.assertions").fails

-- Random 1-based-or-not indices of a table of `rows`, n of them, each drawn from `pick` (a list
-- of row numbers, 1-based) when given.
local function draw(n, rows, base, wrap, pick)
  local v = {}
  for p = 1, n do
    local r = pick and pick[math.random(#pick)] or math.random(rows) -- 1-based row
    local i = r - 1 + base
    if wrap and math.random() < 0.3 then i = i - rows end -- the same row, from the end
    v[p] = i
  end
  return v
end

local function row_of(i, rows, base, wrap)
  local r = i - base
  if wrap and r < 0 then r = r + rows end
  return r + 1
end

describe("tocha.Embedding", function()
  local rng = ref.rng("embedding_spec")
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = rng.seed

      local function indices(values, shape, it)
        local t = tocha.tensor(values, { dtype = it, device = device })
        return t:view(shape)
      end

      it("picks each index's row and sums each row's gradients, every dtype and numbering", function()
        local cases = {
          { rows = 7, dim = 5, shape = { 3, 4 } },
          { rows = 50, dim = 33, shape = { 2, 300 } },           -- two chunks of the sort and more
          { rows = 3, dim = 64, shape = { 700 }, pick = { 2 } },  -- one row, 700 times
          { rows = 1000, dim = 1, shape = { 5, 1, 7 } },
          { rows = 4, dim = 8, shape = { 1 } },
        }
        for _, c in ipairs(cases) do
          for _, dt in ipairs(ref.float_dtypes) do
            for _, it in ipairs({ "i64", "i32" }) do
              for _, numbering in ipairs({ { 1, false }, { 0, false }, { 0, true } }) do
                local base, wrap = numbering[1], numbering[2]
                local n = ref.numel(c.shape)
                local values = draw(n, c.rows, base, wrap, c.pick)
                local padding = c.rows > 3 and math.random(c.rows) or nil -- 1-based row
                local op = tocha.Embedding.new(c.rows, c.dim, { dtype = dt, index_dtype = it, base = base, wrap = wrap,
                  padding_idx = padding and padding - 1 + base })
                seed = seed + 1
                local w = tocha.randn({ c.rows, c.dim }, { dtype = dt, device = device, seed = seed })
                local idx = indices(values, c.shape, it)
                local out_shape = {}
                for i, s in ipairs(c.shape) do out_shape[i] = s end
                out_shape[#out_shape + 1] = c.dim
                local y = tocha.full(out_shape, 0 / 0, { dtype = dt, device = device }) -- poisoned
                assert.are.equal(y, op:forward(idx, w, y))
                local wv, yv = w:to_table(true), y:to_table(true)
                local label = ("%s %s rows %d dim %d base %d%s"):format(dt, it, c.rows, c.dim, base, wrap and " wrap" or "")
                for p = 1, n do
                  local r = row_of(values[p], c.rows, base, wrap)
                  for k = 1, c.dim do
                    assert(yv[(p - 1) * c.dim + k] == wv[(r - 1) * c.dim + k],
                      ("%s: y[%d][%d] is not row %d's"):format(label, p, k, r))
                  end
                end
                seed = seed + 1
                local dy = tocha.randn(out_shape, { dtype = dt, device = device, seed = seed })
                local dw = tocha.full({ c.rows, c.dim }, 0 / 0, { dtype = dt, device = device }) -- poisoned
                assert.are.equal(dw, op:backward(idx, w, dy, dw))
                local gv, got = dy:to_table(true), dw:to_table(true)
                local want, mass = {}, {}
                for i = 1, c.rows * c.dim do want[i], mass[i] = 0, 0 end
                for p = 1, n do
                  local r = row_of(values[p], c.rows, base, wrap)
                  if r ~= padding then
                    for k = 1, c.dim do
                      local g = gv[(p - 1) * c.dim + k]
                      local at = (r - 1) * c.dim + k
                      want[at], mass[at] = want[at] + g, mass[at] + math.abs(g)
                    end
                  end
                end
                -- f32 sums in f32 (n roundings at most), halves in f32 and round once, f64 in f64
                local tol = dt == "f64" and 1e-13 or dt == "f32" and 1e-6 * math.max(1, n / 64) or 2 * ref.eps[dt]
                for i = 1, c.rows * c.dim do
                  local err = math.abs(got[i] - want[i])
                  assert(err <= tol * math.max(mass[i], 1e-300) + (mass[i] == 0 and 0 or 1e-300),
                    ("%s: dweight[%d] = %.10g, want %.10g"):format(label, i, got[i], want[i]))
                end
                -- one order of summation: the same bits again
                local again = op:backward(idx, w, dy)
                assert.is_true(tocha.allclose(again, dw, 0, 0), label .. ": a second backward differs")
              end
            end
          end
        end
      end)

      it("joins a model whose input is the indices: forward, the table's gradient, none for the indices", function()
        local Model = tocha.Model
        local ids = Model.input({ -1, 6 }, { dtype = "i64", name = "ids" })
        local emb = tocha.Embedding.new(20, 8, { base = 0 })
        local e = emb(ids):named("emb")
        local m = Model({ ids }, { tocha.Softmax.new(-1)(e) }):load(3, device)
        local w = m:parameters()["emb.weight"]
        assert.are.same({ 20, 8 }, w:shape())
        local wv = w:cast("f64"):to_table(true)
        local mean, sq = 0, 0
        for _, v in ipairs(wv) do mean, sq = mean + v, sq + v * v end
        mean = mean / #wv
        assert.is_true(math.abs(mean) < 0.3 and math.abs(sq / #wv - 1) < 0.4, "the table starts near N(0, 1)")
        local values = draw(18, 20, 0, false)
        local idx = indices(values, { 3, 6 }, "i64")
        local y = m:forward({ idx })[1]
        local direct = emb:forward(idx, w):softmax(-1)
        assert.is_true(tocha.allclose(y, direct, 0, 0), "the model's forward is the op's")
        local out, cache = m:forward_train({ idx })
        seed = seed + 1
        local dy = tocha.randn({ 3, 6, 8 }, { device = device, seed = seed })
        local grads, pgrads = m:backward({ dy }, cache)
        assert.are.equal(false, grads[1])
        local sm = tocha.Softmax.new(-1)
        local de = sm:backward(emb:forward(idx, w), out[1], dy)
        assert.is_true(tocha.allclose(pgrads["emb.weight"], emb:backward(idx, w, de), 0, 0), "the table's gradient")
        -- an index outside the table: the model's row is NaN (no read back inside a model)
        values[5] = 20
        local yb = m:forward({ indices(values, { 3, 6 }, "i64") })[1]:to_table(true)
        for k = 1, 8 do assert(yb[4 * 8 + k] ~= yb[4 * 8 + k], "position 5's row is NaN") end
        assert(yb[1] == yb[1], "the other rows are numbers")
      end)

      it("refuses bad arguments and indices outside the table, naming them", function()
        local op = tocha.Embedding.new(10, 4)
        local w = tocha.randn({ 10, 4 }, { device = device, seed = 1 })
        local idx = tocha.tensor({ 1, 2, 3 }, { dtype = "i64", device = device })
        fails("idx: index 11 at position 2 is outside the table's 10 rows (base 1)", op.forward, op,
          tocha.tensor({ 1, 11, 3 }, { dtype = "i64", device = device }), w)
        fails("idx: index 0 at position 1 is outside the table's 10 rows (base 1)", op.forward, op,
          tocha.tensor({ 0 }, { dtype = "i64", device = device }), w)
        local onnx_like = tocha.Embedding.new(10, 4, { base = 0, wrap = true })
        fails("idx: index -11 at position 3 is outside the table's 10 rows (base 0, negative from the end)",
          onnx_like.forward, onnx_like, tocha.tensor({ -10, 9, -11 }, { dtype = "i64", device = device }), w)
        fails("idx: expected dtype i64 (the op's index_dtype), got i32", op.forward, op,
          tocha.tensor({ 1 }, { dtype = "i32", device = device }), w)
        fails("idx: expected dtype i64 (the op's index_dtype), got f32", op.forward, op,
          tocha.tensor({ 1 }, { device = device }), w)
        fails("idx: expected a tensor of indices, got number", op.forward, op, 3, w)
        fails("weight: expected shape [10, 4]", op.forward, op, idx, tocha.randn({ 4, 10 }, { device = device }))
        fails("weight: expected dtype f32", op.forward, op, idx, w:cast("f64"))
        fails("dy: expected shape [3, 4]", op.backward, op, idx, w, tocha.randn({ 3, 5 }, { device = device }))
        fails("dweight: expected shape [10, 4]", op.backward, op, idx, w, tocha.randn({ 3, 4 }, { device = device }),
          tocha.empty({ 10, 5 }, { device = device }))
        fails("rows: expected 1 to", tocha.Embedding.new, 0, 4)
        fails("dim: expected an integer", tocha.Embedding.new, 3, 1.5)
        fails("index_dtype: expected i64 or i32, got \"u8\"", tocha.Embedding.new, 3, 2, { index_dtype = "u8" })
        fails("base: expected 0 or 1, got 2", tocha.Embedding.new, 3, 2, { base = 2 })
        fails("padding_idx: 4 is outside the table's 3 rows (base 1)", tocha.Embedding.new, 3, 2, { padding_idx = 4 })
        fails("dtype: expected a float dtype", tocha.Embedding.new, 3, 2, { dtype = "i32" })
        fails("unknown option", tocha.Embedding.new, 3, 2, { bogus = 1 })
        -- the process goes on: the op still works
        assert.are.same({ 3, 4 }, op:forward(idx, w):shape())
        -- no indices: refused, as every op refuses a tensor with a size 0
        fails("idx: an empty tensor (shape [0, 2])", op.forward, op, tocha.empty({ 0, 2 }, { dtype = "i64", device = device }), w)
      end)
    end)
  end
end)
