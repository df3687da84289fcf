-- Text out (issue 29, item 5): model:generate, greedy and sampled, deterministic per seed.
local T = require "check"

local m = mech.model { d_model = 16, n_layers = 2, vocab = 20, seed = 1 }
local prompt = mech.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "int32" })

-- The last position's logits (B, V) of tokens.
local function last_logits(tokens)
  local lg = m:forward(tokens)
  return lg[{ ":", lg:size(1) - 1 }]
end

T.test("temperature 0 is repeated argmax forwards", function()
  local out = m:generate(prompt, { max_new = 6 })
  T.eq(out:shape(), { 2, 9 })
  local cur = prompt
  for _ = 1, 6 do
    local next_tok = mech.argmax(last_logits(cur), 1):reshape(2, 1)
    cur = mech.cat({ cur, next_tok }, 1)
  end
  for b = 0, 1 do for t = 0, 8 do T.eq(out[{ b, t }], cur[{ b, t }], b .. "," .. t) end end
  T.eq(m:generate(prompt, { max_new = 0 })[{ 1, 2 }], 6)
  T.eq(m:generate(prompt, { max_new = 2, temperature = 1, top_k = 1, seed = 9 })[{ 0, 4 }], out[{ 0, 4 }], "top_k = 1 is greedy")
end)

T.test("sampling: the same seed the same tokens, top_k keeps to the k likeliest", function()
  local a = m:generate(prompt, { max_new = 8, temperature = 1.5, seed = 3 })
  local b = m:generate(prompt, { max_new = 8, temperature = 1.5, seed = 3 })
  local c = m:generate(prompt, { max_new = 8, temperature = 1.5, seed = 4 })
  T.eq((a - b):abs():sum():item(), 0)
  T.truthy((a - c):abs():sum():item() > 0, "another seed draws other tokens")
  local k = m:generate(prompt, { max_new = 6, temperature = 2, top_k = 3, seed = 5 })
  for t = 3, 8 do
    local lg = last_logits(k[{ ":", { 0, t } }])
    for bi = 0, 1 do
      local chosen = lg[{ bi, k[{ bi, t }] }]
      local above = (lg[bi] - chosen):gt(0):sum():item() -- tokens strictly likelier than the chosen one
      T.truthy(above < 3, "step " .. t .. ": the token is among the 3 likeliest (" .. above .. " above)")
    end
  end
end)

T.test("generate: errors", function()
  T.raises(function() m:generate(prompt, { max_new = -1 }) end, "bad argument #2 to 'model:generate' (option 'max_new': expected an integer in [0, 10^6], got -1)")
  T.raises(function() m:generate(prompt, { temperature = -1 }) end, "(option 'temperature': expected a finite number >= 0 (0: greedy), got -1.0)")
  T.raises(function() m:generate(prompt, { top_k = -2 }) end, "(option 'top_k': expected an integer >= 0 (0: every token), got -2)")
  T.raises(function() m:generate(prompt, { max_new = 1100 }) end, "exceed the model's position table (max_pos = 1024)")
  T.raises(function() m:generate(prompt, { max_neww = 1 }) end, "did you mean 'max_new'")
  T.raises(function() m:generate({ { 1, 99 } }) end, "token id 99 out of range")
end)

T.done()
