-- nn.Linear(in_features, out_features[, {bias = true}]): y = x·Wᵀ + b, as torch.nn.Linear.
local nn = require "mech.nn.module"
local C = require "mech.nn.checks"

local Linear = nn.Module:extend("Linear")

function Linear:init(in_features, out_features, opts)
  local fn = "mech.nn.Linear"
  in_features, out_features = C.size(fn, "argument 1 (in_features)", in_features), C.size(fn, "argument 2 (out_features)", out_features)
  opts = C.opts(fn, 3, opts, { "bias" })
  self.in_features, self.out_features = in_features, out_features
  self.weight = self:param("weight", { out_features, in_features }, { init = "linear_weight" })
  if opts.bias ~= false then self.bias = self:param("bias", { out_features }, { init = "linear_bias", fan = in_features }) end
end

function Linear:forward(x) return mech.linear(x, self.weight, self.bias) end

return Linear
