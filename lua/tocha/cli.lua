-- tocha.cli: what the tocha executable prints: the REPL banner, `tocha info` and
-- `tocha cache info|clear`.
local tocha = require "tocha"

local M = {}

local function mib(bytes) return ("%.1f MiB"):format(bytes / 1048576) end

-- One line: version, the device in use and why.
function M.banner()
  local v = tocha.versions()
  local ok, dev, why = pcall(tocha.default_device)
  local device_line = ok and ("%s (%s): %s"):format(dev.name, dev.product, why) or tostring(dev)
  return ("tocha %s on %s -- device %s"):format(v.tocha, v.luajit, device_line)
end

-- A command's arguments past those it takes are refused before it does anything.
local function refuse_extra(command, takes, ...)
  if select("#", ...) > 0 then
    error(("tocha %s: unexpected argument '%s' (%s takes %s)"):format(command, tostring((...)), command, takes), 0)
  end
end

function M.info(...)
  refuse_extra("info", "none", ...)
  local v = tocha.versions()
  print(("tocha %s (%s)"):format(v.tocha, v.luajit))
  print("CUDA driver: " .. (v.driver or "not loaded"))
  print("NVRTC: " .. (v.nvrtc or "not loaded"))
  if v.cuda_unavailable ~= "" then print("cuda unavailable: " .. v.cuda_unavailable) end
  local ok, dev, why = pcall(tocha.default_device)
  if ok then
    print(("default device: %s (%s)"):format(dev.name, why))
  else
    print("default device: none: " .. tostring(dev))
  end
  print("devices:")
  for _, d in ipairs(tocha.devices()) do
    local i = d:info()
    print(("  %-8s %s, target %s%s, memory %s free of %s"):format(i.name, i.product, i.target,
      i.compute_capability and (", compute capability " .. i.compute_capability) or "",
      mib(i.memory_free), mib(i.memory_total)))
  end
  print("compile target without a GPU: " .. (os.getenv("TOCHA_ARCH") or "sm_90"))
  M.cache("info")
end

function M.cache(command, ...)
  refuse_extra("cache", "one command", ...) -- `cache clear extra` must not clear
  if command == nil or command == "info" then
    local dir = tocha.cache.dir()
    if not dir then
      print("kernel cache: off (TOCHA_CACHE=off, or no usable folder)")
      return
    end
    local n, bytes = tocha.cache.usage()
    print(("kernel cache: %s, %d entries, %s"):format(dir, n, mib(bytes)))
  elseif command == "clear" then
    local n = tocha.cache.clear()
    print(("kernel cache: removed %d entries from %s"):format(n, tocha.cache.dir() or "(off)"))
  else
    error(("tocha cache: unknown command '%s' (expected info or clear)"):format(tostring(command)), 0)
  end
end

return M
