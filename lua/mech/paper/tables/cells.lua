--- The cells the ledger compares, read from the selected runs (stats.lua): each is {v, label} and,
--- for an accuracy, se (the binomial standard error over the documents evaluated), runs, floor
--- (ATR: floors.lua) and epochs; nil where the runs are missing (a sweep not run). Attrib cells
--- are the mean over the runs that pass the position's filter, as the tables show them. Part of
--- mech.paper.tables.
local paper = require "mech.paper"
local load = require "mech.paper.tables.load"
local F = require "mech.paper.tables.format"
local S = require "mech.paper.tables.stats"
local Fl = require "mech.paper.tables.floors"

local C = {}

local name = paper.arch_name
local passes_at = load.passes_at

-- the epochs of each ATR sweep's quick runs (the paper: 32); the comparison of two cells whose
-- epochs differ by more than 1.5 times cannot tell (verdict.lua)
local epochs = { atr = 32, hard = 5, hard32 = 32, atr_layers = 32, split = 32, atr_conv = 32, sibling = 7 }

-- an accuracy cell from runs (nil entries skipped); split "dev" reads each run's dev evaluation
local function acc(runs, label, kind, split)
  local list = {}
  for _, e in ipairs(runs or {}) do
    local t = e and (split == "dev" and e.dev or e)
    if t and t.accuracy then list[#list + 1] = { accuracy = t.accuracy, n = t.n, run = e } end
  end
  if #list == 0 then return nil end
  local p, se = F.acc_se(list)
  local f = Fl.of_run(list[1].run, split)
  return { v = p, se = se, runs = #list, label = label, floor = f and f.value, epochs = epochs[kind] }
end

local function wlabel(a, w, what) return string.format("%s d = %d%s", name(a), w, what and (" " .. what) or "") end

--- AR at lr 1e-3 (the quick profile's seeds), at the best lr of the slice, Mamba at d = 256.
function C.ar(s, a, w) return acc(s.ar[a][w], wlabel(a, w, "(lr 1e-3)")) end
function C.ar_best(s, a, w)
  local b = s.ar_best[a] and s.ar_best[a][w]
  return b and acc(b.runs, wlabel(a, w, "(best lr " .. F.lr_str(b.lr) .. ")"))
end
function C.ar256(s) return s.mamba256 and acc({ s.mamba256 }, "Mamba d = 256 (lr " .. F.lr_str(s.mamba256.lr) .. ")") end
function C.nope(s, w) return acc(s.ar_nope[w], string.format("Attention without positions d = %d", w)) end
--- AR with positions at lr 1e-3 (`ar`'s pe_pairs profile), the partner of C.ar's NoPE cell
function C.ar_pe(s, a, w)
  return s.ar_pe[a] and acc(s.ar_pe[a][w], wlabel(a, w, "with positions (lr 1e-3)"))
end
--- Mamba by d_conv at its best rate of the slice (4: the slice's runs), Based by kernel group.
function C.mconv(s, k, w)
  return acc(s.mamba_best[k][w], string.format("Mamba d_conv %d d = %d (lr %s)", k, w, F.lr_str(s.mamba_rate)))
end
function C.based(s, g, w) return acc(s.based[g][w], string.format("Based kernel %s d = %d", g, w)) end
--- ATR accuracies: (5, 20), the atr_hard settings, the split, depth, sibling, DeltaNet, d_conv.
function C.atr(s, a, w) return acc({ s.atr[a][w] }, wlabel(a, w, "(5, 20)"), "atr") end
--- ATR (5, 20) from `atr_easy`'s pe_pairs profile: the partner of C.atr's cell (Attention without
--- positions, the others with them)
function C.atr_pe(s, a, w)
  local e = s.atr_pe[a] and s.atr_pe[a][w]
  return e and acc({ e }, wlabel(a, w, (e.pos_emb and "with" or "without") .. " positions (5, 20)"), "atr")
end
--- Attention without positions on (10, 20) at 32 epochs (`atr_hard`'s nope_pair profile), the
--- partner of C.hard's Attention cell there
function C.hard_nope(s, w)
  local e = s.hard_nope[w]
  return e and acc({ e }, wlabel("attention", w, "without positions (10, 20), 32 ep."), "hard32")
end
local titles = { pcfg_easy_8192 = "(5, 8192)", pcfg_10_20 = "(10, 20)" }
--- atr_hard's cells: the run at the paper's 32 epochs where it has run (quick32), else the quick
--- profile's at 5 (a comparison across the two cannot tell: verdict.lua)
local function hard_run(s, preset, a, w)
  local e32 = s.hard32[preset][a][w]
  if e32 then return e32, "32 ep.", "hard32" end
  return s.hard[preset][a][w], "5 ep.", "hard"
end
function C.hard(s, preset, a, w)
  local e, ep, kind = hard_run(s, preset, a, w)
  return acc({ e }, wlabel(a, w, titles[preset] .. ", " .. ep), kind)
end
function C.split(s, a, w, split) return acc({ s.split[a][w] }, wlabel(a, w, split), "split", split) end
function C.layers(s, a, L, w) return acc(s.layers[a][L][w], wlabel(a, w, L .. "-layer AR")) end
--- 3 layers at the best of the rates they ran at beyond 1e-3 (nil where none ran)
function C.layers_best(s, a, w)
  local e = s.layers_best[a] and s.layers_best[a][w]
  return e and acc({ e }, wlabel(a, w, "3-layer AR (best lr " .. F.lr_str(e.lr) .. ")"))
end
function C.atr_layers(s, a, L, w) return acc(s.atr_layers[a][L][w], wlabel(a, w, L .. "-layer (5, 20)"), "atr_layers") end
function C.sibling(s, a, L, w) return acc(s.sibling[a][L][w], wlabel(a, w, L .. "-layer sibling"), "sibling") end
function C.delta(s, w) return acc(s.delta[w], string.format("DeltaNet d = %d", w)) end
function C.atr_conv(s, k, w)
  local e = k == 4 and s.atr.mamba[w] or s.atr_conv[k][w]
  return acc({ e }, string.format("Mamba d_conv %d d = %d (5, 20)", k, w), "atr_conv")
end

-- an Attrib cell: the mean of key over the runs (nil: none), with the standard error of one
-- run's Attrib where its rows give it (the delta method; a mean over runs carries none)
local function attrib(runs, key, label)
  local v, se = {}, nil
  for _, e in ipairs(runs) do if e and e[key] ~= nil then v[#v + 1], se = e[key], e[key .. "_se"] end end
  if #v == 0 then return nil end
  return { v = F.mean_of(v), se = #v == 1 and se or nil, label = label .. (#v > 1 and string.format(" (%d runs)", #v) or "") }
end

local pos_name = { value = "@ Value", query = "@ Query", key = "@ Key" }

--- AR Attrib over every run passing the filter (Fig. 3b: the value; Fig. 3c: the query, whose
--- runs give @ Key too), and of the best-lr runs at a width, unfiltered.
function C.ar_attr(s, a, pos)
  return attrib(S.of_arch(pos == "value" and s.ar_value or s.ar_query, a), pos, name(a) .. " " .. pos_name[pos])
end
function C.best_attr(s, a, w, pos)
  local b = s.ar_best[a][w]
  return b and attrib(b.runs, pos, wlabel(a, w, "best lr " .. pos_name[pos] .. ", unfiltered"))
end
function C.m256_attr(s, pos) return s.mamba256 and attrib({ s.mamba256 }, pos, "Mamba d = 256 " .. pos_name[pos]) end
--- Mamba Q + K over the runs passing the query's filter (Fig. 3c).
function C.mamba_qk(s)
  local runs = S.of_arch(s.ar_query, "mamba")
  local v = {}
  for _, e in ipairs(runs) do v[#v + 1] = e.query + e.key end
  return #v > 0 and { v = F.mean_of(v), label = string.format("Mamba @ Query + @ Key (%d runs)", #v) } or nil
end
--- How many BaseConv runs pass the value's filter on AR (Fig. 3b), and their @ Value.
function C.base_conv_value_runs(s)
  return { v = #S.of_arch(s.ar_value, "base_conv"), label = "BaseConv runs passing the value's filter", digits = 0 }
end
--- ATR Attrib of one run: (5, 20) filtered by Fig. 4b, atr_hard by its own denominators.
function C.atr_attr(s, a, w, pos)
  local e = s.atr[a][w]
  local ok = e and S.in_set(s.atr_filtered[pos] or {})[e]
  return ok and attrib({ e }, pos, wlabel(a, w, "(5, 20) " .. pos_name[pos])) or nil
end
function C.hard_attr(s, preset, a, w, pos)
  local e, ep = hard_run(s, preset, a, w)
  return passes_at(e, pos) and attrib({ e }, pos, wlabel(a, w, titles[preset] .. ", " .. ep .. " " .. pos_name[pos])) or nil
end
--- The ATR split's Attrib on a split, summed over positions, unfiltered as Fig. 5c; the dev - test
--- change of that sum.
function C.split_shift(s, a, w, positions)
  local e = s.split[a][w]
  if not (e and e.dev) then return nil end
  local dev, test, names = 0, 0, {}
  for _, pos in ipairs(positions) do
    if e[pos] == nil or e.dev[pos] == nil then return nil end
    dev, test, names[#names + 1] = dev + e.dev[pos], test + e[pos], pos_name[pos]
  end
  return { v = dev - test, label = wlabel(a, w, table.concat(names, " + ") .. " dev − test") }
end
--- The ATR split's dev - test accuracy gap, with the error of the difference.
function C.split_gap(s, a, w)
  local dev, test = C.split(s, a, w, "dev"), C.split(s, a, w, "test")
  if not (dev and test) then return nil end
  return { v = dev.v - test.v, se = math.sqrt(dev.se ^ 2 + test.se ^ 2), runs = 1, label = wlabel(a, w, "dev − test") }
end
--- DeltaNet's Attrib over the runs of both widths passing the position's own filter.
function C.delta_attr(s, pos)
  local runs = S.passing_own(S.concat(s.delta[32], s.delta[64]), pos)
  return attrib(runs, pos, "DeltaNet " .. pos_name[pos])
end
--- Mamba's AR Attrib by d_conv: at lr 1e-3 (filter.csv) and at its best rate (own denominators).
function C.mconv_attr(s, k, pos)
  local all = S.concat(s.mamba[k][32], s.mamba[k][64])
  return attrib(S.passing(all, s.mamba_filtered[pos]), pos, string.format("Mamba d_conv %d %s (lr 1e-3)", k, pos_name[pos]))
end
function C.mconv_best_attr(s, k, pos)
  local all = S.concat(s.mamba_best[k][32], s.mamba_best[k][64])
  return attrib(S.passing_own(all, pos), pos, string.format("Mamba d_conv %d %s (lr %s)", k, pos_name[pos],
    F.lr_str(s.mamba_rate)))
end
--- atr_mamba_conv's @ Value by d_conv (own denominators; 4: atr_easy's Mamba, Fig. 4b's filter).
function C.conv_attr(s, k, w, pos)
  if k == 4 then return C.atr_attr(s, "mamba", w, pos) end
  local e = s.atr_conv[k][w]
  return passes_at(e, pos) and attrib({ e }, pos, string.format("Mamba d_conv %d d = %d %s", k, w, pos_name[pos])) or nil
end
--- The layer whose mixer output at the query restores the most (runs passing each layer's filter).
function C.mixer_top(s, a, L)
  local best, at
  for layer = 0, L - 1 do
    local m = S.mixer_at(s.layers_mixer[a][L], layer)
    if m and (not best or m > best) then best, at = m, layer end
  end
  return at and { v = at, digits = 0, label = string.format("%s %d-layer: the top layer", name(a), L) } or nil
end
--- Where a best-lr Mamba run of the next-key rerun restores the most at layer 0.
function C.next_key_top(s, i)
  local e = s.nk_best[i]
  if not e then return nil end
  local where, v = S.nk_argmax(e)
  return { v = where, label = string.format("Mamba d = %d (lr %s), layer 0: the position restoring the most (%s):", e.d,
    F.lr_str(e.lr), F.num(v)) }
end
--- Pairs of neighbouring learning rates of the slice of which one succeeds (> 0.5) and the other
--- fails (< 0.1), over every (architecture, width).
function C.lr_cliffs(s)
  local lrs, n, names = load.lrs, 0, {}
  for _, a in ipairs(paper.archs) do
    for _, w in ipairs { 32, 64 } do
      for i = 1, #lrs - 1 do
        local l1, l2 = s.ar_lr[a][w][lrs[i]], s.ar_lr[a][w][lrs[i + 1]]
        if #l1 > 0 and #l2 > 0 then
          local m1, m2 = F.mean_of(S.field(l1, "accuracy")), F.mean_of(S.field(l2, "accuracy"))
          if math.max(m1, m2) > 0.5 and math.min(m1, m2) < 0.1 then
            n, names[#names + 1] = n + 1, string.format("%s d = %d %s→%s", name(a), w, F.lr_str(lrs[i]), F.lr_str(lrs[i + 1]))
          end
        end
      end
    end
  end
  return { v = n, digits = 0, label = "neighbouring rates, one > 0.5 and one < 0.1" ..
    (#names > 0 and " (" .. table.concat(names, ", ") .. ")" or "") }
end
--- The floor of a setting on the quick runs' documents, and the share of sibling documents whose
--- answer is the query itself.
function C.floor(s, preset)
  local f = Fl.floor(preset, "test", load.eval_docs)
  return { v = f.value, digits = 3, label = "floor of " .. preset }
end

return C
