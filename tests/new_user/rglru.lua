-- An RG-LRU (Griffin's real-gated linear recurrent unit) as a mixer: a page of Lua.
local nn = mech.nn
local RGLRU = nn.Module:extend("RGLRU")

function RGLRU:init(o)
  local D = o.d_model
  self.in_proj = nn.Linear(D, 2 * D)              -- the recurrent branch and the gate branch
  self.conv = nn.Conv1d(D, 4)
  self.rec_gate = nn.Linear(D, D)
  self.in_gate = nn.Linear(D, D)
  -- a = σ(Λ) per channel, in [0.9, 0.999] at init (Griffin's ring)
  self.lambda = self:param("lambda", { D }, { init = function(t, gen)
    local u = mech.rand(D, { generator = gen }) * 0.099 + 0.9
    t:copy_(mech.log(u / (1 - u)))
  end })
  self.out_proj = nn.Linear(D, D)
  self.hook_h = nn.HookPoint()                    -- the hidden state h_t (B, L, D)
end

function RGLRU:forward(x)
  local B, L, D = x:size(0), x:size(1), x:size(2)
  local u = self.in_proj(x)
  local xb, gb = self.conv(u:narrow(2, 0, D)), u:narrow(2, D, D)
  local r, i = mech.sigmoid(self.rec_gate(xb)), mech.sigmoid(self.in_gate(xb))
  local log_a = -8 * r * mech.softplus(-self.lambda) -- log a_t = c·r_t·log σ(Λ), c = 8
  local a = mech.exp(log_a)
  local inp = mech.sqrt(1 - a * a) * (i * xb)
  local h, hs = mech.zeros(B, D), {}
  for t = 0, L - 1 do
    h = a:select(1, t) * h + inp:select(1, t)
    hs[#hs + 1] = h
  end
  local y = self.hook_h(mech.stack(hs, 1))
  return self.out_proj(y * mech.gelu(gb))
end

mech.nn.register_mixer(RGLRU, { module = "rglru" })
return RGLRU
