--- The claims ledger of docs/reproduction.md: a row per claim, mechlab's numbers computed from the
--- selected runs (stats.lua). Part of mech.paper.tables.
local paper = require "mech.paper"
local load = require "mech.paper.tables.load"
local F = require "mech.paper.tables.format"
local S = require "mech.paper.tables.stats"

local T, passes_at = load, load.passes_at
local num, mean_of, ms, row, para, lr_str = F.num, F.mean_of, F.ms, F.row, F.para, F.lr_str
local pick, field, of_arch, in_set, arch_label, passing, concat = S.pick, S.field, S.of_arch, S.in_set, S.arch_label,
  S.passing, S.concat
local passing_own, pick_conv, per_width, depth_order, mixer_at = S.passing_own, S.pick_conv, S.per_width, S.depth_order,
  S.mixer_at
local nk, nk_positions, nk_sites, nk_argmax, order6, on = S.nk, S.nk_positions, S.nk_sites, S.nk_argmax, S.order6, S.on

------------------------------------------------------------------------------------------------
-- the claims ledger: a row per claim, mechlab's numbers computed here

local function acc(list) return ms(field(list, "accuracy"), 3) end
local function accs_of(by_width) return string.format("d = 32: %s, d = 64: %s", acc(by_width[32]), acc(by_width[64])) end
local function accs(s, a) return accs_of(s.ar[a]) end
local function atr_acc(s, a) return string.format("%s / %s", num(s.atr[a][32].accuracy, 2), num(s.atr[a][64].accuracy, 2)) end

local function max_acc(lists)
  local m = -1
  for _, l in ipairs(lists) do for _, e in ipairs(l) do m = math.max(m, e.accuracy) end end
  return m
end

local settle = {
  -- atr_hard's quick profile trains 5 of the paper's 32 epochs (1.98 h); all 32: x 32 / 5
  atr_hard = "`atr_hard` at the paper's 32 epochs (24 runs, ≈ 12.7 h on 2 cores) and the best of five learning rates",
  -- atr_easy's quick runs at atr_hard's 5 epochs: 2.89 h x 5 / 32
  atr_easy5 = "the (5, 20) main curves at 5 epochs, as `atr_hard` (12 runs, ≈ 0.45 h)",
  atr_split = "`atr_split` (12 runs, 1.39 h)",
  ar_layers = "`ar_layers` (24 runs, 1.98 h)", atr_1layer = "`atr_1layer` (12 runs, 1.46 h)",
  sibling = "`sibling` (36 runs, 1.79 h)",
  atr_mamba_conv = "`atr_mamba_conv` (8 runs, 1.91 h)",
  -- Mamba at the paper's width, at the best rate of the slice (one run)
  d256 = "Mamba at the paper's d = 256 at its best learning rate from the slice (one run)",
  -- the d_conv ablation at Mamba's best rate of the slice (profile best_lr: half of quick's 2.45 core-hours)
  conv_lr = "`mamba_conv` at Mamba's best rate of the slice, 3e-3 (profile `best_lr`, 8 runs, ≈ 1.2 core-hours)",
  next_key = "`experiments/mamba_next_key.lua` on Mamba's best-lr checkpoints of the slice",
  nope = "Attention without positions on AR (`ar` profile `nope`: d = 32 and 64, lr 1e-3, 2 runs, 0.25 h)",
}

-- the depth claims (appendix D), each {text, verdict} or nil while its sweep has not run. A run
-- "fails" below 0.1, "does as well" within 0.05 of the deeper model or above it, "drops" by more
-- than 0.1, "is about the same" within 0.1, "does well" at 0.9 or more.
local function depth_mean(runs) local v = field(runs, "accuracy"); return #v > 0 and mean_of(v) or nil end

local function acc_cell(v) return v and num(v, 3) or "–" end

