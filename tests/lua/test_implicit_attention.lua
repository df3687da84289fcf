-- Implicit attention (issue 29, item 4): each mixer as an L × L matrix per head or channel whose
-- product with the values is the mixer's own output (to 1e-5, relative to its size).
local T = require "check"

local tok = mech.tensor({ { 1, 5, 9, 2, 7, 3, 11, 4, 6 }, { 8, 2, 6, 10, 1, 12, 5, 9, 3 } }, { dtype = "int32" })

-- v (B, L, H·d) in heads: (B, H, L, d), and back
local function heads(v, H) return v:reshape(v:size(0), v:size(1), H, v:size(2) // H):permute(0, 2, 1, 3) end
local function unheads(y) return y:permute(0, 2, 1, 3):reshape(y:size(0), y:size(2), y:size(1) * y:size(3)) end

local cases = {
  { "attention", 2, "mixer.ctx", function(A, c) return unheads(mech.matmul(A, heads(c["blocks.1.mixer.v"], A:size(1)))) end },
  { "based", 2, "mixer.y", function(A, c) return unheads(mech.matmul(A, heads(c["blocks.1.mixer.v"], A:size(1)))) end },
  { "delta_net", 2, "mixer.o", function(A, c) return unheads(mech.matmul(A, heads(c["blocks.1.mixer.v"], A:size(1)))) end },
  { "h3", nil, "mixer.o", function(A, c) -- head h mixes channels 2h, 2h+1; output channel d2·H + h
    local o = mech.matmul(A, heads(c["blocks.1.mixer.v"], A:size(1))) -- (B, H, L, 2)
    return o:permute(0, 2, 3, 1):reshape(o:size(0), o:size(2), 2 * o:size(1))
  end },
  { "hyena", nil, "mixer.y", function(A, c) -- one matrix per channel; values v = short_conv[2D:3D]
    local pc = c["blocks.1.mixer.short_conv"]
    local D = pc:size(2) // 3
    local v = pc[{ ":", ":", { 2 * D, 3 * D } }]:permute(0, 2, 1):unsqueeze(3)
    return mech.matmul(A, v):squeeze(3):permute(0, 2, 1)
  end },
}

T.test("implicit attention: the matrix times the values is the mixer's output", function()
  for _, case in ipairs(cases) do
    local arch, H, out, apply = case[1], case[2], case[3], case[4]
    local m = mech.model { arch = arch, d_model = 16, n_layers = 2, vocab = 20, n_heads = H, seed = 3 }
    local A = mech.interp.implicit_attention(m, tok, 1)
    T.eq(A:size(0), 2, arch)
    T.eq({ A:size(2), A:size(3) }, { 9, 9 }, arch)
    local _, c = m:run_with_cache(tok)
    local want = c["blocks.1." .. out]
    local err, size = (apply(A, c) - want):abs():max():item(), want:abs():max():item()
    T.truthy(size > 0 and err <= 1e-5 * size + 1e-7, string.format("%s: error %.3g for outputs of size %.3g", arch, err, size))
    -- causal: nothing above the diagonal
    T.eq(A[{ ":", ":", 0, { 1, 9 } }]:abs():sum():item(), 0, arch)
  end
end)

T.test("implicit attention: Mamba's is mamba_attention; errors", function()
  local m = mech.model { arch = "mamba", d_model = 16, n_layers = 2, vocab = 20, seed = 3 }
  T.eq((mech.interp.implicit_attention(m, tok, 0) - mech.interp.mamba_attention(m, tok, 0)):abs():max():item(), 0)
  local based = mech.model { arch = "based", d_model = 16, n_layers = 2, vocab = 20, seed = 3 }
  T.raises(function() mech.interp.implicit_attention(based, tok, 0) end, "layer 0's mixer is base_conv")
  T.raises(function() mech.interp.implicit_attention(m, tok, 2) end, "a layer in [0, 2)")
end)

T.done()
