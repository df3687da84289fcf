--- The claims ledger as data: one entry per finding of the paper (the findings of spec §8 and spec §9), each with
--- its section, the paper's words, the paper's own numbers at d = 32 and 64 with their source tag
--- (spec paper-numbers.md: [N] the authors' notebook, [F] the figures, [T] the text, [A3] the v3
--- abstract, [R] its reviews, [G] the generator), and the comparisons that test it: cells (cells.lua)
--- against a bound or each other, each bound with its source ("paper": the paper's own threshold or
--- numbers; "mechlab": a bound the paper does not set). verdict.lua applies them, one rule for all.
--- scale = "paper": the paper makes the claim from its d >= 128 cells only. Part of mech.paper.tables.
local paper = require "mech.paper"
local C = require "mech.paper.tables.cells"

local function chk(op, a, b, src, tol) return { op = op, a = a, b = b, src = src, tol = tol } end
local function floor_chk(a) return { op = "on floor", a = a, needs_b = false } end
local function above_floor(a) return { op = "above floor", a = a, needs_b = false } end

-- checks for every (architecture, width): f(a, w) returns one check or a list
local function each(archs, widths, f)
  local out = {}
  for _, a in ipairs(archs) do
    for _, w in ipairs(widths) do
      local c = f(a, w)
      if c and c.op then out[#out + 1] = c elseif c then for _, x in ipairs(c) do out[#out + 1] = x end end
    end
  end
  return out
end

local W = { 32, 64 }
local ALL = { "attention", "based", "base_conv", "hyena", "h3", "mamba" }
local function others(a)
  local out = {}
  for _, b in ipairs(ALL) do if b ~= a then out[#out + 1] = b end end
  return out
end
local SSM = { "hyena", "h3", "mamba" }
local INDUCTION = { "attention", "based", "base_conv" }
local HARD = { "pcfg_easy_8192", "pcfg_10_20" }
-- "mainly induction" on ATR: the paper's own cells at d <= 64 go down to 0.27 (BaseConv, (5, 20),
-- d = 32 [N]); a bound of 0.5 would fail the paper's own numbers (Attention (10, 20) d = 32 is
-- -0.23 there: the paper's claim does not hold in that cell either)
local INDUCTION_BOUND = "mechlab, at the paper's own lowest (5, 20) cell, BaseConv d = 32, 0.27 [N]"

local claims = {
  -- Sec. 5.1 and the AR headline numbers (spec §8.1)
  { section = "Sec. 5.1", words = "Attention reaches 100% at d ≥ 32", paper = "100.00 / 100.00 [N]",
    checks = function(s) return each({ "attention" }, W, function(a, w) return chk(">=", C.ar_best(s, a, w), 0.99,
      "mechlab: 100 % read as 0.99") end) end },
  { section = "Sec. 5.1", words = "Based is near-perfect, with \"roughly the same dimension-wise scaling curve\" as Attention",
    paper = "Based 93.12 / 99.06, Attention 100.00 / 100.00 [N]",
    checks = function(s) return each({ "based" }, W, function(a, w) return chk("~", C.ar_best(s, a, w),
      C.ar_best(s, "attention", w), "paper: its own d = 32 gap, 6.88 points [N]", 0.07) end) end },
  { section = "Sec. 5.1", words = "Mamba is a \"close third\", 91.25% at d = 256", paper = "76.88 / 80.62; d = 256: 91.25 [N]",
    checks = function(s)
      local out = { chk("~", C.ar256(s), 0.9125, "paper's d = 256 [N], mechlab's tolerance", 0.05),
        chk(">", C.ar_best(s, "based", 64), C.ar_best(s, "mamba", 64)) }
      for _, b in ipairs { "hyena", "base_conv", "h3" } do out[#out + 1] = chk(">", C.ar_best(s, "mamba", 64), C.ar_best(s, b, 64)) end
      return out
    end },
  { section = "Sec. 5.1, spec §8.1", words = "Hyena, BaseConv and H3 fail AR: < 30 %, < 10 %, < 3 % at d = 256",
    paper = "Hyena 0.94 / 2.81, BaseConv 0.94 / 3.75, H3 0.62 / 1.88 [N]",
    checks = function(s)
      local bound = { hyena = 0.3, base_conv = 0.1, h3 = 0.03 }
      return each({ "hyena", "base_conv", "h3" }, W, function(a, w) return chk("<", C.ar_best(s, a, w), bound[a],
        "paper [T], its d = 256 bound") end)
    end },
  { section = "Sec. 5.1", words = "nearly all Attention and Based checkpoints with 100.00% attribution at the value (induction)",
    paper = "Attention 100.00 / 100.00, Based 99.91 / 100.00 (×100) [N]",
    checks = function(s) return each({ "attention", "based" }, { 0 }, function(a) return chk(">=", C.ar_attr(s, a, "value"), 0.9,
      "mechlab: ≈ 1") end) end },
  { section = "Sec. 5.1", words = "the best Mamba, Hyena and H3 models perform direct retrieval at layer 0 via the query token",
    paper = "@ Value ×100: Mamba 0.02 / 0.00, Hyena −0.62 / 0.01, H3 −0.64 / 0.08 [N]; the best is at d = 256",
    checks = function(s)
      local out = each(SSM, { 64 }, function(a, w) return chk(">", C.best_attr(s, a, w, "query"), C.best_attr(s, a, w, "key")) end)
      out[#out + 1] = chk(">", C.m256_attr(s, "query"), C.m256_attr(s, "key"))
      return out
    end },
  { section = "Sec. 5.1", words = "worse SSM checkpoints mix query and key (delayed direct retrieval); Mamba's lie near Attrib@Query + Attrib@Key ≈ 1",
    paper = "Fig. 3c: Mamba on the anti-diagonal [F]",
    checks = function(s) return { chk("~", C.mamba_qk(s), 1, "mechlab", 0.2) } end },
  { section = "Sec. 5.1", words = "the single BaseConv checkpoint that passes the filter shows partial induction (Attrib@Value ≈ 0.58)",
    paper = "one checkpoint, @ Value ≈ 0.58 [F]",
    checks = function(s) return { chk("is", C.base_conv_value_runs(s), 1, "paper [F]") } end },
  { section = "Sec. 5.1", words = "direct retrieval has asymptotically worse capacity (Jelassi et al. 2024)", paper = "–",
    missing = "a citation of a theoretical result; the paper runs no experiment on it" },
  -- Sec. 5.2
  { section = "spec §8.1", words = "ATR (5, 20): every architecture between roughly 70 % and 97 %",
    paper = "75.62–94.38 / 82.50–96.25 [N]",
    checks = function(s) return each(ALL, W, function(a, w)
      return { chk(">=", C.atr(s, a, w), 0.70, "paper [T]"), chk("<=", C.atr(s, a, w), 0.97, "paper [T]") } end) end },
  { section = "Sec. 5.2", words = "Mamba matches or beats all architectures at every d when |Σ| = 20, most clearly with L_max = 10",
    paper = "(5, 20) Mamba 94.38 / 96.25, next 91.25 / 93.75; (10, 20) 87.81 / 86.25, next 71.56 / 70.00 [N]",
    checks = function(s)
      local out = each(others("mamba"), W, function(b, w) return chk(">~", C.atr(s, "mamba", w), C.atr(s, b, w)) end)
      for _, c in ipairs(each(others("mamba"), W, function(b, w)
        return chk(">~", C.hard(s, "pcfg_10_20", "mamba", w), C.hard(s, "pcfg_10_20", b, w)) end)) do out[#out + 1] = c end
      return out
    end },
  { section = "Sec. 5.2", words = "Attention beats Mamba only for |Σ| = 8192 at d ≤ 64",
    paper = "(5, 8192) Attention 84.06 / 89.38, Mamba 78.12 / 87.19 [N]",
    checks = function(s) return each({ "attention" }, W, function(a, w)
      return chk(">", C.hard(s, "pcfg_easy_8192", a, w), C.hard(s, "pcfg_easy_8192", "mamba", w)) end) end },
  { section = "Sec. 5.2", words = "longer rules should stress AR-designed SSMs, yet they do not hurt Mamba",
    paper = "Mamba (5, 20) 94.38 / 96.25, (10, 20) 87.81 / 86.25 [N]",
    checks = function(s) return each({ "mamba" }, W, function(a, w)
      return chk("~", C.hard(s, "pcfg_10_20", a, w), C.atr(s, a, w), "paper: its own d = 64 drop, 10 points [N]", 0.10) end) end },
  { section = "Sec. 5.2", words = "Attention, Based and BaseConv mainly learn induction on ATR",
    paper = "@ Value ×100, (5, 20): Attention 109 / 102, Based 94 / 95, BaseConv 27 / 51 [N]",
    checks = function(s)
      local out = each(INDUCTION, W, function(a, w) return chk(">=", C.atr_attr(s, a, w, "value"), 0.25, INDUCTION_BOUND) end)
      for _, preset in ipairs(HARD) do
        for _, c in ipairs(each(INDUCTION, W, function(a, w)
          return chk(">=", C.hard_attr(s, preset, a, w, "value"), 0.25, INDUCTION_BOUND) end)) do out[#out + 1] = c end
      end
      -- a run below the filter has no cell: leave it out rather than call the claim not run
      local kept = {}
      for _, c in ipairs(out) do if c.a then kept[#kept + 1] = c end end
      return kept
    end },
  { section = "Sec. 5.2", words = "the other SSMs (Hyena, H3, Mamba) do direct retrieval on ATR",
    paper = "@ Value ×100, (5, 20): H3 8.6 / 7.2, Hyena 12.0 / 11.5, Mamba 1.9 / 3.1 [N]",
    checks = function(s)
      local out = each(SSM, W, function(a, w) return chk("<", C.atr_attr(s, a, w, "value"), 0.2, "mechlab; the paper's own ≤ 0.12") end)
      for _, preset in ipairs(HARD) do
        for _, c in ipairs(each(SSM, W, function(a, w)
          return chk("<", C.hard_attr(s, preset, a, w, "value"), 0.2, "mechlab") end)) do out[#out + 1] = c end
      end
      local kept = {}
      for _, c in ipairs(out) do if c.a then kept[#kept + 1] = c end end
      return kept
    end },
  { section = "Sec. 5.2", words = "for |Σ| = 8192, all direct-retrieval SSMs delay retrieval to layer 1 (@ Key)",
    paper = "Fig. 4b medians, (5, 8192): @ Key 0.82 / 0.40 / 0.85 against @ Query 0.10 / 0.32 / 0.08 (H3, Hyena, Mamba) [F]",
    checks = function(s)
      local out = {}
      for _, c in ipairs(each(SSM, W, function(a, w)
        return chk(">", C.hard_attr(s, "pcfg_easy_8192", a, w, "key"), C.hard_attr(s, "pcfg_easy_8192", a, w, "query")) end)) do
        if c.a and c.b then out[#out + 1] = c end
      end
      return out
    end },
  { section = "Sec. 5.2", words = "Mamba is still highly accurate without induction", paper = "(5, 20) 94.38 / 96.25; @ Value ×100 1.85 / 3.10 [N]",
    checks = function(s) return each({ "mamba" }, W, function(a, w)
      return { chk(">=", C.atr(s, a, w), 0.8, "mechlab: highly accurate"), chk("<", C.atr_attr(s, a, w, "value"), 0.2, "mechlab") } end) end },
  -- Sec. 5.3
  { section = "Sec. 5.3", words = "Mamba has the highest dev accuracy; Attention the highest test accuracy for d ≥ 32",
    paper = "dev: Mamba 93.12 / 96.88 the highest; test: Attention 53.44 / 60.00 the highest [N]",
    checks = function(s)
      local out = each(others("mamba"), W, function(b, w) return chk(">~", C.split(s, "mamba", w, "dev"), C.split(s, b, w, "dev")) end)
      for _, c in ipairs(each(others("attention"), W, function(b, w)
        return chk(">~", C.split(s, "attention", w, "test"), C.split(s, b, w, "test")) end)) do out[#out + 1] = c end
      return out
    end },
  { section = "Sec. 5.3", words = "Mamba has unusually high dev accuracy for a given test accuracy (memorisation)",
    paper = "dev − test: Mamba 60.6 / 50.3, Attention 37.8 / 35.0, H3 44.4 / 39.1 [N]",
    checks = function(s) return each({ "attention", "h3", "based" }, W, function(b, w)
      return chk(">", C.split_gap(s, "mamba", w), C.split_gap(s, b, w)) end) end },
  { section = "Sec. 5.3", words = "yet Mamba's test accuracy is above the other non-Attention architectures", scale = "paper",
    paper = "test: Mamba 32.50 / 46.56, below H3 44.06 / 49.38 and Based 42.50 / 48.44; above from d = 128 [N]" },
  { section = "Sec. 5.3", words = "H3 has \"nearly Attention-level generalisation\"", paper = "test: H3 44.06 / 49.38, Attention 53.44 / 60.00 [N]",
    checks = function(s) return each({ "h3" }, W, function(a, w) return chk("~", C.split(s, a, w, "test"),
      C.split(s, "attention", w, "test"), "paper: its own d = 64 gap, 10.6 points [N]", 0.11) end) end },
  { section = "Sec. 5.3", words = "BaseConv generalises \"vanishingly little\"", paper = "test: BaseConv 16.56 / 19.69, the lowest but Hyena's 13.44 at d = 32 [N]",
    checks = function(s) return each({ "base_conv" }, W, function(a, w) return floor_chk(C.split(s, a, w, "test")) end) end },
  { section = "Sec. 5.3", words = "mechanisms are consistent between dev and test, and match the no-split ATR results",
    paper = "Fig. 5c medians, dev → test: @ Value Attention 1.05 → 1.20, Based 0.92 → 0.85; @ Query + @ Key Hyena 1.10 → 0.70 [F]",
    checks = function(s)
      -- the paper's own Fig. 5c medians move by up to 0.40 between dev and test (Hyena @ Query + @ Key)
      local src = "paper: its own Fig. 5c medians move by up to 0.40 [F]"
      local out = each({ "attention", "based" }, W, function(a, w) return chk("~", C.split_shift(s, a, w, { "value" }), 0, src, 0.4) end)
      for _, c in ipairs(each(SSM, W, function(a, w)
        return chk("~", C.split_shift(s, a, w, { "query", "key" }), 0, src, 0.4) end)) do out[#out + 1] = c end
      return out
    end },
  { section = "Sec. 5.3", words = "the exception: BaseConv does induction on dev but much less on test (\"brittle\")",
    paper = "Fig. 5c medians: BaseConv @ Value dev 0.50, test 0.15 [F]",
    checks = function(s) return each({ "base_conv" }, W, function(a, w) return chk(">", C.split_shift(s, a, w, { "value" }), 0.2,
      "mechlab") end) end },
  { section = "Sec. 5.3", words = "induction is not more general than direct retrieval: Attention and Mamba generalise best", scale = "paper",
    paper = "test at d = 64: Attention 60.0 > H3 49.4 > Based 48.4 > Mamba 46.6 > Hyena 34.1 > BaseConv 19.7; Mamba second from d = 128 [N]" },
  -- Sec. 5.4
  { section = "Sec. 5.4", words = "short convolutions enable AR and ATR in Mamba and Based (the section's title)",
    paper = "AR: Mamba d_conv 0 0.04 / 0.03, Based long conv 0.02 / 0.04 [F]; ATR: no v2 numbers",
    checks = function(s)
      local out = each({ "mamba" }, W, function(_, w) return chk("<", C.mconv(s, 0, w), 0.07, "paper [T]") end)
      for _, w in ipairs(W) do out[#out + 1] = chk("<", C.based(s, "long", w), 0.1, "paper [T]") end
      for _, w in ipairs(W) do out[#out + 1] = floor_chk(C.atr_conv(s, 0, w)) end
      return out
    end },
  { section = "Sec. 5.4", words = "a step change from d_conv 1 to 2, which \"introduces previous-token information\"; without a short conv Mamba fails AR",
    paper = "d_conv 0: 0.04 / 0.03, 1: 0.03 / 0.02, 2: 0.19 / 0.91, 3: 0.71 / 0.91, 4: 0.77 / 0.81 [F]",
    checks = function(s)
      local out = each({ 0, 1 }, W, function(k, w) return chk("<", C.mconv(s, k, w), 0.07, "paper [T]") end)
      for _, k in ipairs { 2, 3, 4 } do out[#out + 1] = chk(">", C.mconv(s, k, 64), C.mconv(s, 1, 64)) end
      return out
    end },
  { section = "Sec. 5.4", words = "a larger kernel means earlier (layer-0) direct retrieval: with d_conv 4 most checkpoints retrieve at the query",
    paper = "Fig. 6b medians: d_conv 4 @ Query ≈ 1.0, @ Key ≈ 0; d_conv 2 @ Query ≈ 0.05 [F]",
    checks = function(s) return { chk(">", C.mconv_attr(s, 4, "query"), C.mconv_attr(s, 4, "key")),
      chk(">", C.mconv_attr(s, 4, "query"), C.mconv_attr(s, 2, "query")),
      chk(">", C.mconv_best_attr(s, 4, "query"), C.mconv_best_attr(s, 4, "key")) } end },
  { section = "Sec. 5.4", words = "Based works with kernels 2–4; kernel 1 or a long conv hurts AR as badly as d_conv < 2 (< 10 %)",
    paper = "kernel 2: 0.94 / 0.99, 3: 0.93 / 0.99, 4: 0.86 / 0.97; kernel 1: 0.02 / 0.03; long: 0.02 / 0.04 [F]",
    checks = function(s)
      local out = each({ "1", "long" }, W, function(g, w) return chk("<", C.based(s, g, w), 0.1, "paper [T]") end)
      for _, g in ipairs { "2", "3 (`ar`)", "4" } do out[#out + 1] = chk(">=", C.based(s, g, 64), 0.9, "mechlab; the paper's ≥ 0.97") end
      return out
    end },
  { section = "Sec. 5.4", words = "short convs are not sufficient: Hyena also has a short conv and fails",
    paper = "Hyena 0.94 / 2.81 [N]",
    checks = function(s) return each({ "hyena" }, W, function(a, w) return chk("<", C.ar_best(s, a, w), 0.3, "paper [T]") end) end },
  -- appendix D
  { section = "D.1", words = "Attention without position embeddings fails AR (100.00% → 5.62% at d = 256)",
    paper = "≈ 0.05–0.09 at every d [F]",
    checks = function(s) return each({ 0 }, W, function(_, w) return chk("<", C.nope(s, w), 0.1, "paper [F]: ≤ 0.09") end) end },
  { section = "D.1", words = "SSMs are generally worse with PE",
    paper = "AR: Mamba PE 0.12 / 0.52, NoPE 0.43 / 0.72; Based PE 0.79 / 0.91, NoPE 0.93 / 0.99 [F]; ATR: no SSM reading",
    -- on AR only Mamba's and Based's pairs: Hyena, BaseConv and H3 fail AR either way (at chance,
    -- `pe_pairs` rows), so their pairs say nothing about positions. On ATR (5, 20) every SSM learns,
    -- so each pair counts (a pair on the setting's floor cannot be ranked: verdict.lua)
    checks = function(s)
      local out = each({ "based", "mamba" }, W, function(a, w)
        local pe = C.ar_pe(s, a, w)
        return pe and chk("<", pe, C.ar(s, a, w), "paper [F]: PE below NoPE")
      end)
      for _, c in ipairs(each({ "hyena", "base_conv", "based", "h3", "mamba" }, W, function(a, w)
        local pe = C.atr_pe(s, a, w)
        return pe and chk("<", pe, C.atr(s, a, w), "paper [T]: PE below NoPE")
      end)) do out[#out + 1] = c end
      return out
    end },
  { section = "D.1", words = "on ATR, NoPE Attention beats PE Attention at small d",
    paper = "(5, 20) NoPE 0.90 / 0.90, PE 0.88 / 0.94; (10, 20) NoPE 0.63 / 0.70, PE 0.57 / 0.76 [F]",
    -- the smallest quick width only: at d = 64 the paper's own readings have PE ahead in both settings
    checks = function(s)
      local out, nope, nope10 = {}, C.atr_pe(s, "attention", 32), C.hard_nope(s, 32)
      out[#out + 1] = nope and chk(">", nope, C.atr(s, "attention", 32), "paper [F]: NoPE above PE at small d")
      out[#out + 1] = nope10 and chk(">", nope10, C.hard(s, "pcfg_10_20", "attention", 32), "paper [F]: NoPE above PE at small d")
      return out
    end },
  { section = "D.1", words = "RoPE and ALiBi as future ablations", paper = "–", missing = "a proposal; no experiment in the paper" },
  { section = "D.2", words = "on AR, 1-layer Mamba and Hyena do as well as or better than 2-layer",
    paper = "1-layer Mamba ≈ 0.47 / 0.83 [F], 2-layer 76.88 / 80.62 [N]; d = 256: 96.25 against 91.25 [T]",
    checks = function(s) return each({ "mamba", "hyena" }, W, function(a, w) return chk(">~", C.layers(s, a, 1, w), C.layers(s, a, 2, w)) end) end },
  { section = "D.2", words = "1-layer Attention and 1-layer Based/BaseConv fail AR: induction needs two layers",
    paper = "1-layer Attention ≈ 0.07 / 0.09, Based/BaseConv ≈ 0.01–0.03 [F]",
    checks = function(s) return each({ "attention", "based", "base_conv" }, W, function(a, w) return chk("<", C.layers(s, a, 1, w), 0.1,
      "mechlab; the paper's ≤ 0.09") end) end },
  { section = "D.2", words = "1-layer Based and 1-layer BaseConv are architecturally identical",
    paper = "Based = BaseConv ≈ 0.51–0.52 on ATR [F]",
    checks = function(s)
      local out = each({ "based" }, W, function(a, w) return chk("~", C.atr_layers(s, a, 1, w), C.atr_layers(s, "base_conv", 1, w)) end)
      for _, w in ipairs(W) do out[#out + 1] = chk("~", C.layers(s, "based", 1, w), C.layers(s, "base_conv", 1, w)) end
      for _, w in ipairs(W) do out[#out + 1] = chk("~", C.sibling(s, "based", 1, w), C.sibling(s, "base_conv", 1, w)) end
      return out
    end },
  { section = "D.2", words = "on ATR (5, 20), 1-layer Mamba, H3 and Hyena stay strong",
    paper = "1-layer Mamba ≈ 0.87 / 0.92, H3 ≈ 0.82 / 0.85, Hyena ≈ 0.78 / 0.83 [F]; 2-layer 94.38 / 96.25, 87.81 / 90.00, 80.94 / 85.31 [N]",
    checks = function(s) return each(SSM, W, function(a, w) return { chk("~", C.atr_layers(s, a, 1, w), C.atr_layers(s, a, 2, w),
      "paper: its own largest drop, Mamba d = 32, 0.074 [F vs N]", 0.08), above_floor(C.atr_layers(s, a, 1, w)) } end) end },
  { section = "D.2", words = "1-layer Attention drops clearly on ATR (96.25% → 74.69% at d = 256)",
    paper = "1-layer ≈ 0.70 / 0.74 [F], 2-layer 90.31 / 93.75 [N]",
    checks = function(s) return each({ "attention" }, W, function(a, w) return chk("<", C.atr_layers(s, a, 1, w),
      C.atr_layers(s, a, 2, w)) end) end },
  { section = "D.2", words = "1-layer Based/BaseConv is the weakest on ATR",
    paper = "≈ 0.51–0.52, below every other 1-layer model [F]",
    checks = function(s)
      local out = each({ "attention", "hyena", "h3", "mamba" }, W, function(b, w) return chk(">", C.atr_layers(s, b, 1, w),
        C.atr_layers(s, "based", 1, w)) end)
      return out
    end },
  { section = "D.3", words = "3-layer accuracy ≈ 2-layer, except Mamba at d = 32 (\"may just be an optimisation failure\")",
    paper = "3-layer Attention 1 / 1, Based 0.91 / 0.99, Mamba 0.13 / 0.76 [F]; 2-layer 100 / 100, 93.12 / 99.06, 76.88 / 80.62 [N]",
    checks = function(s) return each(ALL, W, function(a, w)
      if a == "mamba" and w == 32 then return nil end
      -- where 3 layers ran at rates of their own, each depth at its best rate (as the paper tunes)
      local best = C.layers_best(s, a, w)
      local three, two = best or C.layers(s, a, 3, w), best and C.ar_best(s, a, w) or C.layers(s, a, 2, w)
      return chk("~", three, two, "mechlab; the paper's own largest, Mamba d = 64, 0.05", 0.1)
    end) end },
  { section = "D.3", words = "mixer output at the query: 1-layer SSMs write in layer 0; in 2 layers Attention, BaseConv, Based, H3 in layer 1, Hyena and (mostly) Mamba in 0; in 3 layers Attention, BaseConv, Based in 1, Hyena in 0, Mamba in 0 or the last",
    paper = "Fig. 9b medians [F]",
    checks = function(s)
      local expect = { { hyena = { 0 }, h3 = { 0 }, mamba = { 0 } },
        { attention = { 1 }, base_conv = { 1 }, based = { 1 }, h3 = { 1 }, hyena = { 0 }, mamba = { 0 } },
        { attention = { 1 }, base_conv = { 1 }, based = { 1 }, hyena = { 0 }, mamba = { 0, 2 } } }
      local out = {}
      for L = 1, 3 do
        for _, a in ipairs(ALL) do
          local c = expect[L][a] and C.mixer_top(s, a, L)
          if c then out[#out + 1] = chk("in", c, expect[L][a], "paper [F]") end
        end
      end
      return out
    end },
  { section = "D.4", words = "all models except 1-layer Based/BaseConv exceed 80% at every d on rightmost-sibling queries",
    paper = "1-layer Mamba 0.87–0.97, H3 0.89–0.97, Attention 0.85–0.93; 2- and 3-layer 0.89–0.99 [F]",
    checks = function(s)
      local out = {}
      for L = 1, 3 do
        for _, c in ipairs(each(ALL, W, function(a, w)
          if L == 1 and (a == "based" or a == "base_conv") then return nil end
          return chk(">", C.sibling(s, a, L, w), 0.8, "paper [T]")
        end)) do out[#out + 1] = c end
      end
      return out
    end },
  { section = "D.4", words = "1-layer Based/BaseConv lag on sibling queries", paper = "Based = BaseConv ≈ 0.74–0.76 [F]",
    checks = function(s) return each({ "attention", "hyena", "h3", "mamba" }, W, function(b, w)
      return chk(">", C.sibling(s, b, 1, w), C.sibling(s, "based", 1, w)) end) end },
  { section = "D.4", words = "sibling queries are trivial: siblings are often fixed rule terminals, and the rightmost sibling may be the query itself",
    paper = "query–target distance 0.79, min 0 [G]",
    checks = function(s) return { chk(">=", C.floor(s, "sibling"), 0.5, "mechlab: half the answers need no retrieval") } end },
  { section = "D.4", words = "grandparent queries as future work", paper = "–", missing = "a proposal; no experiment in the paper" },
  -- the discussion
  { section = "Discussion", words = "mechanistic evaluations add signal beyond accuracy",
    paper = "ATR (5, 20): Attention 93.75 and Mamba 96.25 at d = 64, @ Value 1.02 and 0.03 [N]",
    checks = function(s)
      local att, mamba = C.atr_attr(s, "attention", 64, "value"), C.atr_attr(s, "mamba", 64, "value")
      return { chk("~", C.atr(s, "mamba", 64), C.atr(s, "attention", 64), "same accuracy within noise"),
        chk(">", att and { v = att.v - (mamba and mamba.v or 0 / 0), label = "@ Value, Attention − Mamba, d = 64" }, 0.5,
          "mechlab: a different mechanism") }
    end },
  { section = "Discussion", words = "ATR is implementable by a single attention head",
    paper = "1-layer Attention ≈ 0.70 / 0.74 [F] (one head, n_head = 1)",
    checks = function(s) return each({ "attention" }, W, function(a, w) return above_floor(C.atr_layers(s, a, 1, w)) end) end },
  { section = "Discussion", words = "short convs are key to association in SSMs", paper = "as Sec. 5.4",
    checks = function(s) return { chk("<", C.mconv(s, 0, 64), 0.07, "paper [T]"), chk(">=", C.mconv(s, 4, 64), 0.5, "mechlab: succeeds") } end },
  -- v3 (spec §9)
  { section = "v3, spec §9.1", words = "only Transformers and Based fully succeed at AR, with Mamba and DeltaNet close behind; H3, Hyena fail",
    paper = "no v3 numbers [A3]",
    checks = function(s)
      local out = each({ "attention", "based" }, { 64 }, function(a, w) return chk(">=", C.ar_best(s, a, w), 0.95, "mechlab: fully") end)
      out[#out + 1] = chk("~", C.delta(s, 64), C.ar_best(s, "attention", 64), "mechlab: close", 0.1)
      out[#out + 1] = chk("~", C.ar_best(s, "mamba", 64), C.ar_best(s, "attention", 64), "mechlab: close", 0.1)
      out[#out + 1] = chk("~", C.ar256(s), C.ar_best(s, "attention", 64), "mechlab: close", 0.1)
      for _, a in ipairs { "h3", "hyena" } do out[#out + 1] = chk("<", C.ar_best(s, a, 64), 0.1, "mechlab") end
      return out
    end },
  { section = "v3, spec §9.1", words = "Mamba and DeltaNet perform direct retrieval; Attention and Based show induction",
    paper = "[R]; no numbers",
    checks = function(s) return { chk("<", C.delta_attr(s, "value"), 0.2, "mechlab"), chk(">=", C.delta_attr(s, "query"), 0.5, "mechlab"),
      chk("<", C.ar_attr(s, "mamba", "value"), 0.2, "mechlab"), chk(">=", C.ar_attr(s, "attention", "value"), 0.9, "mechlab"),
      chk(">=", C.ar_attr(s, "based", "value"), 0.9, "mechlab") } end },
  { section = "v3, spec §9.2", words = "Mamba does implement induction, not via the SSM but via short convolutions: restoring the next key at layer 0 gives the best result",
    paper = "[A3][R]; no numbers",
    checks = function(s)
      local out = {}
      for i = 1, #s.nk_best do out[#out + 1] = chk("is", C.next_key_top(s, i), "next key", "[R]") end
      return out
    end },
  { section = "v3, spec §9.2", words = "configurations that perform well can drastically fail (~0% accuracy) with learning rates slightly modified",
    paper = "[R]; no numbers",
    checks = function(s) return { chk(">=", C.lr_cliffs(s), 1, "[R]") } end },
  { section = "v3, spec §9.3", words = "Mamba can learn Attention-like induction on ATR when short convolutions are removed",
    paper = "[A3]; no numbers",
    checks = function(s)
      local out = each({ 0 }, W, function(k, w) return chk(">=", C.conv_attr(s, k, w, "value"), 0.5, "mechlab: the larger part") end)
      for _, w in ipairs(W) do out[#out + 1] = chk("<", C.conv_attr(s, 4, w, "value"), 0.2, "mechlab") end
      return out
    end },
  { section = "v3, spec §9.4", words = "the SSMs \"seem to\" compute these associations only at the last state using a single layer",
    paper = "[A3]; no numbers",
    checks = function(s) return { chk("in", C.mixer_top(s, "mamba", 2), { 0 }, "[A3]"), chk("in", C.mixer_top(s, "hyena", 2), { 0 }, "[A3]"),
      chk("in", C.mixer_top(s, "h3", 2), { 0 }, "[A3]") } end },
}

return claims
