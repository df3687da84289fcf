-- Persistent hooks (model:add_hook) are honoured by every entry point that runs the model
-- (docs/interventions.md, "Persistent hooks"): with a hook registered, each one gives the numbers of
-- the same computation with the hook passed to the call, and not the unhooked ones.
local T = require "check"
local ic = require "mech.interchange"

local task = mech.task.ar { num_kv = 64, min_length = 8, max_length = 8 }
local ds = task:dataset(16, { seed = 1, split = "test" })
local tok, tg = ds:batch(0, 4)
local SITE = "blocks.1.mlp_output"
local function halve(x) return x * 0.5 end

local function model(arch)
  return mech.model { arch = arch or "attention", d_model = 16, n_layers = 2, vocab = task:vocab_size(), seed = 5 }
end

local function maxdiff(a, b) return (a - b):abs():max():item() end

T.test("forward, hidden and loss", function()
  local m = model()
  local logits, hidden = m:forward(tok, { [SITE] = halve }), m:hidden(tok, { [SITE] = halve })
  local loss = m:loss(tok, tg, { [SITE] = halve })
  local plain = m:forward(tok)
  local h <close> = m:add_hook(SITE, halve)
  T.eq(maxdiff(m:forward(tok), logits), 0)
  T.eq(maxdiff(m:hidden(tok), hidden), 0)
  T.eq(m:loss(tok, tg):item(), loss:item())
  T.truthy(maxdiff(logits, plain) > 0, "the hook changes the logits")
end)

T.test("run_with_cache: logits, cached activations and gradients", function()
  local m = model()
  local want = m:forward(tok, { [SITE] = halve })
  local _, plain = m:run_with_cache(tok, { names = { SITE } })
  local answers = mech.tensor({ tok:get(0, 11), tok:get(1, 11), tok:get(2, 11), tok:get(3, 11) }, { dtype = "int32" })
  local rows = mech.tensor({ 10, 10, 10, 10 }, { dtype = "int32" })
  local opts = { names = { "blocks.0.block_output" }, grads = true, targets = answers, rows = rows }
  local _, _, plain_grads = m:run_with_cache(tok, opts)
  do
    local h <close> = m:add_hook(SITE, halve)
    local logits, cache = m:run_with_cache(tok, { names = { SITE } })
    T.eq(maxdiff(logits, want), 0, "logits")
    T.eq(maxdiff(cache[SITE], plain[SITE] * 0.5), 0, "the cache holds the hooked activation")
    local glogits, _, grads = m:run_with_cache(tok, opts)
    T.eq(maxdiff(glogits, want), 0, "logits with grads = true")
    T.truthy(maxdiff(grads["blocks.0.block_output"], plain_grads["blocks.0.block_output"]) > 0,
      "the gradient flows through the hook")
  end
  local logits = m:run_with_cache(tok, { names = { SITE } })
  T.eq(maxdiff(logits, m:forward(tok)), 0, "removed: the unhooked logits again")
end)

T.test("evaluate and train_step", function()
  local m, twin = model(), model()
  local loss = m:loss(tok, tg, { [SITE] = halve }):item()
  local plain = m:evaluate(tok, tg).loss
  m:add_hook(SITE, halve)
  T.near(m:evaluate(tok, tg).loss, loss, 1e-6, "evaluate")
  T.truthy(math.abs(plain - loss) > 1e-4, "the hook changes the loss")
  local stats = m:train_step(mech.adamw(m), tok, tg, 1e-2)
  T.near(stats.loss, loss, 1e-6, "train_step's loss is the hooked one")
  twin:train_step(mech.adamw(twin), tok, tg, 1e-2)
  local w = "backbone.layers.0.sequence_mixer.Wqkv.weight"
  T.truthy(maxdiff(m:param(w), twin:param(w)) > 0, "the hooked step's update differs")
end)

