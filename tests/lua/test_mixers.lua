-- Every sequence mixer from Lua: construction with the paper's names and options, parameter
-- counts (docs/mixers.md, "Parameter counts"), hook sites (each fires once; replacements reach the output),
-- training steps, and errors for bad options.
local T = require "check"

local archs = mech.architectures

T.test("the paper's architectures and variants have the spec's parameter counts", function()
  local nope = {
    attention = 624256, hyena = 657920, base_conv = 604160, based = 604992, h3 = 1083648,
    mamba = 590080, delta_net = 625920,
  }
  for _, a in ipairs(archs) do
    -- a mixer added to the registry needs its row here (docs/ARCHITECTURE.md, "Adding a mixer")
    if not nope[a] then error("mixer '" .. a .. "' has no row in nope (tests/lua/test_mixers.lua): add its parameter count", 0) end
    T.eq(mech.model { arch = a, pos_emb = false }:n_params(), nope[a], a)
    T.eq(mech.model { arch = a }:n_params(), nope[a] + 65536, a .. " with PE")
  end
  local variants = {
    { { arch = "mamba_without_conv" }, 590080 },
    { { arch = "mamba_without_conv", d_conv = 2 }, 590080 }, -- ignores d_conv (docs/mixers.md)
    { { arch = "mamba_no_causal_conv1d", d_conv = 1 }, 589312 },
    { { arch = "mamba_no_causal_conv1d" }, 589312 },
    { { arch = "mamba", d_conv = 2 }, 589568 },
    { { arch = "mamba", d_conv = 3 }, 589824 },
    { { arch = "based", d_conv = 1 }, 604864 },
    { { arch = "based", d_conv = 2 }, 604928 },
    { { arch = "based", d_conv = 4 }, 605056 },
    { { arch = "based_long_only" }, 608960 },
    { { arch = "base_conv_long_only" }, 608128 },
  }
  for _, v in ipairs(variants) do
    v[1].pos_emb = false
    T.eq(mech.model(v[1]):n_params(), v[2], v[1].arch .. " d_conv=" .. tostring(v[1].d_conv))
  end
  T.eq(mech.model { arch = "based", d_model = 128, vocab = 26, pos_emb = false }:n_params(), 319872)
  T.eq(mech.model { arch = "mamba", d_model = 256, n_layers = 1, vocab = 26, pos_emb = false }:n_params(), 445184)
end)

T.test("bad mixer options are errors naming the option", function()
  T.raises(function() mech.model { arch = "base_conv", d_conv = 0 } end, "d_conv")
  T.raises(function() mech.model { arch = "delta_net", d_conv = 0 } end, "d_conv")
  T.raises(function() mech.model { arch = "h3", d_model = 7 } end, "d_model")
  T.raises(function() mech.model { arch = "based", feature_dim = 40 } end, "feature_dim")
  T.raises(function() mech.model { arch = "mamba", d_conv = -3 } end, "d_conv")
  T.raises(function() mech.model { arch = "mamba", d_state = 0 } end, "d_state")
end)

T.test("every site fires once, observing changes no bit, replacing changes the output", function()
  local tokens = mech.tensor({ { 1, 5, 6, 7, 8, 2, 5 }, { 1, 9, 10, 11, 12, 2, 11 } }, { dtype = "int32" })
  local inner = {
    base_conv = "blocks.1.mixer.long_conv", based = "blocks.1.mixer.kv_state", h3 = "blocks.0.mixer.short_conv",
    hyena = "blocks.0.mixer.filter", mamba = "blocks.0.mixer.ssm_state", delta_net = "blocks.0.mixer.state",
    attention = "blocks.0.mixer.pattern",
  }
  -- a mixer without an entry in `inner` is tested at its first internal site
  local function inner_site(m, a)
    if inner[a] then return inner[a] end
    for _, s in ipairs(m:hook_names()) do
      if s.component:match("^mixer%.") then return s.name end
    end
    error("mixer '" .. a .. "' declares no internal site (mixer.*)", 0)
  end
  for _, a in ipairs(archs) do
    local m = mech.model { arch = a, d_model = 16, n_layers = 2, vocab = 20, pos_emb = false, seed = 2 }
    local fired, hooks = {}, {}
    for _, s in ipairs(m:hook_names()) do
      hooks[s.name] = function(act, ctx) fired[ctx.site] = (fired[ctx.site] or 0) + 1 end
    end
    local base = m:forward(tokens)
    T.truthy(base:equal(m:forward(tokens, hooks)), a .. ": observing hooks change no bit")
    for _, s in ipairs(m:hook_names()) do T.eq(fired[s.name], 1, a .. " " .. s.name) end
    local site = inner_site(m, a)
    local patched = m:forward(tokens, { [site] = function(x) return x * 0.5 end })
    T.falsy(patched:equal(base), a .. ": replacing " .. site .. " changes the output")
  end
end)

T.test("every architecture takes training steps from Lua", function()
  local tokens = mech.tensor({ { 1, 5, 6, 7, 8, 2, 5 }, { 1, 9, 10, 11, 12, 2, 11 } }, { dtype = "int32" })
  local targets = mech.full({ 2, 7 }, -100, { dtype = "int32" })
  targets[{ 0, 6 }] = 6
  targets[{ 1, 6 }] = 12
  for _, a in ipairs(archs) do
    local m = mech.model { arch = a, d_model = 16, n_layers = 2, vocab = 20, seed = 1 }
    local opt = mech.adamw(m)
    local first = m:evaluate(tokens, targets)
    for _ = 1, 30 do m:train_step(opt, tokens, targets, 1e-2) end
    local last = m:evaluate(tokens, targets)
    T.truthy(last.loss < 0.5 * first.loss, a .. ": loss " .. first.loss .. " -> " .. last.loss)
  end
end)

T.done()
