-- Plain-Lua nearest-neighbour upsampling, forward and backward, NCHW, on flat tables.
local M = {}

-- y[b, c, oh, ow] = x[b, c, floor(oh / sh), floor(ow / sw)]
function M.forward(x, shape, sh, sw)
  local B, C, H, W = shape[1], shape[2], shape[3], shape[4]
  local OH, OW = H * sh, W * sw
  local y, n = {}, 0
  for plane = 0, B * C - 1 do
    for oh = 0, OH - 1 do
      local row = (plane * H + math.floor(oh / sh)) * W
      for ow = 0, OW - 1 do
        n = n + 1
        y[n] = x[row + math.floor(ow / sw) + 1]
      end
    end
  end
  return y
end

-- dx[b, c, ih, iw] = sum of the sh x sw block of dy it fed, summed in f64.
function M.backward(dy, shape, sh, sw)
  local B, C, H, W = shape[1], shape[2], shape[3], shape[4]
  local OH, OW = H * sh, W * sw
  local dx, n = {}, 0
  for plane = 0, B * C - 1 do
    for ih = 0, H - 1 do
      for iw = 0, W - 1 do
        local s = 0
        for i = 0, sh - 1 do
          local row = (plane * OH + ih * sh + i) * OW + iw * sw
          for j = 0, sw - 1 do s = s + dy[row + j + 1] end
        end
        n = n + 1
        dx[n] = s
      end
    end
  end
  return dx
end

return M
