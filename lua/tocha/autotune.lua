-- tocha.autotune: the fastest of several configurations of a kernel, chosen per key of its
-- arguments, timed on the device, remembered on disk.
--
--   local tuned = tocha.autotune {
--     name = "row_sums",                            -- names the records on disk
--     configs = { { BLOCK = 64 }, { BLOCK = 128 }, { BLOCK = 256 } },
--     build = function(cfg) return tocha.kernel { ..., template_args = tostring(cfg.BLOCK) } end,
--     launch = function(k, cfg, x, y, n) k:launch(rows, cfg.BLOCK, x, y, n) end,
--     outputs = { 2 },                              -- the arguments the kernel writes
--     key = function(x, y, n) return { x:shape(), n } end,  -- optional
--   }
--   tuned(x, y, n)                                  -- runs the chosen configuration
--   local cfg, how = tuned:choice(x, y, n)          -- it, and how it was chosen
--
-- The first call for a key (the arguments' shapes, dtypes and scalar values unless `key` says
-- otherwise, and always the device) builds each configuration, runs it once on the call's
-- arguments and compares what it wrote (`outputs`) with the first configuration's result, then
-- times it on the device's queue; a configuration that fails to build, fails to launch or
-- writes other values is dropped with a note. The fastest stays in memory and in a record under
-- the kernel cache's folder (written whole or not at all), which later processes read instead
-- of timing. The call's outputs are put back as they were before each run, so that the call
-- does what one launch of the chosen configuration does. TOCHA_AUTOTUNE=verbose prints each
-- choice and its times on stderr; TOCHA_AUTOTUNE=retune times again instead of reading records.
local ffi = require "ffi"
local native = require "tocha.ffi"
local tensor = require "tocha.tensor"
local device = require "tocha.device"
local errors = require "tocha.errors"
local C, raise = native.C, errors.raise

local M = {}
local Tuner = {}
Tuner.__index = Tuner

local RECORD_VERSION = "tocha autotune 1"
local MAX_REPS = 1000

