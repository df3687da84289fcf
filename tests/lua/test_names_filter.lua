-- Name filters are literal by default (issue 43): a name selects the sites holding it as whole
-- dot-separated parts, a typo is an error with the closest site, "%" is a name, and a Lua pattern
-- is used only as {pattern = ...}, a malformed one the caller's error. The same rule for the
-- built-in model (src/lua/cache.c, model.c) and mech.nn trees (lua/mech/nn/hooks.lua).
local T = require "check"
local nn = mech.nn
local here = "test_names_filter.lua:"

local m = mech.model { arch = "attention", d_model = 8, n_layers = 2, vocab = 8, seed = 1 }
local tok = mech.randint(0, 8, { 2, 5 })
local function cached(names)
  local _, c = m:run_with_cache(tok, { names = names })
  return c:names()
end
local function listed(filter)
  local out = {}
  for _, s in ipairs(m:hook_names(filter)) do out[#out + 1] = s.name end
  return out
end

T.test("built-in model: a name is literal, whole parts, in either spelling", function()
  T.raises(function() cached("blocks.0.hook_resid_pr") end, "did you mean 'blocks.0.hook_resid_pre'")
  T.raises(function() cached({ "blocks.0.block_input", "resid_pr" }) end, "unknown hook site 'resid_pr'")
  T.raises(function() cached("%") end, "unknown hook site '%'")
  T.eq(listed("blocks.0.hook_resid_pr"), {})
  T.eq(listed("%"), {})
  T.eq(cached("blocks.0.hook_resid_pre"), { "blocks.0.block_input" })
  T.eq(cached("resid_pre"), { "blocks.0.block_input", "blocks.1.block_input" })
  T.eq(cached("mlp_output"), { "blocks.0.mlp_output", "blocks.1.mlp_output" })
  T.eq(#listed("blocks.1"), #listed("blocks.0"))
  T.eq(listed("block"), {}, "part of a part is no match")
  local _, c = m:run_with_cache(tok, { names = "blocks.1.mixer.pattern" })
  T.eq(c:names("pattern"), { "blocks.1.mixer.pattern" })
  T.eq(c:names("patter"), {})
end)

T.test("built-in model: Lua patterns only as {pattern = ...}; a malformed one is the caller's error", function()
  T.eq(cached({ pattern = "^blocks%.1%.mixer%.[qk]$" }), { "blocks.1.mixer.k", "blocks.1.mixer.q" })
  T.eq(cached({ "blocks.0.block_input", { pattern = "resid_pr" } }), { "blocks.0.block_input", "blocks.1.block_input" })
  T.eq(listed({ pattern = "^blocks%.1%.mixer%.[qk]$" }), { "blocks.1.mixer.q", "blocks.1.mixer.k" })
  local err = T.raises(function() cached({ pattern = "%" }) end,
    "run_with_cache: option 'names': bad Lua pattern '%': malformed pattern (ends with '%')")
  T.truthy(err:find(here, 1, true), err)
  err = T.raises(function() m:hook_names({ pattern = "[a" }) end, "bad argument #1 to 'model:hook_names' (bad Lua pattern '[a': malformed pattern (missing ']'))")
  T.truthy(err:find(here, 1, true), err)
  local _, c = m:run_with_cache(tok, { names = "block_input" })
  T.raises(function() c:names({ pattern = "(" }) end, "bad argument #1 to 'cache:names' (bad Lua pattern '(': unfinished capture)")
  T.raises(function() m:hook_names({ pat = "x" }) end, "bad argument #1 to 'model:hook_names' (expected a site name, {pattern = a Lua pattern} or a function(name), got table)")
end)

T.test("mech.nn tree: the same rule", function()
  local tree = nn.Sequential(nn.Block { d_model = 4, mixer = nn.Attention }, nn.Block { d_model = 4, mixer = nn.Attention })
  local x = mech.ones({ 1, 3, 4 })
  local function keys(names)
    local _, c = tree:run_with_cache(x, { names = names })
    local out = {}
    for k in pairs(c) do out[#out + 1] = k end
    table.sort(out)
    return out
  end
  T.raises(function() keys("0.attention_outpu") end, "did you mean '0.attention_output'")
  T.raises(function() keys("%") end, "no hook site '%'")
  T.eq(keys("attention_output"), { "0.attention_output", "1.attention_output" })
  T.eq(keys("1.attention_output"), { "1.attention_output" })
  T.eq(keys({ "0.block_input", "1.block_output" }), { "0.block_input", "1.block_output" })
  T.eq(keys({ pattern = "^1%.attention_" }), { "1.attention_input", "1.attention_output" })
  local err = T.raises(function() keys({ pattern = "%" }) end, "run_with_cache: option names: bad Lua pattern '%'")
  T.falsy(err:find("mech/nn/", 1, true), err) -- no position inside lua/mech/nn/
end)

T.test("a {pattern =} table is read once: an __index that answers and then nil never crashes (the API fuzzer's seeds 4, 7, 8)", function()
  local function flaky()
    local reads = 0
    return setmetatable({}, { __index = function()
      reads = reads + 1
      if reads % 2 == 1 then return "resid" end
    end })
  end
  local _, cache = m:run_with_cache(tok)
  T.eq(#cache:names(flaky()), #cache:names({ pattern = "resid" }))
  T.eq(#m:hook_names(flaky()), #m:hook_names({ pattern = "resid" }))
  local _, c1 = m:run_with_cache(tok, { names = flaky() })
  local _, c2 = m:run_with_cache(tok, { names = { flaky(), "mlp_output" } })
  T.eq(#c1:names(), #cache:names({ pattern = "resid" }))
  T.eq(#c2:names(), #c1:names() + 2)
end)

T.done()
