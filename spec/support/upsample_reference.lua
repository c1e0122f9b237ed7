-- Plain-Lua nearest-neighbour upsampling, forward and backward, NCHW and NHWC, on flat tables.
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

-- NHWC, shape {B, H, W, C}: y[b, oh, ow, c] = x[b, floor(oh / sh), floor(ow / sw), c]
function M.forward_nhwc(x, shape, sh, sw)
  local B, H, W, C = shape[1], shape[2], shape[3], shape[4]
  local y, n = {}, 0
  for b = 0, B - 1 do
    for oh = 0, H * sh - 1 do
      for ow = 0, W * sw - 1 do
        local pixel = ((b * H + math.floor(oh / sh)) * W + math.floor(ow / sw)) * C
        for c = 0, C - 1 do
          n = n + 1
          y[n] = x[pixel + c + 1]
        end
      end
    end
  end
  return y
end

-- NHWC dx[b, ih, iw, c] = sum of dy[b, ih * sh + i, iw * sw + j, c], summed in f64.
function M.backward_nhwc(dy, shape, sh, sw)
  local B, H, W, C = shape[1], shape[2], shape[3], shape[4]
  local OH, OW = H * sh, W * sw
  local dx, n = {}, 0
  for b = 0, B - 1 do
    for ih = 0, H - 1 do
      for iw = 0, W - 1 do
        for c = 0, C - 1 do
          local s = 0
          for i = 0, sh - 1 do
            for j = 0, sw - 1 do s = s + dy[((b * OH + ih * sh + i) * OW + iw * sw + j) * C + c + 1] end
          end
          n = n + 1
          dx[n] = s
        end
      end
    end
  end
  return dx
end

-- The reference of a layout: forward, backward.
function M.of(layout)
  if layout == "nhwc" then return M.forward_nhwc, M.backward_nhwc end
  return M.forward, M.backward
end

return M