-- A value as text, the same for equal values whatever the order of a table's keys.
local function text_of(v, seen)
  local t = type(v)
  if t == "number" then return ("%.17g"):format(v) end
  if t == "string" then return ("%q"):format(v) end
  if t == "boolean" or t == "nil" then return tostring(v) end
  if tensor.is_tensor(v) then
    return ("tensor(%s,%s,%s)"):format(table.concat(v:shape(), "x"), v:dtype(), v:device())
  end
  if ffi.istype("int64_t", v) or ffi.istype("uint64_t", v) then return tostring(v) end
  if t == "table" then
    seen = seen or {}
    if seen[v] then raise("key: a table that holds itself") end
    seen[v] = true
    local keys, texts = {}, {}
    for k in pairs(v) do
      keys[#keys + 1] = k
      texts[k] = text_of(k, seen)
    end
    table.sort(keys, function(a, b) return texts[a] < texts[b] end)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = texts[k] .. "=" .. text_of(v[k], seen) end
    seen[v] = nil
    return "{" .. table.concat(parts, ",") .. "}"
  end
  raise(("key: cannot hold a %s"):format(t))
end

local function hash(text)
  local out = ffi.new("char[33]")
  C.tocha_hash_hex(text, #text, out)
  return ffi.string(out)
end

local function mode()
  local v = os.getenv("TOCHA_AUTOTUNE") or ""
  return { verbose = v:find("verbose", 1, true) ~= nil, retune = v:find("retune", 1, true) ~= nil }
end

-- The device the arguments are on: the first tensor's, else the default.
local function device_of(args, n)
  for i = 1, n do
    if tensor.is_tensor(args[i]) then return device.get(args[i]:device()) end
  end
  return device.default()
end

-- A failure's message in one line: without the position and the function's name, and for a
-- compile error its first error line.
local function first_line(message)
  message = tostring(message):gsub("^[^\n:]+:%d+: ", ""):gsub("^tocha%.[%w_.:]+: ", "")
  local header, rest = message:match("^([^\n]*)\n(.*)$")
  if header and header:find("failed to compile:$") then
    local err = rest:match("[^\n]*error:[^\n]*")
    if err then return header .. " " .. err end
  end
  return (message:match("^[^\n]*"))
end

-- ---- records on disk ----

local function record_path(self, key_hash)
  local dir = require("tocha").cache.dir()
  if not dir then return nil end
  return dir .. "/autotune", dir .. "/autotune/" .. self.name .. "-" .. key_hash .. ".txt"
end

-- The record's choice for key_text, or nil when there is none or it is not one of ours (another
-- version, key or set of configurations, or a damaged file: it is timed again and replaced).
local function read_record(self, path, key_text)
  local f = path and io.open(path, "r")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  local fields, dropped = {}, {}
  for line in text:gmatch("[^\n]+") do
    local k, v = line:match("^(%S+) (.*)$")
    if k == "dropped" then
      local index, reason = v:match("^(%d+) (.*)$")
      if index then dropped[#dropped + 1] = { index = tonumber(index), reason = reason } end
    elseif k then
      fields[k] = v
    end
  end
  if not text:find("^" .. RECORD_VERSION .. "\n") or fields.key ~= key_text or fields.configs ~= self.configs_text then
    return nil
  end
  local index, ms = tonumber(fields.choice), tonumber(fields.median_ms)
  if not index or index ~= math.floor(index) or index < 1 or index > #self.configs or not ms then return nil end
  return { index = index, median_ms = ms, source = "disk", dropped = dropped }
end

local function write_record(self, folder, path, key_text, choice)
  if not path then return end
  os.execute("mkdir -p '" .. folder:gsub("'", "'\\''") .. "'")
  local lines = { RECORD_VERSION, "key " .. key_text, "configs " .. self.configs_text,
    "choice " .. choice.index, ("median_ms %.17g"):format(choice.median_ms) }
  for _, d in ipairs(choice.dropped) do lines[#lines + 1] = ("dropped %d %s"):format(d.index, d.reason) end
  local temp = ("%s.%d.tmp"):format(path, math.random(1, 2 ^ 30))
  local f = io.open(temp, "w")
  if not f then return end
  local ok = f:write(table.concat(lines, "\n"), "\n")
  ok = f:close() and ok
  if not ok or not os.rename(temp, path) then os.remove(temp) end
end

-- ---- tuning ----

-- Snapshots of the outputs the call passed, to put back before each run.
local function snapshot(self, args)
  local saved = {}
  for _, i in ipairs(self.outputs) do
    local t = args[i]
    if not tensor.is_tensor(t) then raise(("outputs: argument %d is not a tensor"):format(i)) end
    saved[i] = t:clone()
  end
  return saved
end

local function restore(saved, args)
  for i, copy in pairs(saved) do args[i]:copy(copy) end
end

local function free_all(t)
  for _, v in pairs(t) do v:free() end
end

-- Times `run` on dev's queue: reps launches between events, one wait at the end, all
-- inside an NVTX range named label. Returns the median and the sum of the timed runs.
local function time_on(dev, run, reps, min_ms, label)
  local tocha = require "tocha"
  local events, times, total = {}, {}, 0
  local function batch(first, last)
    for r = first, last do
      events[r] = events[r] or { tocha.event(dev.name), tocha.event(dev.name) }
      events[r][1]:record()
      local ok, err = pcall(run)
      if not ok then
        tocha.nvtx.pop()
        error(err, 0)
      end
      events[r][2]:record()
    end
    for r = first, last do
      times[r] = events[r][1]:elapsed(events[r][2])
      total = total + times[r]
    end
  end
  tocha.nvtx.push(label)
  batch(1, reps)
  -- Short kernels run more times, until their runs add up to min_ms (at most MAX_REPS runs):
  -- a steadier median, and the tuning's own costs small beside what it times.
  while total < min_ms and #times < MAX_REPS do
    local more = math.min(MAX_REPS - #times, math.max(#times, math.ceil((min_ms - total) / math.max(total / #times, 1e-4))))
    batch(#times + 1, #times + more)
  end
  tocha.nvtx.pop()
  local sorted = {}
  for r, t in ipairs(times) do sorted[r] = t end
  table.sort(sorted)
  return sorted[math.ceil(#sorted / 2)], total
end

local function tune(self, dev, args, n)
  local saved = snapshot(self, args)
  local results, dropped, reference = {}, {}, nil
  local timed_total = 0
  for i, cfg in ipairs(self.configs) do
    local reason
    local k = self.kernels[i]
    if k == nil then
      local ok, built = pcall(self.build, cfg)
      if ok and built and type(built) == "table" and built.build then
        local compiled, message = pcall(built.build, built, dev.kind == "sim" and "sim" or dev.target)
        if not compiled then ok, built = false, message end
      end
      if ok then
        k = built
        self.kernels[i] = k
      else
        reason = "build failed: " .. first_line(built)
        self.kernels[i] = false
      end
    elseif k == false then
      reason = "build failed"
    end
    if not reason then
      restore(saved, args)
      local ok, message = pcall(self.launch, k, cfg, unpack(args, 1, n))
      if not ok then
        reason = "launch failed: " .. first_line(message)
      elseif self.check and #self.outputs > 0 then
        if not reference then
          reference = {}
          for _, o in ipairs(self.outputs) do reference[o] = args[o]:clone() end
        else
          for _, o in ipairs(self.outputs) do
            local c = require("tocha").compare(args[o], reference[o], self.tolerance)
            if not c.ok then
              reason = ("wrong result: argument %d differs from configuration %d's by up to %.3g"):format(o,
                results[1] and results[1].index or 1, c.max_abs)
              break
            end
          end
        end
      end
    end
    if reason then
      dropped[#dropped + 1] = { index = i, reason = reason }
    else
      local median, total = time_on(dev, function() self.launch(k, cfg, unpack(args, 1, n)) end, self.reps,
        self.min_ms, ("tocha.autotune %s config %d"):format(self.name, i))
      timed_total = timed_total + total
      results[#results + 1] = { index = i, median_ms = median }
    end
  end
  restore(saved, args)
  free_all(saved)
  if reference then free_all(reference) end
  if #results == 0 then
    local lines = {}
    for _, d in ipairs(dropped) do lines[#lines + 1] = ("  config %d %s: %s"):format(d.index, text_of(self.configs[d.index]), d.reason) end
    raise(("%s: every configuration failed:\n%s"):format(self.name, table.concat(lines, "\n")))
  end
  local best = results[1]
  for _, r in ipairs(results) do if r.median_ms < best.median_ms then best = r end end
  return { index = best.index, median_ms = best.median_ms, source = "tuned", times = results, dropped = dropped,
    timed_ms = timed_total }
end

local function report(self, key_text, choice)
  local out = { ("tocha.autotune %s: config %d %s, %.4f ms (%s) for %s"):format(self.name, choice.index,
    text_of(self.configs[choice.index]), choice.median_ms, choice.source, key_text) }
  for _, r in ipairs(choice.times or {}) do
    out[#out + 1] = ("  config %d %s: %.4f ms"):format(r.index, text_of(self.configs[r.index]), r.median_ms)
  end
  for _, d in ipairs(choice.dropped or {}) do
    out[#out + 1] = ("  config %d %s: dropped, %s"):format(d.index, text_of(self.configs[d.index]), d.reason)
  end
  io.stderr:write(table.concat(out, "\n"), "\n")
end

-- The configuration for these arguments and how it was chosen: {index, median_ms, source =
-- "tuned" | "disk" | "memory", times, dropped}, tuning first when no record has it.
function Tuner:choice(...)
  local n = select("#", ...)
  local args = { ... }
  local dev = device_of(args, n)
  local key = self.key and self.key(...) or args
  local key_text = ("%s|%s|%s|%s"):format(text_of(key), dev.name, dev.product, dev.target)
  local how = mode()
  local choice = self.chosen[key_text]
  if choice then return self.configs[choice.index], { index = choice.index, median_ms = choice.median_ms, source = "memory",
    times = choice.times, dropped = choice.dropped } end
  local folder, path = record_path(self, hash(key_text))
  if not how.retune then choice = read_record(self, path, key_text) end
  if not choice then
    choice = tune(self, dev, args, n)
    write_record(self, folder, path, key_text, choice)
  end
  self.chosen[key_text] = choice
  if how.verbose or self.verbose then report(self, key_text, choice) end
  return self.configs[choice.index], choice
end

-- Runs the chosen configuration on the arguments (tuning first when needed); returns what
-- launch returns.
function Tuner:__call(...)
  local cfg, choice = self:choice(...)
  local k = self.kernels[choice.index]
  if not k then
    k = self.build(cfg)
    self.kernels[choice.index] = k
  end
  return self.launch(k, cfg, ...)
end

-- Forgets the choices made in this process (records on disk stay; TOCHA_AUTOTUNE=retune or
-- retune = true ignores them).
function Tuner:forget()
  self.chosen = {}
end

local SPEC_FIELDS = { name = true, configs = true, build = true, launch = true, key = true, outputs = true,
  check = true, rtol = true, atol = true, reps = true, min_ms = true, verbose = true }

-- tocha.autotune{name, configs, build, launch [, key, outputs, check, rtol, atol, reps, min_ms,
-- verbose]}.
function M.new(spec)
  if type(spec) ~= "table" then raise("expected a table {name=, configs=, build=, launch=}") end
  for k in pairs(spec) do
    if not SPEC_FIELDS[k] then
      raise(("%s: unknown field (expected name, configs, build, launch, key, outputs, check, rtol, atol, reps, "
        .. "min_ms and verbose)"):format(errors.show(k)))
    end
  end
  if type(spec.name) ~= "string" or not spec.name:match("^[%w_.-]+$") then
    raise("name: expected a name of letters, digits, '_', '.' and '-', got " .. errors.show(spec.name))
  end
  if type(spec.configs) ~= "table" or #spec.configs == 0 then raise("configs: expected a list of configurations") end
  for i, cfg in ipairs(spec.configs) do
    if type(cfg) ~= "table" then raise(("configs[%d]: expected a table, got %s"):format(i, type(cfg))) end
  end
  for _, f in ipairs({ "build", "launch" }) do
    if type(spec[f]) ~= "function" then raise(("%s: expected a function, got %s"):format(f, type(spec[f]))) end
  end
  if spec.key ~= nil and type(spec.key) ~= "function" then raise("key: expected a function, got " .. type(spec.key)) end
  local outputs = spec.outputs or {}
  if type(outputs) ~= "table" then raise("outputs: expected a list of argument positions") end
  for i, o in ipairs(outputs) do
    if type(o) ~= "number" or o ~= math.floor(o) or o < 1 then
      raise(("outputs[%d]: expected an argument position (1, 2, ...), got %s"):format(i, errors.show(o)))
    end
  end
  local reps = spec.reps or 10
  if type(reps) ~= "number" or reps ~= math.floor(reps) or reps < 1 or reps > 10000 then
    raise("reps: expected an integer from 1 to 10000, got " .. errors.show(reps))
  end
  local min_ms = spec.min_ms or 2
  if type(min_ms) ~= "number" or min_ms < 0 or min_ms ~= min_ms then
    raise("min_ms: expected a number of milliseconds >= 0, got " .. errors.show(min_ms))
  end
  return setmetatable({
    min_ms = min_ms,
    name = spec.name,
    configs = spec.configs,
    configs_text = text_of(spec.configs),
    build = spec.build,
    launch = spec.launch,
    key = spec.key,
    outputs = outputs,
    check = spec.check ~= false,
    tolerance = { rtol = spec.rtol or 1e-5, atol = spec.atol or 1e-6 },
    reps = reps,
    verbose = spec.verbose,
    kernels = {},
    chosen = {},
  }, Tuner)
end

M.Tuner = Tuner
errors.name(M.new, "autotune")
errors.methods(Tuner, "Autotune:", function(t) return getmetatable(t) == Tuner end)
return M
