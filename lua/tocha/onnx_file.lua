-- tocha.onnx.read(path): an ONNX model file as plain Lua values, read by libtocha (protobuf-c
-- with the ONNX schema; host/src/import/onnx.c), for a look inside a file and for the importer
-- (tocha.onnx.load).
--
--   local f = tocha.onnx.read("resnet18.onnx")
--   f.opsets[""]                      --> 17 (the default domain's opset)
--   f.nodes[1].op_type, f.nodes[1].inputs[1], f.nodes[1].attributes.kernel_shape
--   f.initializers["fc.weight"]:shape(), f.initializers["fc.weight"]:to_tensor()
--   f.inputs[1].name, f.inputs[1].shape   --> "input", {-1, 3, 224, 224} (-1: symbolic)
--
-- Attributes are Lua values: numbers, strings, lists of them, and for a tensor attribute (a
-- Constant's value) the same tensor object as an initializer's. A tensor object holds the
-- file's bytes until it is collected: :shape(), :dtype() (tocha's name, or nil where tocha has
-- no such dtype), :values() (a Lua list, for small constants) and :to_tensor([{device =,
-- dtype =}]) (a tocha tensor of its elements, cast where dtype differs).
local ffi = require "ffi"
local native = require "tocha.ffi"
local tensor = require "tocha.tensor"
local errors = require "tocha.errors"
local C, raise, show = native.C, errors.raise, errors.show

local M = {}

-- ONNX data types tocha holds, and those it reads as Lua values (shape arithmetic, masks).
local DTYPES = {
  [C.TOCHA_ONNX_FLOAT] = "f32", [C.TOCHA_ONNX_DOUBLE] = "f64", [C.TOCHA_ONNX_FLOAT16] = "f16",
  [C.TOCHA_ONNX_BFLOAT16] = "bf16", [C.TOCHA_ONNX_UINT8] = "u8", [C.TOCHA_ONNX_INT32] = "i32",
  [C.TOCHA_ONNX_INT64] = "i64",
}
local C_TYPES = {
  [C.TOCHA_ONNX_FLOAT] = "const float *", [C.TOCHA_ONNX_DOUBLE] = "const double *",
  [C.TOCHA_ONNX_UINT8] = "const uint8_t *", [C.TOCHA_ONNX_INT8] = "const int8_t *",
  [C.TOCHA_ONNX_INT16] = "const int16_t *", [C.TOCHA_ONNX_INT32] = "const int32_t *",
  [C.TOCHA_ONNX_INT64] = "const int64_t *", [C.TOCHA_ONNX_BOOL] = "const uint8_t *",
}
local TYPE_NAMES = {
  [1] = "FLOAT", [2] = "UINT8", [3] = "INT8", [4] = "UINT16", [5] = "INT16", [6] = "INT32", [7] = "INT64",
  [8] = "STRING", [9] = "BOOL", [10] = "FLOAT16", [11] = "DOUBLE", [12] = "UINT32", [13] = "UINT64",
  [14] = "COMPLEX64", [15] = "COMPLEX128", [16] = "BFLOAT16",
}
M.DTYPES = DTYPES

-- The ONNX name of data type t ("FLOAT"), or its number.
function M.type_name(t) return TYPE_NAMES[t] or ("data type " .. tostring(t)) end

local Tensor = {}
Tensor.__index = Tensor
Tensor.__tostring = function(t)
  return ("tocha.onnx tensor %q %s [%s]"):format(t.name, M.type_name(t.data_type), table.concat(t.dims, "x"))
end

local function tensor_of(file, c)
  local dims = {}
  for d = 0, c.n_dims - 1 do dims[d + 1] = tonumber(c.dims[d]) end
  return setmetatable({ file = file, name = ffi.string(c.name), data_type = c.data_type, dims = dims,
    numel = tonumber(c.n_elements), data = c.data, bytes = tonumber(c.bytes) }, Tensor)
end

function Tensor:shape()
  local s = {}
  for i, d in ipairs(self.dims) do s[i] = d end
  return s
end

function Tensor:dtype() return DTYPES[self.data_type] end

-- The elements as a Lua list (numbers; int64 values past 2^53 rounded, f16 and bf16 through a
-- tensor). For constants: shapes, axes, scales.
function Tensor:values()
  local ct, out = C_TYPES[self.data_type], {}
  if not ct then
    if DTYPES[self.data_type] then
      return self:to_tensor({ dtype = "f64", device = "sim" }):to_table(true)
    end
    raise(("tensor %q: its %s elements cannot be read as numbers"):format(self.name, M.type_name(self.data_type)))
  end
  local p = ffi.cast(ct, self.data)
  for i = 1, self.numel do out[i] = tonumber(p[i - 1]) end
  return out
end

-- A tocha tensor of the elements (shape {1} for a scalar: tocha tensors have 1 to 8 dimensions).
function Tensor:to_tensor(opts)
  opts = opts or {}
  local dt = DTYPES[self.data_type]
  if not dt then
    raise(("tensor %q: %s elements have no tocha dtype (f32, f64, f16, bf16, u8, i32, i64)"):format(
      self.name, M.type_name(self.data_type)))
  end
  local shape = #self.dims > 0 and self:shape() or { 1 }
  if #shape > 8 then raise(("tensor %q: %d dimensions, tocha tensors have at most 8"):format(self.name, #shape)) end
  local t = tensor.empty(shape, { dtype = dt, device = opts.device })
  if self.numel > 0 then native.check(C.tocha_tensor_write(t, self.data, self.bytes)) end
  if opts.dtype and opts.dtype ~= dt then return t:cast(opts.dtype) end
  return t
end

local function strings(list, n)
  local out = {}
  for i = 0, n - 1 do out[i + 1] = ffi.string(list[i]) end
  return out
end

local function attribute_value(file, a)
  local t = a.type
  if t == C.TOCHA_ONNX_ATTR_FLOAT then return a.f end
  if t == C.TOCHA_ONNX_ATTR_INT then return tonumber(a.i) end
  if t == C.TOCHA_ONNX_ATTR_STRING then return ffi.string(a.s, a.s_bytes) end
  if t == C.TOCHA_ONNX_ATTR_TENSOR then return tensor_of(file, a.tensor) end
  if t == C.TOCHA_ONNX_ATTR_FLOATS then
    local out = {}
    for i = 0, tonumber(a.n_floats) - 1 do out[i + 1] = a.floats[i] end
    return out
  end
  if t == C.TOCHA_ONNX_ATTR_INTS then
    local out = {}
    for i = 0, tonumber(a.n_ints) - 1 do out[i + 1] = tonumber(a.ints[i]) end
    return out
  end
  if t == C.TOCHA_ONNX_ATTR_STRINGS then return strings(a.strings, tonumber(a.n_strings)) end
  -- graphs (If, Loop), sparse tensors, types: kept as what they are, for the importer to refuse
  return { unsupported = t }
end

local function value_of(v)
  local shape, names = nil, nil
  if v.n_dims >= 0 then
    shape, names = {}, {}
    for d = 0, v.n_dims - 1 do
      shape[d + 1] = tonumber(v.dims[d])
      names[d + 1] = ffi.string(v.dim_names[d])
    end
  end
  return { name = ffi.string(v.name), elem_type = v.elem_type, dtype = DTYPES[v.elem_type], shape = shape,
    dim_names = names }
end

-- tocha.onnx.read(path): the file's model (see the top of this file), or an error naming the
-- path and what is wrong with it.
function M.read(path)
  if type(path) ~= "string" then raise("path: expected a file name, got " .. show(path)) end
  local handle = ffi.new("tocha_onnx *[1]")
  local rc = C.tocha_onnx_read(path, handle)
  if rc ~= 0 then raise(native.message()) end
  local file = ffi.gc(handle[0], C.tocha_onnx_destroy)
  local info = ffi.new("tocha_onnx_info")
  native.check(C.tocha_onnx_get_info(file, info))
  local out = { path = path, handle = file, ir_version = tonumber(info.ir_version),
    producer = ffi.string(info.producer_name), producer_version = ffi.string(info.producer_version),
    graph_name = ffi.string(info.graph_name), opsets = {}, nodes = {}, initializers = {}, initializer_order = {},
    inputs = {}, outputs = {}, value_infos = {} }
  local domain, version = ffi.new("const char *[1]"), ffi.new("int64_t[1]")
  for i = 0, tonumber(info.n_opsets) - 1 do
    native.check(C.tocha_onnx_get_opset(file, i, domain, version))
    out.opsets[ffi.string(domain[0])] = tonumber(version[0])
  end
  local node, attribute = ffi.new("tocha_onnx_node"), ffi.new("tocha_onnx_attribute")
  for i = 0, tonumber(info.n_nodes) - 1 do
    native.check(C.tocha_onnx_get_node(file, i, node))
    local n = { index = i + 1, name = ffi.string(node.name), op_type = ffi.string(node.op_type),
      domain = ffi.string(node.domain), inputs = strings(node.inputs, node.n_inputs),
      outputs = strings(node.outputs, node.n_outputs), attributes = {} }
    for j = 0, node.n_attributes - 1 do
      native.check(C.tocha_onnx_get_attribute(file, i, j, attribute))
      n.attributes[ffi.string(attribute.name)] = attribute_value(file, attribute)
    end
    out.nodes[i + 1] = n
  end
  local t = ffi.new("tocha_onnx_tensor")
  for i = 0, tonumber(info.n_initializers) - 1 do
    native.check(C.tocha_onnx_get_initializer(file, i, t))
    local init = tensor_of(file, t)
    out.initializers[init.name] = init
    out.initializer_order[i + 1] = init.name
  end
  local v = ffi.new("tocha_onnx_value")
  for list, key in pairs({ [0] = "inputs", [1] = "outputs", [2] = "value_infos" }) do
    local n = list == 0 and info.n_inputs or list == 1 and info.n_outputs or info.n_value_infos
    for i = 0, tonumber(n) - 1 do
      native.check(C.tocha_onnx_get_value(file, list, i, v))
      out[key][i + 1] = value_of(v)
    end
  end
  return out
end

errors.register(M, "onnx.")
return M
