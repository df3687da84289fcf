-- Residual-stream analysis (issue 29, item 2): accumulated_resid, decompose_resid (parts sum to
-- the residual), stack_head_results, apply_ln_to_stack, direct logit attribution (sums to the
-- logit difference), hook_resid_mid, and the two figures.
local T = require "check"

local V, D, H = 20, 16, 4
local tok = mech.tensor({ { 1, 2, 3, 4, 5, 6 }, { 6, 5, 4, 3, 2, 1 } }, { dtype = "int32" })
local function model(arch)
  arch = arch or "attention"
  return mech.model { arch = arch, d_model = D, n_layers = 2, vocab = V, n_heads = arch == "attention" and H or nil, seed = 4 }
end
local function maxdiff(a, b) return (a - b):abs():max():item() end

T.test("decompose_resid: embed, pos_embed, each mixer and MLP; the parts sum to the residual", function()
  for _, arch in ipairs { "attention", "mamba", "hyena" } do
    local m = model(arch)
    local _, c = m:run_with_cache(tok)
    local st, labels = c:decompose_resid()
    T.eq(labels[1], "embed", arch)
    T.eq(labels[2], "pos_embed", arch)
    T.eq(st:size(0), #labels)
    T.near(maxdiff(st:sum(0), c["blocks.1.block_output"]), 0, 1e-5, arch)
    local st1, l1 = c:decompose_resid { layer = 1 }
    T.near(maxdiff(st1:sum(0), c["blocks.1.block_input"]), 0, 1e-5, arch .. " at layer 1")
    T.eq(l1[3], arch == "attention" and "0_attn_out" or "0_mixer_out")
    local st0 = c:decompose_resid { layer = 0 }
    T.near(maxdiff(st0:sum(0), c["blocks.0.block_input"]), 0, 1e-6, arch .. " at layer 0")
  end
end)

T.test("accumulated_resid and hook_resid_mid", function()
  local m = model()
  local _, c = m:run_with_cache(tok)
  local acc, labels = c:accumulated_resid()
  T.eq(labels, { "0_pre", "1_pre", "final_post" })
  T.eq(maxdiff(acc[1], c["blocks.1.block_input"]), 0)
  T.eq(maxdiff(acc[2], c["blocks.1.block_output"]), 0)
  local mid, ml = c:accumulated_resid { incl_mid = true, layer = 1 }
  T.eq(ml, { "0_pre", "0_mid", "1_pre" })
  T.eq(maxdiff(mid[1], c["blocks.0.block_input"] + c["blocks.0.attention_output"]), 0)
  T.eq(maxdiff(c["blocks.0.hook_resid_mid"], mid[1]), 0)
  T.eq(maxdiff(c:get("resid_mid", 0), mid[1]), 0)
  T.eq(maxdiff(c["blocks.0.resid_mid"], mid[1]), 0)
  local _, only = m:run_with_cache(tok, { names = "blocks.1.hook_resid_mid" })
  T.eq(only:names(), { "blocks.1.resid_mid" }) -- a site of its own
  T.eq(maxdiff(only["blocks.1.hook_resid_mid"], c["blocks.1.hook_resid_mid"]), 0)
  T.eq(m:site(1, "hook_resid_mid"), "blocks.1.resid_mid")
  -- a hook there replaces it: with resid_mid zeroed, the MLP reads LN2(0) = norm2.bias and the
  -- block output is the MLP output alone
  mech.no_grad(function() m:param("blocks.1.norm2.bias"):fill_(0.25) end)
  local seen = {}
  local function keep(k) return function(a) seen[k] = a:clone() end end
  m:run_with_hooks(tok, { ["blocks.1.hook_resid_mid"] = function(a) return a * 0 end,
    ["blocks.1.mlp_input"] = keep("in"), ["blocks.1.mlp_output"] = keep("out"), ["blocks.1.block_output"] = keep("post") })
  T.near(maxdiff(seen["in"], m:param("blocks.1.norm2.bias"):expand(2, 6, D)), 0, 1e-6)
  T.eq(maxdiff(seen.post, seen.out), 0)
  -- a Mamba block has no MLP, hence (as in TransformerLens) no resid_mid
  local mb = model("mamba")
  T.raises(function() mb:site(0, "resid_mid") end, "resid_mid")
  local _, mc = mb:run_with_cache(tok)
  local _, mlabels = mc:accumulated_resid { incl_mid = true }
  T.eq(mlabels, { "0_pre", "1_pre", "final_post" })
  local ln = c:accumulated_resid { apply_ln = true }
  T.eq(ln:shape(), acc:shape())
  T.raises(function() c:accumulated_resid { layer = 3 } end, "option 'layer': expected an integer in [0, 2]")
  T.raises(function() c:accumulated_resid { incl_mdi = true } end, "did you mean 'incl_mid'")
end)

T.test("stack_head_results: each layer's heads sum to its mixer output less the bias", function()
  local m = model()
  local _, c = m:run_with_cache(tok)
  local st, labels = c:stack_head_results()
  T.eq(st:shape(), { 2 * H, 2, 6, D })
  T.eq(labels[H + 2], "L1H1")
  for l = 0, 1 do
    local sum = st[{ { l * H, (l + 1) * H } }]:sum(0) + m:weight("b_O", l)
    T.near(maxdiff(sum, c["blocks." .. l .. ".attention_output"]), 0, 1e-5)
  end
  T.eq(maxdiff(st[H + 1], c["blocks.1.attn.hook_result"][{ ":", ":", 1 }]), 0) -- L1H1
  local wr, wl = c:stack_head_results { incl_remainder = true }
  T.eq(wl[#wl], "remainder")
  T.near(maxdiff(wr:sum(0), c["blocks.1.block_output"]), 0, 1e-5)
  local _, none = m:run_with_cache(tok, { names = "block_input" })
  T.raises(function() none:stack_head_results() end, "holds no mixer.head_result")
end)

T.test("apply_ln_to_stack and direct logit attribution sum to the logits and the logit difference", function()
  local m = model()
  local logits, c = m:run_with_cache(tok)
  local st, labels = c:decompose_resid()
  local normed = c:apply_ln_to_stack(st)
  local lnb = m:param("ln_final.b")
  T.near(maxdiff(mech.matmul(normed:sum(0) + lnb, m:weight("W_U")), logits), 0, 1e-4)
  local answers, wrong = { 3, 9 }, { 7, 2 }
  local attrs, bias = c:logit_attrs(st, { answers = answers, wrong = wrong, rows = { 5, 4 } })
  T.eq(attrs:shape(), { #labels, 2 })
  local total = attrs:sum(0) + bias
  T.near(total[0], logits[{ 0, 5, 3 }] - logits[{ 0, 5, 7 }], 1e-4)
  T.near(total[1], logits[{ 1, 4, 9 }] - logits[{ 1, 4, 2 }], 1e-4)
  -- per head too: heads plus the rest sum to the same difference
  local hs = c:stack_head_results { incl_remainder = true }
  local ha, hb = c:logit_attrs(hs, { answers = answers, wrong = wrong, rows = { 5, 4 } })
  T.near((ha:sum(0) + hb)[0], total[0], 1e-4)
  -- without `wrong`: the logit itself
  local la, lb = c:logit_attrs(st, { answers = 3 })
  T.near((la:sum(0) + lb)[1], logits[{ 1, 5, 3 }], 1e-4)
  T.raises(function() c:logit_attrs(st, {}) end, "option 'answers'")
  T.raises(function() c:logit_attrs(st, { answers = 99 }) end, "token id 99 out of range")
  T.raises(function() c:logit_attrs(st, { answers = 1, rows = 9 }) end, "rows in [0, 6)")
  T.raises(function() c:apply_ln_to_stack(mech.zeros(3)) end, "expected a stack of residual parts")
  local orphan = setmetatable({}, getmetatable(c))
  T.raises(function() orphan:decompose_resid() end, "this cache has no model")
end)

T.test("mech.plot.layers and mech.plot.components draw the analyses", function()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local m = model()
  local _, c = m:run_with_cache(tok)
  local st, labels = c:decompose_resid()
  local attrs = c:logit_attrs(st, { answers = 3, wrong = 7 })
  T.truthy(rawequal(mech.plot.layers, mech.interp.plot_layers)) -- one function, two names
  T.truthy(rawequal(mech.plot.components, mech.interp.plot_components))
  local mean = attrs:mean(1)
  mech.plot.components(mean, labels, { out = dir .. "/dla.png", title = "DLA" })
  T.truthy(io.open(dir .. "/dla.png"))
  -- the figure's data: each bar is its component's mean attribution
  local csv = io.open(dir .. "/dla.csv"):read("a")
  T.truthy(csv:find("0_attn_out", 1, true))
  for i, lab in ipairs(labels) do
    local v = csv:match("\n%d+," .. (lab:gsub("%p", "%%%0")) .. ",[^,]*,([^\n]+)") -- panel,category,series,value
    T.near(tonumber(v), mean:get(i - 1), 1e-5, lab)
  end
  local acc = c:accumulated_resid()
  mech.plot.layers(acc:pow(2):mean(3):mean(2):mean(1):sqrt(), { out = dir .. "/norm.png", labels = { "rms" } })
  T.truthy(io.open(dir .. "/norm.png"))
  mech.interp.plot_layers(acc:pow(2):mean(3):mean(2):mean(1):sqrt(), { out = dir .. "/norm2.png" }) -- the old name
  T.truthy(io.open(dir .. "/norm2.png"))
  T.raises(function() mech.plot.components(attrs:mean(1), { "x" }, { out = dir .. "/x.png" }) end,
    "mech.plot.components: argument 2 expected")
  T.raises(function() mech.plot.layers(3) end, "mech.plot.layers: argument 1 expected a tensor")
  os.execute("rm -rf " .. dir)
end)

T.done()
