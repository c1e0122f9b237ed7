-- tocha.plan: launch plans (tocha_plan in tocha.h), a fixed list of launches whose arguments
-- are checked and packed once, then run as a loop of launches. A loaded model holds one.
--
--   local p = plan.new("cuda", 1)                 -- one slot: an address given at each run
--   p:add(kernel, grid, block, { plan.slot(1), y.data, 4096 })
--   p:run({ x })                                  -- slot 1 is x's address this time
--
-- Also the packed-argument form the RuntimeOp methods produce (numbers, and addresses as
-- uint64_t cdata) turned into a tocha_arg_list, for these plans and for launch_packed.
local ffi = require "ffi"
local native = require "tocha.ffi"
local errors = require "tocha.errors"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local C, check, raise = native.C, native.check, errors.raise

local M = {}

local MAX_ARGS = (ffi.sizeof("tocha_arg_list") - ffi.offsetof("tocha_arg_list", "args")) / ffi.sizeof("tocha_arg")
local ARG_FLOAT, ARG_POINTER = 2, 3

-- A list of packed arguments as a tocha_arg_list: at most TOCHA_MAX_PARAMS of them, a list
-- without holes, each a number or an address (uint64_t cdata).
function M.arg_list(args)
  if type(args) ~= "table" then raise("args: expected a list of packed arguments, got " .. type(args)) end
  local n = 0
  for key in pairs(args) do
    if type(key) ~= "number" or key < 1 or key ~= math.floor(key) then
      raise("args: expected a list, got the key " .. errors.show(key))
    end
    n = math.max(n, key)
  end
  if n > MAX_ARGS then raise(("args: expected at most %d arguments, got %d"):format(MAX_ARGS, n)) end
  local list = ffi.new("tocha_arg_list")
  list.count = n
  for i = 1, n do
    local v, a = args[i], list.args[i - 1]
    if type(v) == "number" then a.kind, a.f = ARG_FLOAT, v
    elseif ffi.istype("uint64_t", v) then a.kind, a.i = ARG_POINTER, v
    else raise(("args[%d]: expected a number or an address (uint64_t), got %s"):format(i, type(v))) end
  end
  return list
end

-- A grid or block: a number (x) or {x [, y [, z]]} of positive integers, the rest 1 (the FFI
-- would copy one number to all three axes and truncate fractions).
function M.dims(v, what)
  if type(v) == "number" then v = { v } end
  if type(v) ~= "table" or #v < 1 or #v > 3 then raise(what .. ": expected a number or {x [, y [, z]]}") end
  local out = ffi.new("uint32_t[3]", 1, 1, 1)
  for i = 1, #v do
    local d = v[i]
    if type(d) ~= "number" or d ~= math.floor(d) or d < 1 or d > 2 ^ 32 - 1 then
      raise(("%s[%d]: expected a positive integer, got %s"):format(what, i, errors.show(d)))
    end
    out[i - 1] = d
  end
  return out
end

-- The placeholder address of slot i (1-based), as uint64_t cdata: pack it where slot i's
-- address goes (plus an offset into the buffer, if any).
function M.slot(i) return ffi.new("uint64_t", C.tocha_plan_slot_address(i - 1)) end

local Plan = {}
Plan.__index = Plan

-- A plan on dev (a device name or object; default the default device) with n_slots slots.
function M.new(dev, n_slots)
  if type(dev) ~= "table" then dev = device.get(dev) end
  if type(n_slots) ~= "number" or n_slots ~= math.floor(n_slots) then
    raise("n_slots: expected an integer, got " .. errors.show(n_slots))
  end
  local out = ffi.new("tocha_plan*[1]")
  check(C.tocha_plan_new(dev.handle, n_slots, out))
  return setmetatable({ handle = ffi.gc(out[0], C.tocha_plan_destroy), device = dev, n_slots = n_slots,
    kernels = {}, guarded = {} }, Plan)
end

-- p:add(kernel, grid, block, args [, shared]): one more launch of a tocha kernel (kept alive by
-- the plan), with shared bytes of dynamic shared memory per block (default: the kernel's own).
function Plan:add(k, grid, block, args, shared)
  local list = M.arg_list(args)
  shared = shared ~= nil and kernel.shared_bytes(shared, "shared") or k.shared or 0
  check(C.tocha_plan_add_shared(self.handle, k.handle, M.dims(grid, "grid"), M.dims(block, "block"), shared,
    list))
  self.kernels[#self.kernels + 1] = k
end

-- p:guard(t, name): each run refuses "<name>: tensor was freed" once t is freed.
function Plan:guard(t, name)
  check(C.tocha_plan_guard(self.handle, t, name))
  self.guarded[#self.guarded + 1] = t
end

-- p:run(slots [, first, count]): the launches (or launches first .. first + count - 1,
-- 1-based), slot i at slots[i]: a list of tensors or addresses (uint64_t), or a uint64_t[?]
-- array of at least n_slots (0-based: what a model passes, used as it is).
function Plan:run(slots, first, count)
  if type(slots) == "table" then
    if #slots ~= self.n_slots then
      raise(("slots: expected %d tensors or addresses, got %d"):format(self.n_slots, #slots))
    end
    local array = ffi.new("uint64_t[?]", math.max(self.n_slots, 1))
    for i = 1, self.n_slots do
      local v = slots[i]
      if tensor.is_tensor(v) then
        if v.freed ~= 0 then raise(("slots[%d]: tensor was freed"):format(i)) end
        -- (its address is 0: the plan's launches would read and write through a null pointer)
        if v.count == 0 then raise(("slots[%d]: an empty tensor (a size 0) has no memory for the plan's launches"):format(i)) end
        array[i - 1] = v.data
      elseif ffi.istype("uint64_t", v) then array[i - 1] = v
      else raise(("slots[%d]: expected a tensor or an address (uint64_t), got %s"):format(i, type(v))) end
    end
    slots = array
  elseif not ffi.istype("uint64_t[?]", slots) then
    raise("slots: expected a list of tensors or addresses, got " .. type(slots))
  elseif ffi.sizeof(slots) < 8 * self.n_slots then
    raise(("slots: expected %d addresses, got an array of %d"):format(self.n_slots, ffi.sizeof(slots) / 8))
  end
  if first == nil then
    check(C.tocha_plan_run(self.handle, slots, self.n_slots))
  else
    check(C.tocha_plan_run_range(self.handle, slots, self.n_slots, first - 1, count))
  end
end

function Plan:launches() return C.tocha_plan_launch_count(self.handle) end

-- Errors name the method ("tocha.Plan:add: ..."); named, not wrapped, so that a run stays one call.
errors.register(Plan, "Plan:")

return M