T.test("mech.interp.patch runs the hooks once per site, on the fast and the reference path", function()
  local m = model()
  local s = "blocks.1.block_input"
  local _, cache = m:run_with_cache(ds:batch(4, 4), { names = { s } })
  local src = cache[s]
  local plain = mech.interp.patch(m, tok, { site = s, source = src })
  local h <close> = m:add_hook(SITE, halve)
  local want = m:forward(tok, { [s] = function() return src end })
  local calls = 0
  local count <close> = m:add_hook(s, function() calls = calls + 1 end)
  T.eq(maxdiff(mech.interp.patch(m, tok, { site = s, source = src }), want), 0, "fast")
  T.eq(calls, 1, "one forward: the hook at the patched site fires once")
  T.eq(maxdiff(mech.interp.patch(m, tok, { site = s, source = src, reference = true }), want), 0, "reference")
  T.truthy(maxdiff(want, plain) > 0, "the hook changes the patched logits")
end)

T.test("mech.interp.site_mean and mamba_attention read hooked activations", function()
  local m = model()
  local s = "blocks.1.block_input"
  T.truthy(mech.interp.site_mean(m, ds, s):abs():max():item() > 0)
  do
    local h <close> = m:add_hook(s, function(x) return x * 0 end)
    T.eq(mech.interp.site_mean(m, ds, s):abs():max():item(), 0)
  end
  local mamba = model("mamba")
  local function alpha(scale) -- with B scaled: α = D on the diagonal + a part linear in B
    local h <close> = scale and mamba:add_hook("blocks.0.mixer.B", function(x) return x * scale end)
    return mech.interp.mamba_attention(mamba, tok, 0)
  end
  local a1, a_half, a0 = alpha(), alpha(0.5), alpha(0)
  T.truthy(maxdiff(a_half, a1) > 1e-3, "the hook changes α")
  T.near(maxdiff(a_half - a0, (a1 - a0) * 0.5), 0, 1e-6, "α's part in B halves")
end)

T.test("ic.evaluate: the hooked model's probabilities, the same on the fast and the reference path", function()
  local m = model()
  local opts = { layers = { 1 }, components = { "block_input", "mlp_output" }, seed = 42, batch = 4 }
  local plain = ic.evaluate(m, ds, opts)
  m:add_hook(SITE, halve)
  local res = ic.evaluate(m, ds, opts)
  opts.reference = true
  local ref = ic.evaluate(m, ds, opts)
  T.eq(maxdiff(res.restored_prob, ref.restored_prob), 0, "fast = reference")
  T.truthy(maxdiff(res.restored_prob, plain.restored_prob) > 0, "the hook changes the results")
  -- the clean run's answer probability, from the hooked forward
  local all = ds:batch(0, 16)
  local logits, pos = m:forward(all), ds:positions(0, 16)
  local original = res.original_prob:contiguous():view(-1)
  for b = 0, 15 do
    local t = pos:get(b, 5) -- target_item
    local p = logits[{ b, t - 1 }]:softmax(0)
    T.near(original:get(b), p:get(all:get(b, t)), 1e-6, "document " .. b)
  end
end)

T.test("an error in a persistent hook is an error of the call; the model works after", function()
  local m = model()
  local want = m:forward(tok)
  local h = m:add_hook(SITE, function() error("boom") end)
  T.raises(function() return m:run_with_cache(tok) end, "hook at " .. SITE .. ".*boom")
  T.raises(function() return m:evaluate(tok, tg) end, "boom")
  T.raises(function() return mech.interp.patch(m, tok, { site = SITE, source = mech.zeros(4, 13, 16) }) end, "boom")
  h:remove()
  T.eq(maxdiff(m:run_with_cache(tok), want), 0)
end)

T.test("a hook may run the model it hooks; the outer call keeps its hooks", function()
  local m = model()
  local want = m:forward(tok, { [SITE] = halve })
  local inner, busy
  m:add_hook(SITE, function(x)
    if not inner and not busy then -- nested: the hooks apply inside too
      busy = true
      inner = m:evaluate(tok, tg).loss
      busy = false
    end
    return x * 0.5
  end)
  local logits = m:run_with_cache(tok, { names = { SITE } })
  T.eq(maxdiff(logits, want), 0)
  T.near(inner, m:evaluate(tok, tg).loss, 1e-6)
end)

T.done()