-- "name x1 / x2 (d = 32), y1 / y2 (d = 64)": the mean accuracies at depths L1 and L2 of by_depth runs
local function depth_pair(by, a, L1, L2)
  local parts = {}
  for _, w in ipairs { 32, 64 } do
    parts[#parts + 1] = string.format("%s / %s (d = %d)", acc_cell(depth_mean(by[a][L1][w])), acc_cell(depth_mean(by[a][L2][w])), w)
  end
  return paper.arch_name(a) .. " " .. table.concat(parts, ", ")
end

-- a verdict from named parts {holds, what}: all hold, some or none
local function parts_verdict(parts)
  local yes, no = {}, {}
  for _, p in ipairs(parts) do if p[1] then yes[#yes + 1] = p[2] else no[#no + 1] = p[2] end end
  if #no == 0 then return "agrees: " .. table.concat(yes, "; ") end
  if #yes == 0 then return "disagrees: not " .. table.concat(no, "; not ") end
  return "agrees in part: " .. table.concat(yes, "; ") .. "; but not " .. table.concat(no, "; not ")
end

local function depth_claims(s)
  local c = {}
  local function each(archs, by, test)
    for _, a in ipairs(archs) do
      for _, w in ipairs { 32, 64 } do if not test(a, w, by[a]) then return false end end
    end
    return true
  end
  local function acc_at(l, L, w) return depth_mean(l[L][w]) or 0 / 0 end
  -- are 1-layer Based and BaseConv below every other 1-layer model at both widths
  local function based_lowest(by)
    for _, w in ipairs { 32, 64 } do
      local lo = math.huge
      for _, a in ipairs { "attention", "hyena", "h3", "mamba" } do lo = math.min(lo, acc_at(by[a], 1, w)) end
      if not (acc_at(by.based, 1, w) < lo and acc_at(by.base_conv, 1, w) < lo) then return false end
    end
    return true
  end
  if s.layers_total > 0 then
    local L = s.layers
    -- "as well" when both depths fail is no finding of its own: the verdict names such a model
    local both_fail = {}
    for _, a in ipairs { "mamba", "hyena" } do
      if each({ a }, L, function(_, w, l) return acc_at(l, 1, w) < 0.1 and acc_at(l, 2, w) < 0.1 end) then
        both_fail[#both_fail + 1] = paper.arch_name(a)
      end
    end
    c.ar_1layer = { "1 layer / 2 layers: " .. table.concat({ depth_pair(L, "mamba", 1, 2), depth_pair(L, "hyena", 1, 2),
        depth_pair(L, "attention", 1, 2), depth_pair(L, "based", 1, 2) }, "; "),
      parts_verdict {
        { each({ "mamba", "hyena" }, L, function(a, w, l) return acc_at(l, 1, w) >= acc_at(l, 2, w) - 0.05 end),
          "1-layer Mamba and Hyena do as well as 2-layer" .. (#both_fail > 0 and
            string.format(" (%s below 0.1 at both depths)", table.concat(both_fail, " and ")) or "") },
        { each({ "attention", "based" }, L, function(a, w, l) return acc_at(l, 1, w) < 0.1 end),
          "1-layer Attention and Based fail" } } }
    local off = {}
    for _, a in ipairs(depth_order) do
      for _, w in ipairs { 32, 64 } do
        if not (math.abs(acc_at(L[a], 3, w) - acc_at(L[a], 2, w)) <= 0.1) then
          off[#off + 1] = { a = a, text = string.format("%s d = %d: %s against %s", paper.arch_name(a), w,
            acc_cell(depth_mean(L[a][3][w])), acc_cell(depth_mean(L[a][2][w]))) }
        end
      end
    end
    local off_text = {}
    for _, o in ipairs(off) do off_text[#off_text + 1] = o.text end
    c.ar_3layer = { string.format("3 layers within 0.1 of 2 layers in %d of %d (architecture, width)%s",
        2 * #depth_order - #off, 2 * #depth_order,
        #off > 0 and ("; not: " .. table.concat(off_text, ", ")) or ""),
      (#off == 0 or (#off == 1 and off[1].a == "mamba")) and "agrees" or
        (#off <= #depth_order and "agrees in part: " .. #off .. " (architecture, width) differ by more than 0.1" or "disagrees") }
    -- which layer writes the answer: the layer of the largest mean over the runs passing its filter
    local expect = { { hyena = { 0 }, h3 = { 0 }, mamba = { 0 } },
      { attention = { 1 }, base_conv = { 1 }, based = { 1 }, h3 = { 1 }, hyena = { 0 }, mamba = { 0 } },
      { attention = { 1 }, base_conv = { 1 }, based = { 1 }, hyena = { 0 }, mamba = { 0, 2 } } }
    local seen, agree, wrong, none = {}, 0, {}, {}
    for depth = 1, 3 do
      local parts = {}
      for _, a in ipairs(depth_order) do
        if expect[depth][a] then
          local best, at
          for layer = 0, depth - 1 do
            local m = mixer_at(s.layers_mixer[a][depth], layer)
            if m and (not best or m > best) then best, at = m, layer end
          end
          local name = paper.arch_name(a)
          if at == nil then none[#none + 1] = string.format("%s %d-layer", name, depth)
          else
            parts[#parts + 1] = string.format("%s %d", name, at)
            local ok = false
            for _, l in ipairs(expect[depth][a]) do ok = ok or l == at end
            if ok then agree = agree + 1 else wrong[#wrong + 1] = string.format("%s %d-layer (layer %d)", name, depth, at) end
          end
        end
      end
      seen[#seen + 1] = string.format("%d layer%s: %s", depth, depth > 1 and "s" or "", #parts > 0 and table.concat(parts, ", ") or "–")
    end
    local n = agree + #wrong
    local text = "the layer whose mixer output at the query restores the most: " .. table.concat(seen, "; ") ..
      (#none > 0 and ("; no run passes the filter: " .. table.concat(none, ", ")) or "")
    c.mixer = { text, n == 0 and "not settled at quick scale: no run passes the filter" or #wrong == 0 and
      string.format("agrees (%d of %d as the paper)", agree, n) or
      string.format("%s: %d of %d as the paper; not %s", agree * 2 >= n and "agrees in part" or "disagrees", agree, n,
        table.concat(wrong, ", ")) }
  end
  if s.atr_1layer_total > 0 then
    local A = s.atr_layers
    c.atr_1layer = { "1 layer / 2 layers: " .. table.concat({ depth_pair(A, "mamba", 1, 2), depth_pair(A, "h3", 1, 2),
        depth_pair(A, "hyena", 1, 2), depth_pair(A, "attention", 1, 2), depth_pair(A, "based", 1, 2),
        depth_pair(A, "base_conv", 1, 2) }, "; "),
      parts_verdict {
        { each({ "mamba", "h3", "hyena" }, A, function(a, w, l) return acc_at(l, 1, w) >= acc_at(l, 2, w) - 0.05 end),
          "1-layer Mamba, H3 and Hyena stay strong" },
        { each({ "attention" }, A, function(a, w, l) return acc_at(l, 1, w) < acc_at(l, 2, w) - 0.1 end),
          "1-layer Attention drops" },
        { based_lowest(A), "1-layer Based and BaseConv are the weakest" } } }
  end
  if s.sibling_total > 0 then
    local S = s.sibling
    local low = {}
    for _, a in ipairs(depth_order) do
      for depth = 1, 3 do
        for _, w in ipairs { 32, 64 } do
          local lagging = depth == 1 and (a == "based" or a == "base_conv")
          if not lagging and not (acc_at(S[a], depth, w) >= 0.9) then
            low[#low + 1] = string.format("%s %d-layer d = %d: %s", paper.arch_name(a), depth, w,
              acc_cell(depth_mean(S[a][depth][w])))
          end
        end
      end
    end
    c.sibling = { string.format("at 0.9 or more: every model but 1-layer Based and BaseConv%s; 1-layer Based %s / %s, " ..
        "BaseConv %s / %s (d = 32 / 64)", #low > 0 and (" except " .. table.concat(low, ", ")) or "",
        acc_cell(depth_mean(S.based[1][32])), acc_cell(depth_mean(S.based[1][64])), acc_cell(depth_mean(S.base_conv[1][32])),
        acc_cell(depth_mean(S.base_conv[1][64]))),
      parts_verdict { { #low == 0, "every other model does well" }, { based_lowest(S), "1-layer Based and BaseConv lag" } } }
  end
  return c
end

-- row 37 (spec §9.3), from atr_mamba_conv and atr_easy's Mamba: @ Value without a conv (d_conv 0)
-- against the short convs' (d_conv 2-4). Induction is the larger part of the effect at the value
-- (> 0.5) in every run; "in direction" when d_conv 0's lowest stays 0.2 above the convs' highest.
local function atr_conv_claim(s)
  local runs = pick_conv(s, 0, 3)
  if #runs < 8 then
    return "not run", "not settled at quick scale: " .. settle.atr_mamba_conv ..
      (#runs > 0 and string.format(" (%d of 8 done)", #runs) or "")
  end
  local v0 = field(passing_own(pick_conv(s, 0, 0), "value"), "value")
  local convs = field(concat(passing_own(pick_conv(s, 2, 3), "value"), of_arch(s.atr_filtered.value or {}, "mamba")), "value")
  local lo0, hi = math.huge, -math.huge
  for _, v in ipairs(v0) do lo0 = math.min(lo0, v) end
  for _, v in ipairs(convs) do hi = math.max(hi, v) end
  local f = s.atr_filtered
  local text = string.format("@ Value (d = 32 / 64): d_conv 0 %s, d_conv 1 %s, d_conv 2 %s, d_conv 3 %s, d_conv 4 (`atr_easy`) %s; " ..
    "accuracy d_conv 0 %s, d_conv 4 %s", per_width(s.atr_conv[0], "value", "value"), per_width(s.atr_conv[1], "value", "value"),
    per_width(s.atr_conv[2], "value", "value"), per_width(s.atr_conv[3], "value", "value"),
    per_width(s.atr.mamba, "value", "value", f.value or {}), per_width(s.atr_conv[0], "accuracy"), per_width(s.atr.mamba, "accuracy"))
  if #v0 == 0 then return text, "disagrees: no d_conv 0 run passes the value's filter" end
  if #convs == 0 then hi = 0 end
  if lo0 > 0.5 and hi < 0.2 then
    return text, string.format("agrees: without a conv the larger part of the effect is at the value (at least %s), " ..
      "with a short conv at most %s", num(lo0), num(hi))
  elseif lo0 > hi + 0.2 then
    return text, string.format("agrees in direction: @ Value without a conv at least %s, with a short conv at most %s",
      num(lo0), num(hi))
  end
  return text, string.format("disagrees: @ Value without a conv at least %s, with a short conv up to %s", num(lo0), num(hi))
end

-- row 26 (appendix D.1), from `ar`'s nope slice: Attention without positions against with them
-- (`ar`, lr 1e-3), failing below 0.1 as elsewhere in the ledger
local function nope_claim(s)
  local nope, pe = s.ar_nope, s.ar.attention
  if #nope[32] + #nope[64] == 0 then return "not run", "not settled at quick scale: " .. settle.nope end
  local m = depth_mean
  local text = string.format("lr 1e-3, without / with positions: d = 32 %s / %s, d = 64 %s / %s", acc_cell(m(nope[32])),
    acc_cell(m(pe[32])), acc_cell(m(nope[64])), acc_cell(m(pe[64])))
  local hi = math.max(m(nope[32]) or 0, m(nope[64]) or 0)
  if hi < 0.1 then return text, "agrees: below 0.1 at both widths" end
  local drop = math.min((m(pe[32]) or 0) - (m(nope[32]) or 0), (m(pe[64]) or 0) - (m(nope[64]) or 0))
  if drop > 0.3 then return text, string.format("agrees in direction: at most %s without positions, but above the paper's ≈6 %%",
    num(hi, 3)) end
  return text, string.format("disagrees: %s without positions", num(hi, 3))
end

local function claims(s)
  local NS = "not settled at quick scale"
  local conv_text, conv_verdict = atr_conv_claim(s)
  local dc = depth_claims(s)
  -- a depth claim's two cells, or "not run" with the sweep that settles it
  local function depth(claim, sweep_name)
    if dc[claim] then return dc[claim][1], dc[claim][2] end
    return "not run", NS .. ": " .. settle[sweep_name]
  end
  -- the learning-rate slice: an architecture is judged at its best lr once the slice has its runs
  local function sliced(a)
    for _, w in ipairs { 32, 64 } do for _, lr in ipairs(T.lrs) do if #s.ar_lr[a][w][lr] == 0 then return false end end end
    return true
  end
  local lr_left = string.format("the AR learning-rate slice (running: %d of its %d runs done) and one run at d = 256 " ..
    "at the best of them", s.slice_done, T.slice_runs)
  local function best(a, w) return s.ar_best[a][w] end
  local function best_accs(a)
    return string.format("d = 32: %s (lr %s), d = 64: %s (lr %s)", num(best(a, 32).mean, 3), lr_str(best(a, 32).lr),
      num(best(a, 64).mean, 3), lr_str(best(a, 64).lr))
  end
  -- neighbouring rates of which one succeeds and the other fails (accuracy > 0.5 against < 0.1)
  local cliffs = {}
  for _, a in ipairs(paper.archs) do
    for _, w in ipairs { 32, 64 } do
      for i = 1, #T.lrs - 1 do
        local l1, l2 = s.ar_lr[a][w][T.lrs[i]], s.ar_lr[a][w][T.lrs[i + 1]]
        if #l1 > 0 and #l2 > 0 then
          local m1, m2 = mean_of(field(l1, "accuracy")), mean_of(field(l2, "accuracy"))
          if math.max(m1, m2) > 0.5 and math.min(m1, m2) < 0.1 then
            cliffs[#cliffs + 1] = string.format("%s d = %d: %s at %s, %s at %s", paper.arch_name(a), w, num(m1, 3),
              lr_str(T.lrs[i]), num(m2, 3), lr_str(T.lrs[i + 1]))
          end
        end
      end
    end
  end
  -- Mamba at the paper's d = 256 (one run at its best rate of the slice), set against the paper's
  -- d = 256 numbers; the other architectures are at d = 64, their widest quick width
  local m256, v256 = s.mamba256, {}
  local at256 = ""
  if m256 and sliced("mamba") then
    at256 = string.format("; Mamba at d = 256 (lr %s, one run): %s", lr_str(m256.lr), num(m256.accuracy, 3))
    local gap = best("attention", 64).mean - m256.accuracy
    local fails = math.max(best("hyena", 32).mean, best("hyena", 64).mean) < 0.3
      and math.max(best("base_conv", 32).mean, best("base_conv", 64).mean) < 0.1
      and math.max(best("h3", 32).mean, best("h3", 64).mean) < 0.03
    local strong = best("attention", 64).mean >= 0.99 and best("based", 64).mean >= 0.95
    local near = math.abs(m256.accuracy - 0.91) <= 0.05
    v256.headline = (near and strong and fails) and string.format("agrees: Mamba %s at d = 256 against ≈91 %%; Attention " ..
      "and Based at d = 64 already at the paper's d = 256 level, Hyena, BaseConv and H3 below its bounds at d ≤ 64",
      num(m256.accuracy, 3))
      or string.format("disagrees in part: Mamba %s at d = 256 against ≈91 %%%s%s", num(m256.accuracy, 3),
        strong and "" or "; Attention or Based below the paper at d = 64", fails and "" or "; a failing architecture above its bound")
    v256.third = gap <= 0.1 and string.format("agrees at the paper's d = 256: third, %s below Attention's d = 64 accuracy " ..
      "(at d ≤ 64 it is not close)", num(gap, 3))
      or string.format("third, not close, at d = 256 too (%s below Attention's d = 64 accuracy)", num(gap, 3))
    v256.retrieval = "agrees for H3 and Hyena; " .. (m256.query > m256.key
      and string.format("agrees for Mamba at d = 256 (@ Query %s, @ Key %s, unfiltered), not at d ≤ 64 (mass mostly at the key)",
        num(m256.query), num(m256.key))
      or string.format("disagrees for Mamba at d = 256 too (@ Query %s, @ Key %s, unfiltered) and at d ≤ 64", num(m256.query),
        num(m256.key)))
    v256.gap = gap
  end
  -- v3's DeltaNet: how far behind Attention at each width, and where it retrieves
  local dn_all = concat(s.delta[32], s.delta[64])
  local dn_v, dn_q, dn_k = passing_own(dn_all, "value"), passing_own(dn_all, "query"), passing_own(dn_all, "key")
  local function behind(list, w) return mean_of(field(s.ar.attention[w], "accuracy")) - mean_of(field(list, "accuracy")) end
  local dn_gap = math.max(behind(s.delta[32], 32), behind(s.delta[64], 64))
  local mamba_gap = math.max(behind(s.ar.mamba[32], 32), behind(s.ar.mamba[64], 64))
  if sliced("mamba") and sliced("attention") then
    mamba_gap = math.max(best("attention", 32).mean - best("mamba", 32).mean, best("attention", 64).mean - best("mamba", 64).mean)
  end
  local dn_verdict = dn_gap <= 0.05
    and string.format("agrees for DeltaNet (at most %s below Attention at either width%s)", num(dn_gap, 3),
      behind(s.delta[64], 64) <= 0 and "; at d = 64 it reaches Attention's accuracy, more than \"close behind\"" or "")
    or string.format("disagrees for DeltaNet (up to %s below Attention)", num(dn_gap, 3))
  dn_verdict = dn_verdict .. (v256.gap and (v256.gap <= 0.1
      and string.format("; agrees for Mamba at the paper's d = 256 (%s below Attention's d = 64 accuracy), not at d ≤ 64 " ..
        "(up to %s below at the best lr of each)", num(v256.gap, 3), num(mamba_gap, 3))
      or string.format("; disagrees for Mamba at d = 256 too (%s below Attention's d = 64 accuracy)", num(v256.gap, 3)))
    or mamba_gap <= 0.1 and "; agrees for Mamba"
    or sliced("mamba") and string.format("; disagrees for Mamba at d ≤ 64 (up to %s below Attention at the best lr of " ..
      "each); %s: %s", num(mamba_gap, 3), NS, settle.d256)
    or string.format("; for Mamba (up to %s below Attention at lr 1e-3) %s: %s", num(mamba_gap, 3), NS, lr_left))
  local dn_value, dn_query = mean_of(field(dn_v, "value")), mean_of(field(dn_q, "query"))
  local dn_mech = (#dn_v > 0 and math.abs(dn_value) < 0.1 and #dn_q > 0 and dn_query > 0.8)
    and string.format("agrees for DeltaNet: direct retrieval at the query, in layer 0 (%d of %d runs pass the query's " ..
      "filter); Mamba as in row 7", #dn_q, #dn_all)
    or "disagrees for DeltaNet: " .. (#dn_v > 0 and math.abs(dn_value) >= 0.1 and "mass at the value" or "not at the query")
  local d64 = {}
  for _, a in ipairs { "attention", "based", "mamba", "hyena", "base_conv", "h3" } do
    d64[#d64 + 1] = num(mean_of(field(s.ar[a][64], "accuracy")), 3)
  end
  local v_att = field(of_arch(s.ar_value, "attention"), "value")
  local v_based = field(of_arch(s.ar_value, "based"), "value")
  local q_mamba, q_h3 = of_arch(s.ar_query, "mamba"), of_arch(s.ar_query, "h3")
  local qk = {}
  for _, e in ipairs(q_mamba) do qk[#qk + 1] = e.query + e.key end
  local bc = of_arch(s.ar_query, "base_conv")
  local hy_q32, hy_q64 = field(s.ar.hyena[32], "query"), field(s.ar.hyena[64], "query")
  local fail3 = max_acc { s.ar.hyena[32], s.ar.hyena[64], s.ar.base_conv[32], s.ar.base_conv[64], s.ar.h3[32], s.ar.h3[64] }
  local mf = s.mamba_filtered
  local function mq(k)
    local all = concat(s.mamba[k][32], s.mamba[k][64])
    return ms(field(passing(all, mf.query), "query")), ms(field(passing(all, mf.key), "key"))
  end
  local q2, k2 = mq(2)
  local q3, k3 = mq(3)
  local q4, k4 = mq(4)
  local low01 = max_acc { s.mamba[0][32], s.mamba[0][64], s.mamba[1][32], s.mamba[1][64] }
  -- the d_conv claims at Mamba's best rate (mamba_conv's profile best_lr), once every cell has its run
  local conv_best = { done = true }
  for k = 0, 4 do for _, w in ipairs { 32, 64 } do conv_best.done = conv_best.done and #s.mamba_best[k][w] > 0 end end
  if conv_best.done then
    local function a(k, w) return mean_of(field(s.mamba_best[k][w], "accuracy")) end
    local low = max_acc { s.mamba_best[0][32], s.mamba_best[0][64], s.mamba_best[1][32], s.mamba_best[1][64] }
    local above, succeed, cells = true, true, {}
    for k = 2, 4 do
      cells[#cells + 1] = string.format("%d: %s / %s", k, num(a(k, 32), 3), num(a(k, 64), 3))
      succeed = succeed and a(k, 64) > 0.5
      for _, w in ipairs { 32, 64 } do above = above and a(k, w) > math.max(a(0, w), a(1, w)) end
    end
    local at = "lr " .. lr_str(s.mamba_rate)
    conv_best.acc_text = string.format("; at %s (seed 42): d_conv 0, 1 at most %s, %s", at, num(low, 3), table.concat(cells, ", "))
    conv_best.acc_verdict = low >= 0.07 and string.format("disagrees at Mamba's best rate, %s: d_conv 0 or 1 reaches %s", at, num(low, 3))
      or not above and string.format("disagrees at Mamba's best rate, %s: a kernel of 2–4 not above 0 and 1", at)
      or succeed and string.format("agrees at Mamba's best rate, %s: d_conv 0 and 1 below 7 %%, 2–4 above 0.5 at d = 64", at)
      or string.format("agrees in direction at Mamba's best rate, %s: d_conv 0 and 1 below 7 %%, 2–4 above them at both " ..
        "widths but not all above 0.5 at d = 64", at)
    local q, kk, parts = {}, {}, {}
    for k = 2, 4 do
      local all = concat(s.mamba_best[k][32], s.mamba_best[k][64])
      local qv, kv = field(passing_own(all, "query"), "query"), field(passing_own(all, "key"), "key")
      q[k], kk[k] = #qv > 0 and mean_of(qv) or 0, #kv > 0 and mean_of(kv) or 0
      parts[#parts + 1] = string.format("%d %s / %s", k, ms(qv), ms(kv))
    end
    conv_best.attrib_text = string.format("; at %s (each position's filter): %s", at, table.concat(parts, ", "))
    conv_best.attrib_verdict = q[4] > kk[4]
      and string.format("agrees at Mamba's best rate, %s (d_conv 4 mostly @ Query)", at)
      or q[4] > q[3] and q[3] > q[2] and string.format("agrees in direction at Mamba's best rate, %s (@ Query grows with the " ..
        "kernel), disagrees in degree (d_conv 4 mostly @ Key)", at)
      or string.format("disagrees at Mamba's best rate, %s (d_conv 4 mostly @ Key, @ Query not growing with the kernel)", at)
  end
  local hi2 = {}
  for k = 2, 4 do hi2[#hi2 + 1] = string.format("%d: %s / %s", k, acc(s.mamba[k][32]), acc(s.mamba[k][64])) end
  local bk = {}
  for _, g in ipairs { "2", "3 (`ar`)", "4" } do bk[#bk + 1] = acc(s.based[g][64]) end
  local bfail = max_acc { s.based["1"][32], s.based["1"][64], s.based.long[32], s.based.long[64] }
  local atr_lo, atr_hi = 1, 0
  for _, a in ipairs(paper.archs) do
    for _, w in ipairs { 32, 64 } do atr_lo, atr_hi = math.min(atr_lo, s.atr[a][w].accuracy), math.max(atr_hi, s.atr[a][w].accuracy) end
  end
  local function atr_attrib(a, pos) return num(s.atr[a][32][pos]) .. " / " .. num(s.atr[a][64][pos]) end
  -- the `atr_hard` settings: accuracy and Attrib at d = 32 / 64 (a value below the filter in parentheses)
  local function hard_acc(preset, a)
    return num(s.hard[preset][a][32].accuracy, 3) .. " / " .. num(s.hard[preset][a][64].accuracy, 3)
  end
  -- @ Query / @ Key of the d = 32 run, then of the d = 64 run
  local function qk_of(preset, a)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.hard[preset][a][w]
      local function v(pos) return passes_at(e, pos) and num(e[pos]) or "(" .. num(e[pos]) .. ")" end
      parts[#parts + 1] = v("query") .. " / " .. v("key")
    end
    return paper.arch_name(a) .. " " .. table.concat(parts, " and ")
  end
  local function hard_attrib(preset, a, pos)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.hard[preset][a][w]
      parts[#parts + 1] = passes_at(e, pos) and num(e[pos]) or "(" .. num(e[pos]) .. ")"
    end
    return table.concat(parts, " / ")
  end
  -- how far an architecture's accuracy is ahead of the best other one at a width (negative: behind)
  local atr5 = {}
  for _, a in ipairs(paper.archs) do atr5[a] = s.atr[a] end
  local function lead(by_arch, a, w)
    local other = -1
    for _, b in ipairs(paper.archs) do if b ~= a then other = math.max(other, by_arch[b][w].accuracy) end end
    return num(by_arch[a][w].accuracy - other, 3)
  end
  local max_hard_value = -1
  for _, st in ipairs(T.hard_settings) do
    for _, a in ipairs { "hyena", "h3", "mamba" } do
      for _, w in ipairs { 32, 64 } do
        local e = s.hard[st.preset][a][w]
        if passes_at(e, "value") then max_hard_value = math.max(max_hard_value, e.value) end
      end
    end
  end
  -- the ATR split: the most accurate architecture on a split at a width, and accuracies / Attrib
  local function split_best(split, w)
    local top, top_arch
    for _, a in ipairs(paper.archs) do
      local e = on(s.split[a][w], split)
      if e and (not top or e.accuracy > top.accuracy) then top, top_arch = e, a end
    end
    return top and paper.arch_name(top_arch) or "–"
  end
  -- (a cell whose run has not finished shows "–")
  local function split_per_width(a, f)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.split[a][w]
      parts[#parts + 1] = e and e.dev and f(e) or "–"
    end
    return table.concat(parts, " / ")
  end
  local function split_acc(a, split)
    return split_per_width(a, function(e) return num(on(e, split).accuracy, 3) end)
  end
  local function split_gap(a)
    return split_per_width(a, function(e) return string.format("%s (%s)", num(e.accuracy, 2), num(e.dev.accuracy - e.accuracy, 2)) end)
  end
  -- the sum of Attrib at the positions, on dev then on test, per width
  local function split_shift(a, positions)
    local function sum(t) local v = 0; for _, pos in ipairs(positions) do v = v + t[pos] end return v end
    return split_per_width(a, function(e) return num(sum(e.dev)) .. " → " .. num(sum(e)) end)
  end
  local function split_ranking()
    local list = {}
    for _, a in ipairs(paper.archs) do list[#list + 1] = a end
    local function at64(a) return s.split[a][64] and s.split[a][64].accuracy or -1 end
    table.sort(list, function(x, y) return at64(x) > at64(y) end)
    for i, a in ipairs(list) do
      list[i] = paper.arch_name(a) .. " " .. split_per_width(a, function(e) return num(e.accuracy, 2) end)
    end
    return table.concat(list, ", ")
  end
  -- the architectures whose ATR split runs have not all finished
  local split_missing = {}
  for _, a in ipairs(paper.archs) do
    if not (s.split[a][32] and s.split[a][64]) then split_missing[#split_missing + 1] = paper.arch_name(a) end
  end
  local split_pending = #split_missing > 0 and (NS .. " yet: `atr_split` is still running (" ..
    table.concat(split_missing, ", ") .. " not finished)") or nil
  -- the verdicts, read from the rows once every run is there: each part of a claim, held or not
  local function verdict(parts)
    local held, failed = {}, {}
    for _, p in ipairs(parts) do table.insert(p[1] and held or failed, p[2]) end
    if #failed == 0 then return "agrees (" .. table.concat(held, "; ") .. ")" end
    if #held == 0 then return "disagrees at this scale (not: " .. table.concat(failed, "; ") .. ")" end
    return "agrees in part: " .. table.concat(held, "; ") .. "; but not: " .. table.concat(failed, "; ")
  end
  local function both(f) return f(32) and f(64) end
  local function acc_of(a, w, split) return on(s.split[a][w], split).accuracy end
  local verdict_split = {}
  if not split_pending then
    local function best_is(a, split) return both(function(w)
      for _, b in ipairs(paper.archs) do if acc_of(b, w, split) > acc_of(a, w, split) then return false end end
      return true end) end
    local function gap(a, w) return acc_of(a, w, "dev") - acc_of(a, w, "test") end
    local function above_others(a, except, f) return both(function(w)
      for _, b in ipairs(paper.archs) do if b ~= a and b ~= except and f(b, w) >= f(a, w) then return false end end
      return true end) end
    local function test_acc(a, w) return acc_of(a, w, "test") end
    local function sum(t, positions) local v = 0; for _, pos in ipairs(positions) do v = v + t[pos] end return v end
    local function same(a, positions) return both(function(w)
      local e = s.split[a][w]
      return math.abs(sum(e.dev, positions) - sum(e, positions)) <= 0.2 end) end
    verdict_split[18] = verdict {
      { best_is("mamba", "dev"), "Mamba the most accurate on dev at both widths" },
      { best_is("attention", "test"), "Attention the most accurate on test at both widths" } }
    verdict_split[19] = verdict {
      { above_others("mamba", nil, gap), "Mamba's dev − test gap the largest at both widths" },
      { above_others("mamba", "attention", test_acc), "Mamba's test above every other non-Attention model's" },
      { both(function(w) return math.abs(test_acc("h3", w) - test_acc("attention", w)) <= 0.05 end),
        "H3's test within 0.05 of Attention's" },
      { both(function(w) for _, b in ipairs(paper.archs) do if test_acc(b, w) < test_acc("base_conv", w) then return false end end
        return true end), "BaseConv's test the lowest" } }
    local same_all = true
    for _, a in ipairs { "attention", "based" } do same_all = same_all and same(a, { "value" }) end
    for _, a in ipairs { "hyena", "h3", "mamba" } do same_all = same_all and same(a, { "query", "key" }) end
    verdict_split[20] = verdict {
      { same_all, "Attention's and Based's @ Value and the SSMs' @ Query + @ Key within 0.2 between dev and test" },
      { both(function(w) local e = s.split.base_conv[w]; return e.dev.value - e.value > 0.2 end),
        "BaseConv's @ Value lower on test by more than 0.2" } }
    verdict_split[21] = verdict {
      { both(function(w)
        for _, b in ipairs(paper.archs) do
          if b ~= "attention" and b ~= "mamba" and test_acc(b, w) >= math.min(test_acc("attention", w), test_acc("mamba", w)) then
            return false end
        end
        return true end), "Attention and Mamba the two most accurate on test at both widths" } }
  end
  local nk4 = s.next_key_heat["mixer.conv|conv 4 next key"]
  local key_block = {}
  for k = 2, 4 do key_block[#key_block + 1] = num(mean_of(nk(s, "Key  block output", k))) end
  local nk_block = {}
  for k = 2, 4 do for _, v in ipairs(nk(s, "Next key  block output", k)) do nk_block[#nk_block + 1] = v end end
  local nk_max = -1
  for _, v in ipairs(nk_block) do nk_max = math.max(nk_max, v) end
  -- the next-key rerun at Mamba's best lr: where each run restores the most at layer 0
  local nk_best_text, nk_best_verdict, nk_wins = "", nil, 0
  if #s.nk_best > 0 then
    local parts = {}
    for _, e in ipairs(s.nk_best) do
      local where, v = nk_argmax(e)
      if where == "next key" then nk_wins = nk_wins + 1 end
      parts[#parts + 1] = string.format("d = %d: the most at the %s (%s), conv output at the next key %s", e.d, where, num(v),
        num(e.at["mixer.conv|next_key"] or 0 / 0))
    end
    nk_best_text = "; at the best lr (layer 0, any of four sites): " .. table.concat(parts, "; ")
    nk_best_verdict = (nk_wins == #s.nk_best and "agrees at Mamba's best lr"
      or nk_wins > 0 and string.format("agrees in %d of %d best-lr runs", nk_wins, #s.nk_best)
      or "disagrees at this scale, at Mamba's best lr too")
    if s.nk_best[#s.nk_best].d < 256 then nk_best_verdict = nk_best_verdict .. ": " .. NS .. ": " .. settle.d256
    elseif nk_wins == 0 then
      local conv = s.nk_best[#s.nk_best].at["mixer.conv|next_key"] or 0
      nk_best_verdict = "disagrees at Mamba's best lr up to the paper's d = 256" .. (conv > 0.1 and string.format(
        " (there, inside the mixer, the conv output at the next key restores %s: part of the mechanism)", num(conv)) or "")
    end
  end
  -- at the best lr: d = 64 accuracies, Based against Attention, Mamba's retrieval
  local d64b = {}
  if sliced("mamba") then
    for _, a in ipairs { "attention", "based", "mamba", "hyena", "base_conv", "h3" } do d64b[#d64b + 1] = num(best(a, 64).mean, 3) end
  end
  local based_verdict = "agrees at d = 64; at d = 32 Based is behind: " .. NS .. " (one lr): " .. lr_left
  if sliced("based") and sliced("attention") then
    local behind_at = {}
    for _, w in ipairs { 32, 64 } do
      local g = best("attention", w).mean - best("based", w).mean
      if g > 0.05 then behind_at[#behind_at + 1] = string.format("d = %d (%s)", w, num(g, 3)) end
    end
    based_verdict = #behind_at == 0 and "agrees at the best lr of each (within 0.05 at both widths)"
      or ("agrees at the best lr of each except at " .. table.concat(behind_at, ", ") .. ", where Based is behind")
  end
  local mamba_retrieval = "agrees for H3 and Hyena; disagrees for Mamba (mass mostly at the key) at d ≤ 64, lr 1e-3: " .. lr_left
  if sliced("mamba") then
    local q, k = {}, {}
    for _, w in ipairs { 32, 64 } do
      for _, v in ipairs(field(best("mamba", w).runs, "query")) do q[#q + 1] = v end
      for _, v in ipairs(field(best("mamba", w).runs, "key")) do k[#k + 1] = v end
    end
    mamba_retrieval = "agrees for H3 and Hyena; " .. (mean_of(q) > mean_of(k)
      and "agrees for Mamba at its best lr (more at the query than at the key)"
      or "disagrees for Mamba at its best lr too (mass mostly at the key) at d ≤ 64") .. ": " .. NS .. ": " .. settle.d256
  end

  return {
    -- spec §8.1 headline numbers and spec §8.2.1
    { "spec §8.2.1", "Attention reaches 100 % on AR from d = 32 on", "100 %", accs(s, "attention"), "agrees" },
    { "spec §8.2.1", "AR at d = 256, best LR: Attention 100 %, Based ≈99 %, Mamba ≈91 %, Hyena < 30 %, BaseConv < 10 %, H3 < 3 %",
      "100 / ≈99 / ≈91 / < 30 / < 10 / < 3 %",
      "at d = 64, lr 1e-3: " .. table.concat(d64, " / ") .. (sliced("mamba") and ("; at the best lr: " .. table.concat(d64b, " / ")) or "")
        .. at256,
      v256.headline or (NS .. ": " .. (sliced("mamba") and settle.d256 or lr_left)) },
    { "spec §8.2.1", "Attention and Based solve AR with almost the same width-scaling curve", "Based ≈ Attention at every d",
      "Based " .. accs(s, "based") .. (sliced("based") and ("; at the best lr " .. best_accs("based")) or ""),
      based_verdict },
    { "spec §8.2.1", "Mamba is a close third", "≈91 % at d = 256",
      "Mamba " .. accs(s, "mamba") .. (sliced("mamba") and ("; at the best lr " .. best_accs("mamba")) or "") .. at256,
      v256.third or sliced("mamba") and ("third, not close, at d ≤ 64 at its best lr too: " .. NS .. ": " .. settle.d256)
        or ("third, not close: " .. NS .. ": " .. lr_left) },
    { "spec §8.2.1", "Hyena, BaseConv and H3 fail AR", "< 30 %, < 10 %, < 3 %",
      "at most " .. num(fail3, 3) .. " (any of their 12 runs)", "agrees" },
    { "spec §8.2.1", "Nearly all Attention and Based checkpoints show full attribution at the value (induction)", "≈1 @ Value",
      string.format("Attention %s (%d runs), Based %s (%d runs), value filter", ms(v_att), #v_att, ms(v_based), #v_based),
      "agrees" },
    { "spec §8.2.1", "The best Mamba, Hyena and H3 models do direct retrieval in layer 0 (at the query)", "@ Query ≈ 1",
      string.format("H3 @ Query %s (%d run%s); Hyena (%s) unfiltered @ Query %s (d = 32), %s (d = 64); Mamba @ Query %s, @ Key %s",
        ms(field(q_h3, "query")), #q_h3, #q_h3 == 1 and "" or "s",
        #of_arch(s.ar_query, "hyena") == 0 and "no run passes" or (#of_arch(s.ar_query, "hyena") .. " pass"),
        ms(hy_q32), ms(hy_q64), ms(field(q_mamba, "query")), ms(field(q_mamba, "key")))
        .. (sliced("mamba") and string.format("; Mamba at its best lr, unfiltered: @ Query %s / %s, @ Key %s / %s (d = 32 / 64)",
          ms(field(best("mamba", 32).runs, "query")), ms(field(best("mamba", 64).runs, "query")),
          ms(field(best("mamba", 32).runs, "key")), ms(field(best("mamba", 64).runs, "key"))) or ""),
      v256.retrieval or mamba_retrieval },
    { "spec §8.2.1", "Weaker SSM checkpoints split query and key; Mamba's lie near @ Query + @ Key ≈ 1", "Q + K ≈ 1",
      string.format("Mamba Q + K %s (%d runs)", ms(qk), #qk), "agrees" },
    { "spec §8.2.1", "The only BaseConv checkpoint that passes the filter shows partial induction", "one run, partial @ Value",
      #bc == 1 and string.format("one run passes at the query (d = %d, seed %d: @ Query %s, @ Key %s, unfiltered @ Value %s); none at the value",
        bc[1].d, bc[1].seed, num(bc[1].query), num(bc[1].key), num(bc[1].value)) or (#bc .. " runs"),
      "agrees in direction: one run passes, as in the paper, but at the query's filter, not the value's: " ..
      "its @ Value is unfiltered" },
    -- spec §8.2.2 and the ATR headline
    { "spec §8.2.2", "ATR (5, 20): every architecture between ≈70 % and 97 %; Mamba matches or beats the others",
      "70–97 %, Mamba best", string.format("%s–%s; Mamba %s (d = 32 / 64), the best at both", num(atr_lo, 2), num(atr_hi, 2),
        atr_acc(s, "mamba")), "agrees in direction: Mamba the best at both widths; at d = 32 some architectures are below 70 %" },
    { "spec §8.2.2", "Mamba matches or beats every architecture at every width when \\|Σ\\| = 20, most clearly at L_max = 10",
      "Mamba best", string.format("Mamba ahead of the next by (d = 32 / 64): (5, 20) %s / %s; (10, 20) %s / %s",
        lead(atr5, "mamba", 32), lead(atr5, "mamba", 64), lead(s.hard.pcfg_10_20, "mamba", 32), lead(s.hard.pcfg_10_20, "mamba", 64)),
      "agrees: the best at both settings and both widths, by more at (10, 20) (its runs had 5 epochs, (5, 20)'s 32)" },
    { "spec §8.2.2", "Attention beats Mamba only at \\|Σ\\| = 8192 with d ≤ 64", "Attention > Mamba at 8192",
      string.format("(5, 8192), d = 32 / 64: Attention %s, Mamba %s, Based %s", hard_acc("pcfg_easy_8192", "attention"),
        hard_acc("pcfg_easy_8192", "mamba"), hard_acc("pcfg_easy_8192", "based")),
      "disagrees at this scale: Mamba beats Attention at (5, 8192) too, Based is the best there; 5 epochs, one lr: " ..
      settle.atr_hard },
    { "spec §8.2.2", "Longer rules do not hurt Mamba", "(10, 20) ≈ (5, 20)",
      string.format("Mamba (5, 20) %s (32 epochs), (10, 20) %s (5 epochs), the best at (10, 20)", atr_acc(s, "mamba"),
        hard_acc("pcfg_10_20", "mamba")),
      NS .. " (the two settings were trained for 32 and 5 epochs): " .. settle.atr_easy5 },
    { "spec §8.2.2", "Attention, Based and BaseConv mainly use induction on ATR", "@ Value high",
      string.format("@ Value (d = 32 / 64): Attention %s, Based %s, BaseConv %s at (5, 20); %s, %s, %s at (5, 8192); " ..
        "%s, %s, %s at (10, 20)", atr_attrib("attention", "value"), atr_attrib("based", "value"), atr_attrib("base_conv", "value"),
        hard_attrib("pcfg_easy_8192", "attention", "value"), hard_attrib("pcfg_easy_8192", "based", "value"),
        hard_attrib("pcfg_easy_8192", "base_conv", "value"), hard_attrib("pcfg_10_20", "attention", "value"),
        hard_attrib("pcfg_10_20", "based", "value"), hard_attrib("pcfg_10_20", "base_conv", "value")),
      "agrees for Based in every setting; for Attention only at d = 64 on (5, 20) and (5, 8192) (at d = 32 and on " ..
      "(10, 20) it retrieves at the query, in layer 0: @ Query " .. hard_attrib("pcfg_10_20", "attention", "query") ..
      " at (10, 20)); for BaseConv partly at \\|Σ\\| = 20 and not at 8192 (@ Key " ..
      hard_attrib("pcfg_easy_8192", "base_conv", "key") .. ": layer-1 direct retrieval)" },
    { "spec §8.2.2", "Hyena, H3 and Mamba use direct retrieval on ATR", "@ Value ≈ 0",
      string.format("@ Value: Hyena %s, H3 %s, Mamba %s at (5, 20); at most %s in the other two settings",
        atr_attrib("hyena", "value"), atr_attrib("h3", "value"), atr_attrib("mamba", "value"), num(max_hard_value)), "agrees" },
    { "spec §8.2.2", "At \\|Σ\\| = 8192 the direct-retrieval SSMs retrieve in layer 1 (@ Key); otherwise they mix @ Key and @ Query",
      "@ Key at 8192, mix at \\|Σ\\| = 20", string.format("@ Query / @ Key at d = 32 and d = 64, (5, 8192): %s, %s, %s; " ..
        "(10, 20): %s, %s, %s", qk_of("pcfg_easy_8192", "hyena"), qk_of("pcfg_easy_8192", "h3"), qk_of("pcfg_easy_8192", "mamba"),
        qk_of("pcfg_10_20", "hyena"), qk_of("pcfg_10_20", "h3"), qk_of("pcfg_10_20", "mamba")),
      "agrees for Mamba and H3 (8192: mostly @ Key; \\|Σ\\| = 20: mixed, as at (5, 20)); Hyena retrieves at the query " ..
      "at \\|Σ\\| = 20 and is split at 8192 (d = 32 @ Key, d = 64 @ Query)" },
    { "spec §8.2.2", "Mamba is highly accurate without induction", "high accuracy, @ Value ≈ 0",
      string.format("accuracy %s, @ Value %s (d = 32 / 64) at (5, 20); %s and %s at (10, 20)", atr_acc(s, "mamba"),
        atr_attrib("mamba", "value"), hard_acc("pcfg_10_20", "mamba"), hard_attrib("pcfg_10_20", "mamba", "value")), "agrees" },
    -- spec §8.2.3
    { "spec §8.2.3", "Mamba reaches the highest dev accuracy; Attention the highest test accuracy (d ≥ 32)",
      "best dev: Mamba; best test: Attention",
      string.format("the most accurate (d = 32 / 64): dev %s / %s, test %s / %s; Mamba dev %s, Attention test %s",
        split_best("dev", 32), split_best("dev", 64), split_best("test", 32), split_best("test", 64),
        split_acc("mamba", "dev"), split_acc("attention", "test")),
      split_pending or verdict_split[18] },
    { "spec §8.2.3", "Mamba memorises (high dev for its test); H3 generalises nearly as Attention; BaseConv very little",
      "dev − test: Mamba high, H3 ≈ Attention, BaseConv low test",
      string.format("test (dev − test), d = 32 / 64: Attention %s, Mamba %s, H3 %s, BaseConv %s", split_gap("attention"),
        split_gap("mamba"), split_gap("h3"), split_gap("base_conv")),
      split_pending or verdict_split[19] },
    { "spec §8.2.3", "Mechanisms are the same on dev and test, except BaseConv (induction on dev, less on test)",
      "same Attrib on dev and test; BaseConv @ Value lower on test",
      string.format("@ Value dev → test, d = 32 / 64: Attention %s, Based %s, BaseConv %s; @ Query + @ Key: Hyena %s, H3 %s, Mamba %s",
        split_shift("attention", { "value" }), split_shift("based", { "value" }), split_shift("base_conv", { "value" }),
        split_shift("hyena", { "query", "key" }), split_shift("h3", { "query", "key" }), split_shift("mamba", { "query", "key" })),
      split_pending or verdict_split[20] },
    { "spec §8.2.3", "Induction is not more general than direct retrieval (Attention and Mamba generalise best)",
      "best test: Attention and Mamba",
      string.format("test accuracy, d = 32 / 64, best first at d = 64: %s", split_ranking()),
      split_pending or verdict_split[21] },
    -- spec §8.2.4
    { "spec §8.2.4", "Mamba: a step change between d_conv 1 and 2; without a short conv it fails AR", "< 7 % for d_conv 0, 1",
      string.format("d_conv 0, 1: at most %s; d_conv (d = 32 / 64) %s", num(low01, 3), table.concat(hi2, ", ")) ..
        (conv_best.acc_text or ""),
      conv_best.acc_verdict and ("at lr 1e-3 agrees in direction (none of 2–4 succeeds at d ≤ 64); " .. conv_best.acc_verdict)
        or ("agrees in direction (none of 2–4 succeeds at d ≤ 64, lr 1e-3): " .. (sliced("mamba") and settle.conv_lr or lr_left)) },
    { "spec §8.2.4", "Larger kernels move retrieval earlier: with d_conv 4 most checkpoints retrieve at the query",
      "d_conv 4: mostly @ Query", string.format("@ Query / @ Key: d_conv 2 %s / %s, 3 %s / %s, 4 %s / %s", q2, k2, q3, k3, q4, k4) ..
        (conv_best.attrib_text or ""),
      conv_best.attrib_verdict and ("at lr 1e-3 agrees in direction (only d_conv 4 has mass at the query), disagrees in " ..
        "degree; " .. conv_best.attrib_verdict)
        or ("agrees in direction (only d_conv 4 has mass at the query), disagrees in degree (mostly @ Key): " ..
        (sliced("mamba") and settle.conv_lr or lr_left)) },
    { "spec §8.2.4", "Based works with kernels 2–4 and fails with kernel 1 or a long conv (< 10 %)", "works / fails",
      string.format("kernels 2, 3, 4 at d = 64: %s; kernel 1 and long conv at most %s", table.concat(bk, ", "), num(bfail, 3)),
      "agrees" },
    { "spec §8.2.4", "Short convs are responsible for association in Mamba and Based; not sufficient (Hyena has one and fails)",
      "Hyena < 30 %", string.format("as the two rows above; Hyena at most %s", num(max_acc { s.ar.hyena[32], s.ar.hyena[64] }, 3)),
      "agrees" },
    -- appendix D
    { "D.1", "Attention fails AR without positional embeddings", "≈6 %", nope_claim(s) },
    { "D.1", "SSMs are generally worse with PE than without; on ATR, NoPE Attention beats PE Attention at small widths",
      "SSMs: PE < NoPE; ATR, small d: Attention NoPE > PE", "not run (the quick profiles train the main curves only)",
      NS .. ": the PE/NoPE pairs of the `ar` and `atr_easy` paper profiles" },
    { "D.2", "AR: 1-layer Mamba and Hyena do as well as 2-layer; 1-layer Attention and Based fail",
      "1 layer ≥ 2 (Mamba, Hyena); 1-layer Attention, Based fail", depth("ar_1layer", "ar_layers") },
    { "D.2", "ATR (5, 20): 1-layer Mamba, H3, Hyena stay strong, 1-layer Attention drops, 1-layer Based/BaseConv weakest",
      "1-layer SSMs ≈ 2-layer; Attention lower; Based/BaseConv lowest", depth("atr_1layer", "atr_1layer") },
    { "D.3", "3-layer AR accuracy ≈ 2-layer (Mamba at one small width excepted)", "3 layers ≈ 2 layers",
      depth("ar_3layer", "ar_layers") },
    { "D.3", "Mixer output at the query: which layer writes the answer, by depth and architecture",
      "1-layer SSMs: layer 0; 2 layers: Hyena 0, Mamba mostly 0, the others 1; 3 layers: Mamba 0 or last",
      depth("mixer", "ar_layers") },
    { "D.4", "Rightmost-sibling queries are trivial: every model does well, 1-layer Based/BaseConv lags",
      "all high; 1-layer Based/BaseConv lower", depth("sibling", "sibling") },
    -- v3
    { "spec §9.1", "AR: only Attention and Based fully succeed, Mamba and DeltaNet come close behind",
      "Attention, Based ≈100 %; Mamba, DeltaNet close",
      string.format("DeltaNet %s; Attention %s; Based %s; Mamba %s", accs_of(s.delta), accs(s, "attention"), accs(s, "based"),
        accs(s, "mamba")), dn_verdict },
    { "spec §9.1", "Attention and Based show induction, Mamba and DeltaNet direct retrieval",
      "@ Value ≈ 1 / ≈ 0",
      string.format("DeltaNet @ Value %s, @ Query %s, @ Key %s (%d runs, each position's filter); Attention, Based, Mamba " ..
        "as in the paper's section 5.1 above", ms(field(dn_v, "value")), ms(field(dn_q, "query")), ms(field(dn_k, "key")),
        #dn_all), dn_mech },
    { "spec §9.2", "Mamba implements induction through its short conv: restoring the next key at layer 0 restores the most",
      "next key largest", string.format("next key, block output: at most %s (%d filtered runs); @ Key block output %s (d_conv 2, 3, 4); conv output at the next key, d_conv 4: %s (mean)",
        num(nk_max), #nk_block, table.concat(key_block, ", "), num(nk4)) .. nk_best_text,
      nk_best_verdict or ("disagrees at this scale (one run, d = 64, d_conv 4, shows it inside the mixer): " ..
        (sliced("mamba") and settle.next_key or lr_left)) },
    { "spec §9.2", "Results are sensitive to the learning rate", "a neighbouring lr can fail completely",
      #cliffs > 0 and table.concat(cliffs, "; ") or string.format("no neighbouring rate fails (%d of the slice's %d runs)",
        s.slice_done, T.slice_runs),
      #cliffs > 0 and "agrees" or (s.slice_done == T.slice_runs and "disagrees at this scale" or (NS .. ": " .. lr_left)) },
    { "spec §9.3", "Mamba without a short conv learns Attention-like induction on ATR (@ Value high)", "@ Value high",
      conv_text, conv_verdict },
  }
end


--- The ledger's lines.
return function(s)
  local lines = { "| # | section | the paper's claim | the paper | mechlab (quick) | verdict |", "|---|---|---|---|---|---|" }
  for i, c in ipairs(claims(s)) do
    lines[#lines + 1] = row { tostring(i), c[1], c[2], c[3], c[4], c[5] }
  end
  return lines
end
