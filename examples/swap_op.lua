-- swap_op.lua: a kernel writer's experiment: an imported network with one of its nodes swapped
-- for a kernel of one's own, its outputs compared with the original's and its time node by
-- node (m:profile). The node is the network's first max pool (ResNet-18's 3x3, stride 2,
-- padding 1 after conv1); the kernel, written below, gives a thread an output element.
--
--   tocha examples/swap_op.lua resnet18.onnx [--size 224] [--batch 1]
--
-- resnet18.onnx: torchvision's ResNet-18 as torch.onnx.export writes it (spec/support/peer_onnx.py
-- makes one: python3 peer_onnx.py DIR SIZE BATCH).
local tocha = require "tocha"

local path, size, batch = nil, 224, 1
local i = 1
while arg and arg[i] do
  if arg[i] == "--size" then size = assert(tonumber(arg[i + 1]), "--size: expected a number") i = i + 2
  elseif arg[i] == "--batch" then batch = assert(tonumber(arg[i + 1]), "--batch: expected a number") i = i + 2
  else path = arg[i] i = i + 1 end
end
if not path then error("usage: tocha examples/swap_op.lua resnet18.onnx [--size 224] [--batch 1]", 0) end

-- (layout "nchw": the kernel below indexes NCHW tensors; the default import holds the
-- activations channels-last, [N, H, W, C])
local m = tocha.onnx.load(path, { batch_size = batch, input_shapes = { x = { batch, 3, size, size } }, layout = "nchw" })
local target
for _, n in ipairs(m.order) do
  if n.op and n.op.kind == "maxpool2d" then target = n break end
end
assert(target, path .. " has no max pool to swap")

-- The kernel: a 3x3 window, stride 2, padding 1 (the padding never wins), one output element a
-- thread; the sizes are arguments, the window baked in.
local SOURCE = [[
__device__ void my_max_pool(const float *x, float *y, long long total, long long h, long long w, long long oh, long long ow)
{
    long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (e >= total) return;
    long long ox = e % ow, oy = (e / ow) % oh, plane = e / (ow * oh);
    const float *in = x + plane * h * w;
    float best = -__int_as_float(0x7f800000);
    for (int dy = 0; dy < 3; ++dy)
        for (int dx = 0; dx < 3; ++dx) {
            long long iy = oy * 2 - 1 + dy, ix = ox * 2 - 1 + dx;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
                float v = in[iy * w + ix];
                best = v > best || v != v ? v : best;
            }
        }
    y[e] = best;
}]]
local kernel = tocha.kernel { source = SOURCE, name = "my_max_pool", params = "f32* x, f32* y, i64 total, i64 h, i64 w, i64 oh, i64 ow" }
local function out_side(s) return math.floor((s + 2 - 3) / 2) + 1 end
local mine = tocha.Model.op { name = "my_max_pool", kernel = kernel, dtype = "f32", block = 256,
  output_shape = function(shapes)
    local x = shapes[1]
    return { x[1], x[2], out_side(x[3]), out_side(x[4]) }
  end,
  grid = function(o) return { math.ceil(o[1] * o[2] * o[3] * o[4] / 256), 1, 1 } end,
  args = function(ins, out, in_shapes, o)
    return { ins[1], out, o[1] * o[2] * o[3] * o[4], in_shapes[1][3], in_shapes[1][4], o[3], o[4] }
  end }
local swapped = m:replace(target.name, mine)

local x = tocha.randn({ batch, 3, size, size }, { seed = 1 })
local want = m:forward({ x })[1]:clone()
local got = swapped:forward({ x })[1]
local worst = (got - want):abs():max():item()
print(("%s: node %s (%s) swapped for my_max_pool: outputs differ by at most %g"):format(path, target.name,
  target.op.kind, worst))

local before, after = m:profile({ x }), swapped:profile({ x })
local function row_of(rows)
  for _, r in ipairs(rows) do if r.name == target.name then return r end end
end
local a, b = row_of(before), row_of(after)
print(("%s: %.4f ms (%s) -> %.4f ms (my_max_pool); the forward %.4f -> %.4f ms"):format(target.name, a.ms, a.kind, b.ms,
  before.forward_ms, after.forward_ms))
print(tostring(after))
if worst ~= 0 then error("the swapped network's outputs differ") end
