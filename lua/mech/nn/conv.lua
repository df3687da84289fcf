-- nn.Conv1d(channels, kernel_size[, {bias = true}]): the mixers' short convolution, depthwise and
-- causal over x (B, L, D); weight (D, 1, K) as torch's Conv1d(groups = D), out[t] sees x[t-K+1..t].
local nn = require "mech.nn.module"
local C = require "mech.nn.checks"

local Conv1d = nn.Module:extend("Conv1d")

function Conv1d:init(channels, kernel_size, opts)
  local fn = "mech.nn.Conv1d"
  channels, kernel_size = C.size(fn, "argument 1 (channels)", channels), C.size(fn, "argument 2 (kernel_size)", kernel_size)
  opts = C.opts(fn, 3, opts, { "bias" })
  self.weight = self:param("weight", { channels, 1, kernel_size }, { init = "conv_weight" })
  if opts.bias ~= false then self.bias = self:param("bias", { channels }, { init = "conv_bias", fan = kernel_size }) end
end

function Conv1d:forward(x) return mech.causal_conv1d(x, self.weight, self.bias) end

return Conv1d
