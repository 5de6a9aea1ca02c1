/* SPDX-License-Identifier: MIT */
/*
 * The HTML writer: one self-contained page a person can open from disk or attach to a bug
 * report. It loads nothing from the network (inline CSS and plain JavaScript, system fonts),
 * so it works offline and leaks nothing when opened. The page shows the whole-heap estimate
 * with its interval and the profiler's health, an icicle flame graph (root at the top; click
 * to zoom, search with the matched share, tooltips with bytes, percent and file:line) for
 * live or allocated bytes, and a sortable table of sites by allocating function or by stack.
 *
 * The data sits in a <script type="application/json"> element, compact enough for 10,000
 * stacks: strings once in a table, frames as indexes into it, and the stacks as one call
 * tree (a trie of root-first paths, so shared callers are stored once) with each stack a
 * leaf node plus its values. Every string goes through the JSON escaper in HTML mode, which
 * escapes '<', so no function name can close the script element; the page's script only
 * ever inserts names with textContent, never as markup.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/estimate.h"
#include "export/export.h"
#include "export/json.h"
#include "memprof/memprof.h"

/* ---- The page ---------------------------------------------------------------------------
 * The HTML before and after the data, one literal per line so the page stays readable here.
 * The script reads the data layout documented at its top (frames, nodes, stacks). Nothing
 * in the page may reference a URL, not even a link: check_views.py rejects any. */

// clang-format off
static const char *const page_head[] = {
    "<!DOCTYPE html>\n",
    "<html lang=\"en\">\n",
    "<head>\n",
    "<meta charset=\"utf-8\">\n",
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
    "<meta name=\"referrer\" content=\"no-referrer\">\n",
    "<title>libmemprof heap profile</title>\n",
    "<style>\n",
    ":root { --fg: #1d1f21; --muted: #5f6368; --bg: #fff; --line: #dadce0; --warn-bg: #fff4e5;\n",
    "  --warn: #8a4b00; --accent: #1a73e8; --match: #d633ff; }\n",
    "* { box-sizing: border-box; }\n",
    "body { margin: 0; padding: 16px 20px 40px;\n",
    "  font: 14px/1.45 system-ui, -apple-system, \"Segoe UI\", Roboto, \"Helvetica Neue\", Arial,\n",
    "  sans-serif; color: var(--fg); background: var(--bg); }\n",
    "h1 { font-size: 20px; margin: 0 0 6px; }\n",
    "h2 { font-size: 16px; margin: 24px 0 8px; }\n",
    ".muted { color: var(--muted); }\n",
    ".mono { font-family: ui-monospace, \"SF Mono\", Menlo, Consolas, \"DejaVu Sans Mono\",\n",
    "  monospace; font-size: 12px; }\n",
    "#summary p { margin: 2px 0; }\n",
    ".bad { color: #b3261e; font-weight: 600; }\n",
    ".warn { background: var(--warn-bg); color: var(--warn); border: 1px solid #f5c27a;\n",
    "  border-radius: 6px; padding: 6px 10px; margin: 8px 0; }\n",
    ".controls { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center;\n",
    "  margin: 12px 0 8px; }\n",
    ".controls label { cursor: pointer; }\n",
    "button { font: inherit; padding: 3px 10px; border: 1px solid var(--line);\n",
    "  border-radius: 4px; background: #f8f9fa; cursor: pointer; }\n",
    "button:hover { background: #eef1f4; }\n",
    "button:disabled { cursor: default; opacity: 0.5; }\n",
    "input[type=search] { font: inherit; padding: 3px 8px; width: 18em;\n",
    "  border: 1px solid var(--line); border-radius: 4px; }\n",
    "#matched { min-width: 14em; }\n",
    "#crumbs { margin: 4px 0; min-height: 1.4em; font-size: 13px; }\n",
    "#flame-box { position: relative; border: 1px solid var(--line); border-radius: 4px;\n",
    "  overflow: hidden; }\n",
    "#flame { display: block; width: 100%; cursor: pointer; }\n",
    "#flame-empty { padding: 24px; text-align: center; }\n",
    "#tip { position: fixed; z-index: 10; pointer-events: none; display: none; max-width: 560px;\n",
    "  background: #202124; color: #fff; border-radius: 6px; padding: 8px 10px; font-size: 12px;\n",
    "  line-height: 1.4; box-shadow: 0 2px 8px rgba(0,0,0,.3); word-break: break-all; }\n",
    "#tip b { font-size: 13px; }\n",
    "#tip .t-loc { color: #bdc1c6; }\n",
    "table { border-collapse: collapse; width: 100%; font-size: 13px; }\n",
    "th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: right;\n",
    "  vertical-align: top; white-space: nowrap; }\n",
    "th { position: sticky; top: 0; background: #f1f3f4; cursor: pointer; user-select: none; }\n",
    "th.sorted-asc::after { content: \" \\25b2\"; }\n",
    "th.sorted-desc::after { content: \" \\25bc\"; }\n",
    "td.fn, th.fn, td.loc, th.loc { text-align: left; }\n",
    "td.fn { white-space: normal; word-break: break-all; min-width: 16em; }\n",
    "td.loc { color: var(--muted); }\n",
    "tbody tr { cursor: pointer; }\n",
    "tbody tr:hover { background: #f1f8ff; }\n",
    ".path { color: var(--muted); font-size: 12px; }\n",
    "#table-box { overflow-x: auto; }\n",
    "footer { margin-top: 24px; font-size: 12px; }\n",
    "</style>\n",
    "</head>\n",
    "<body>\n",
    "<noscript><p class=\"warn\">This report draws its flame graph and table with JavaScript,\n",
    "which is turned off. The profile data is embedded in this file as JSON.</p></noscript>\n",
    "<h1 id=\"title\">Heap profile</h1>\n",
    "<div id=\"summary\"></div>\n",
    "<div class=\"controls\">\n",
    "  <span role=\"radiogroup\" aria-label=\"View\">\n",
    "    <label><input type=\"radio\" name=\"view\" value=\"inuse\" checked> Live bytes</label>\n",
    "    <label><input type=\"radio\" name=\"view\" value=\"alloc\"> Allocated bytes</label>\n",
    "  </span>\n",
    "  <span><input type=\"search\" id=\"search\" placeholder=\"Search functions and files\"\n",
    "    aria-label=\"Search\"> <span id=\"matched\" class=\"muted\"></span></span>\n",
    "  <span><button id=\"zoom-out\" type=\"button\">Zoom out</button>\n",
    "    <button id=\"reset\" type=\"button\">Reset zoom</button></span>\n",
    "</div>\n",
    "<div id=\"crumbs\" class=\"muted\"></div>\n",
    "<div id=\"flame-box\"><canvas id=\"flame\" aria-label=\"Flame graph\"></canvas>\n",
    "  <div id=\"flame-empty\" class=\"muted\" hidden>No samples in this view.</div></div>\n",
    "<div id=\"tip\"></div>\n",
    "<p class=\"muted\" style=\"font-size:12px\">Callers above callees (root at the top); widths are\n",
    "proportional to the estimated bytes. Click a frame to zoom into it, press Escape or\n",
    "&ldquo;Reset zoom&rdquo; to zoom out.</p>\n",
    "<h2>Allocation sites</h2>\n",
    "<div class=\"controls\">\n",
    "  <label>Group by <select id=\"group\">\n",
    "    <option value=\"leaf\">allocating function</option>\n",
    "    <option value=\"stack\">call stack</option></select></label>\n",
    "  <span id=\"table-note\" class=\"muted\"></span>\n",
    "  <button id=\"show-all\" type=\"button\" hidden>Show all</button>\n",
    "</div>\n",
    "<div id=\"table-box\"><table id=\"sites\"><thead><tr></tr></thead><tbody></tbody></table></div>\n",
    "<footer class=\"muted\">Estimates are unbiased: each sampled allocation of s bytes stands for\n",
    "s / (1 - exp(-s / rate)) bytes. Intervals are 95 % normal-approximation intervals; with\n",
    "fewer than about 100 samples treat them as rough.</footer>\n",
};

static const char *const page_tail[] = {
    "<script>\n",
    "(function () {\n",
    "  'use strict';\n",
    "  var D = JSON.parse(document.getElementById('memprof-data').textContent);\n",
    "  var S = D.strings, F = D.frames, N = D.nodes, T = D.stacks;\n",
    "  /* Flat arrays. frames: [name, file, line, kind] (name and file index strings, file -1\n",
    "     when unknown; kind 0 native, 1 interpreter, 2 no symbol, 3 synthetic, +4 inlined).\n",
    "     nodes: [parent, frame], the call tree of all stacks with root-first paths, parents\n",
    "     before children (-1 at the roots). stacks: [leaf node, inuse_space, inuse_space_sd,\n",
    "     inuse_objects, alloc_space, alloc_objects, live_samples, alloc_samples]. */\n",
    "  var NF = 4, NS = 8, IN_SPACE = 1, IN_SD = 2, IN_OBJ = 3, AL_SPACE = 4, AL_OBJ = 5;\n",
    "  var L_SAMP = 6, A_SAMP = 7;\n",
    "  var nframes = F.length / NF, nnodes = N.length / 2, nstacks = T.length / NS;\n",
    "  var $ = function (id) { return document.getElementById(id); };\n",
    "\n",
    "  /* ---- formatting ---- */\n",
    "  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];\n",
    "  function bytes(b) {\n",
    "    var u = 0;\n",
    "    while (b >= 1024 && u < UNITS.length - 1) { b /= 1024; u++; }\n",
    "    if (!u) return Math.round(b) + ' B';\n",
    "    return b.toFixed(b < 10 ? 2 : 1).replace(/\\.0+$/, '') + ' ' + UNITS[u];\n",
    "  }\n",
    "  function num(n) { return Math.round(n).toLocaleString('en-US'); }\n",
    "  function pct(a, b) {\n",
    "    if (!(b > 0)) return '0 %';\n",
    "    var p = 100 * a / b;\n",
    "    return (p >= 10 || p === 0 ? p.toFixed(1) : p.toPrecision(2)) + ' %';\n",
    "  }\n",
    "  function interval(v, sd) {\n",
    "    var h = 1.959964 * sd;\n",
    "    return bytes(Math.max(0, v - h)) + ' \\u2013 ' + bytes(v + h);\n",
    "  }\n",
    "  function el(tag, text, cls) {\n",
    "    var e = document.createElement(tag);\n",
    "    if (text !== undefined) e.textContent = text;\n",
    "    if (cls) e.className = cls;\n",
    "    return e;\n",
    "  }\n",
    "  function fname(f) { return S[F[f * NF]]; }\n",
    "  function floc(f) {\n",
    "    var fi = F[f * NF + 1], ln = F[f * NF + 2];\n",
    "    return fi < 0 ? '' : S[fi] + (ln ? ':' + ln : '');\n",
    "  }\n",
    "  function kindText(k) {\n",
    "    return ['', 'interpreter frame', 'no symbol', ''][k & 3] + (k & 4 ? ' (inlined)' : '');\n",
    "  }\n",
    "\n",
    "  /* Root-first frame paths of the stacks. */\n",
    "  var paths = new Array(nstacks);\n",
    "  for (var s = 0; s < nstacks; s++) {\n",
    "    var p = [];\n",
    "    for (var n = T[s * NS]; n >= 0; n = N[n * 2]) p.push(N[n * 2 + 1]);\n",
    "    paths[s] = p.reverse();\n",
    "  }\n",
    "\n",
    "  /* ---- header ---- */\n",
    "  (function () {\n",
    "    var h = D.heap, ti = D.time ? new Date(D.time * 1000).toISOString().replace('T', ' ')\n",
    "      .replace(/\\.\\d+Z$/, ' UTC') : '';\n",
    "    document.title = 'Heap profile' + (ti ? ' ' + ti : '') + ' \\u2013 libmemprof';\n",
    "    $('title').textContent = 'Heap profile' + (ti ? ' \\u2013 ' + ti : '');\n",
    "    var sum = $('summary'), allocTotal = 0;\n",
    "    for (var i = 0; i < nstacks; i++) allocTotal += T[i * NS + AL_SPACE];\n",
    "    var p1 = el('p');\n",
    "    p1.appendChild(el('span', 'Estimated live heap: '));\n",
    "    p1.appendChild(el('b', bytes(h.bytes)));\n",
    "    p1.appendChild(el('span', ' (95 % interval ' + bytes(h.lo) + ' \\u2013 ' +\n",
    "      bytes(h.hi) + '), ~' + num(h.objects) + ' live allocations, from ' +\n",
    "      num(h.samples) + ' live samples. Allocated since sampling began: ~' +\n",
    "      bytes(allocTotal) + '.'));\n",
    "    sum.appendChild(p1);\n",
    "    sum.appendChild(el('p', 'Sampling rate: one sample per ' + bytes(D.rate) +\n",
    "      ' allocated on average (' + num(D.rate) + ' bytes) \\u00b7 ' + num(nstacks) +\n",
    "      ' call stacks \\u00b7 libmemprof ' + D.version, 'muted'));\n",
    "    var hl = D.health, p2 = el('p');\n",
    "    p2.appendChild(el('span', 'Health: '));\n",
    "    function item(v, text, sep) {\n",
    "      p2.appendChild(el('span', num(v), v ? 'bad' : ''));\n",
    "      p2.appendChild(el('span', text + (sep ? ', ' : '')));\n",
    "    }\n",
    "    item(hl.dropped, ' samples dropped (heap map full)', 1);\n",
    "    item(hl.overflows, ' stack-table overflows', 1);\n",
    "    item(hl.truncated, ' truncated stacks', 1);\n",
    "    item(hl.unresolved, ' of ' + num(hl.addresses) + ' code addresses without symbols', 0);\n",
    "    sum.appendChild(p2);\n",
    "    if (h.samples < 100)\n",
    "      sum.appendChild(el('p', 'Only ' + num(h.samples) + ' live samples (fewer than ' +\n",
    "        '100): treat the estimates as rough. A lower sampling rate gives more ' +\n",
    "        'precision.', 'warn'));\n",
    "  })();\n",
    "\n",
    "  /* ---- flame graph model ----\n",
    "     Flame nodes merge call-tree nodes by function name under the same flame parent, as\n",
    "     other flame-graph tools do (index 0 is the root, \"all\"). The merge is done once, the\n",
    "     values per view; both loops rely on parents coming before their children. */\n",
    "  var fParent = [-1], fName = [-1], fKind = [3], fDepth = [0], fKids = [[]];\n",
    "  var flameOf = new Int32Array(nnodes), childOf = new Map();\n",
    "  for (var i = 0; i < nnodes; i++) {\n",
    "    var tp = N[2 * i], fr = N[2 * i + 1], fp = tp < 0 ? 0 : flameOf[tp];\n",
    "    var key = fp * S.length + F[fr * NF], fn = childOf.get(key);\n",
    "    if (fn === undefined) {\n",
    "      fn = fParent.length;\n",
    "      childOf.set(key, fn);\n",
    "      fParent.push(fp); fName.push(F[fr * NF]); fKind.push(F[fr * NF + 3]);\n",
    "      fDepth.push(fDepth[fp] + 1); fKids.push([]); fKids[fp].push(fn);\n",
    "    }\n",
    "    flameOf[i] = fn;\n",
    "  }\n",
    "  var nflame = fParent.length, views = {};\n",
    "\n",
    "  /* Per view: bytes through each call-tree node (tv) and flame node (val), bytes\n",
    "     allocated in the frame itself (self), and each flame node's left edge (x). */\n",
    "  function viewData(v) {\n",
    "    if (views[v]) return views[v];\n",
    "    var col = v === 'alloc' ? AL_SPACE : IN_SPACE;\n",
    "    var tv = new Float64Array(nnodes), val = new Float64Array(nflame);\n",
    "    var self = new Float64Array(nflame), x = new Float64Array(nflame), total = 0;\n",
    "    for (var s = 0; s < nstacks; s++) {\n",
    "      var w = T[s * NS + col], n = T[s * NS];\n",
    "      if (!(w > 0) || n < 0) continue;\n",
    "      total += w; tv[n] += w; self[flameOf[n]] += w;\n",
    "    }\n",
    "    for (var i = nnodes - 1; i >= 0; i--) {\n",
    "      if (N[2 * i] >= 0) tv[N[2 * i]] += tv[i];\n",
    "      val[flameOf[i]] += tv[i];\n",
    "    }\n",
    "    val[0] = total;\n",
    "    /* Largest callee first. */\n",
    "    (function layout(f, x0) {\n",
    "      var k = fKids[f];\n",
    "      x[f] = x0;\n",
    "      k.sort(function (a, b) { return val[b] - val[a]; });\n",
    "      for (var j = 0; j < k.length && val[k[j]] > 0; j++) {\n",
    "        layout(k[j], x0);\n",
    "        x0 += val[k[j]];\n",
    "      }\n",
    "    })(0, 0);\n",
    "    return (views[v] = { tv: tv, val: val, self: self, x: x, total: total });\n",
    "  }\n",
    "\n",
    "  /* ---- state ---- */\n",
    "  var view = 'inuse', V = viewData(view), focus = 0, term = '', rects = [];\n",
    "  var fMatch = new Uint8Array(nflame), frameMatch = new Uint8Array(nframes);\n",
    "  var stackMatch = new Uint8Array(nstacks);\n",
    "  var canvas = $('flame'), ctx = canvas.getContext('2d'), tip = $('tip');\n",
    "  var ROW = 18, MINW = 0.5, MATCH = '#d633ff', lower = null;\n",
    "\n",
    "  function nodeName(f) { return f ? S[fName[f]] : 'all'; }\n",
    "  function hash(str) {\n",
    "    var h = 2166136261;\n",
    "    for (var i = 0; i < str.length; i++) h = Math.imul(h ^ str.charCodeAt(i), 16777619);\n",
    "    return h >>> 0;\n",
    "  }\n",
    "  function color(f) {\n",
    "    if (!f) return '#c8ccd1';\n",
    "    if (term && fMatch[f]) return MATCH;\n",
    "    var k = fKind[f] & 3, h = hash(S[fName[f]]);\n",
    "    if (k === 3 || k === 2) return 'hsl(0,0%,' + (72 + h % 12) + '%)';\n",
    "    if (k === 1) return 'hsl(' + (175 + h % 40) + ',55%,' + (62 + h % 14) + '%)';\n",
    "    return 'hsl(' + (h % 50) + ',' + (70 + h % 25) + '%,' + (58 + (h >> 8) % 14) + '%)';\n",
    "  }\n",
    "\n",
    "  function draw() {\n",
    "    var W = canvas.clientWidth || 800, dpr = window.devicePixelRatio || 1;\n",
    "    var val = V.val, X = V.x, fx = X[focus], fw = val[focus], scale = fw > 0 ? W / fw : 0;\n",
    "    var empty = !(V.total > 0), maxDepth = 0;\n",
    "    $('flame-empty').hidden = !empty;\n",
    "    canvas.hidden = empty;\n",
    "    rects = [];\n",
    "    /* Ancestors of the focus span the full width; nodes narrower than MINW pixels (and so\n",
    "       their callees) are left out. */\n",
    "    (function walk(f) {\n",
    "      var x0 = (X[f] - fx) * scale, w = val[f] * scale;\n",
    "      if (x0 + w < 0 || x0 > W || w < MINW) return;\n",
    "      var l = Math.max(0, x0), r = Math.min(W, x0 + w);\n",
    "      rects.push({ f: f, x: l, w: r - l, y: fDepth[f] * ROW });\n",
    "      if (fDepth[f] > maxDepth) maxDepth = fDepth[f];\n",
    "      for (var k = fKids[f], j = 0; j < k.length; j++) walk(k[j]);\n",
    "    })(0);\n",
    "    var H = (maxDepth + 1) * ROW;\n",
    "    canvas.style.height = H + 'px';\n",
    "    canvas.width = Math.round(W * dpr);\n",
    "    canvas.height = Math.round(H * dpr);\n",
    "    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);\n",
    "    ctx.clearRect(0, 0, W, H);\n",
    "    ctx.font = '12px ui-monospace, Menlo, Consolas, \"DejaVu Sans Mono\", monospace';\n",
    "    ctx.textBaseline = 'middle';\n",
    "    var cw = ctx.measureText('mmmmmmmmmm').width / 10 || 7, fd = fDepth[focus];\n",
    "    for (var i = 0; i < rects.length; i++) {\n",
    "      var r = rects[i], f = r.f;\n",
    "      ctx.fillStyle = color(f);\n",
    "      ctx.globalAlpha = fDepth[f] < fd ? 0.6 : 1;\n",
    "      ctx.fillRect(r.x, r.y, Math.max(r.w - 0.5, 0.5), ROW - 1);\n",
    "      ctx.globalAlpha = 1;\n",
    "      var fit = Math.floor((r.w - 6) / cw);\n",
    "      if (fit >= 4) {\n",
    "        var label = f ? nodeName(f) : 'all (' + bytes(V.total) + ')';\n",
    "        if (label.length > fit) label = label.slice(0, fit - 1) + '\\u2026';\n",
    "        ctx.fillStyle = term && fMatch[f] ? '#fff' : '#111';\n",
    "        ctx.fillText(label, r.x + 3, r.y + ROW / 2);\n",
    "      }\n",
    "    }\n",
    "    crumbs();\n",
    "    $('zoom-out').disabled = $('reset').disabled = focus === 0;\n",
    "  }\n",
    "\n",
    "  function crumbs() {\n",
    "    var c = $('crumbs'), chain = [];\n",
    "    c.textContent = '';\n",
    "    if (!focus) { c.textContent = 'Showing everything.'; return; }\n",
    "    for (var f = focus; f >= 0; f = fParent[f]) chain.unshift(f);\n",
    "    c.appendChild(el('span', 'Zoomed into: '));\n",
    "    chain.forEach(function (g, i) {\n",
    "      if (i) c.appendChild(el('span', ' \\u203a '));\n",
    "      var a = el('a', nodeName(g));\n",
    "      a.href = '#';\n",
    "      a.addEventListener('click', function (e) { e.preventDefault(); zoom(g); });\n",
    "      c.appendChild(a);\n",
    "    });\n",
    "    c.appendChild(el('span', ' (' + bytes(V.val[focus]) + ', ' +\n",
    "      pct(V.val[focus], V.total) + ' of total)'));\n",
    "  }\n",
    "\n",
    "  function zoom(f) { focus = f > 0 ? f : 0; hideTip(); draw(); }\n",
    "\n",
    "  function hit(ev) {\n",
    "    var b = canvas.getBoundingClientRect(), x = ev.clientX - b.left;\n",
    "    var y = ev.clientY - b.top;\n",
    "    for (var i = 0; i < rects.length; i++) {\n",
    "      var r = rects[i];\n",
    "      if (y >= r.y && y < r.y + ROW && x >= r.x && x < r.x + r.w) return r.f;\n",
    "    }\n",
    "    return -1;\n",
    "  }\n",
    "\n",
    "  function hideTip() { tip.style.display = 'none'; }\n",
    "  function showTip(f, ev) {\n",
    "    var val = V.val[f];\n",
    "    tip.textContent = '';\n",
    "    tip.appendChild(el('b', nodeName(f)));\n",
    "    tip.appendChild(el('div', (view === 'alloc' ? 'Allocated: ' : 'Live: ') + bytes(val) +\n",
    "      ' (' + num(val) + ' bytes), ' + pct(val, V.total) + ' of total' +\n",
    "      (focus ? ', ' + pct(val, V.val[focus]) + ' of zoom' : '')));\n",
    "    if (V.self[f] > 0) tip.appendChild(el('div', 'Allocated in this frame: ' +\n",
    "      bytes(V.self[f])));\n",
    "    /* The source locations merged into this node, largest first. */\n",
    "    var byFrame = new Map(), locs = [];\n",
    "    for (var i = 0; f && i < nnodes; i++)\n",
    "      if (flameOf[i] === f && V.tv[i] > 0)\n",
    "        byFrame.set(N[2 * i + 1], (byFrame.get(N[2 * i + 1]) || 0) + V.tv[i]);\n",
    "    byFrame.forEach(function (v, fr) { locs.push([fr, v]); });\n",
    "    locs.sort(function (a, b) { return b[1] - a[1]; });\n",
    "    for (i = 0; i < locs.length && i < 4; i++) {\n",
    "      var l = floc(locs[i][0]) || '(no source location)';\n",
    "      var k = kindText(F[locs[i][0] * NF + 3]);\n",
    "      tip.appendChild(el('div', l + (k ? ' \\u2013 ' + k : '') +\n",
    "        (locs.length > 1 ? ': ' + bytes(locs[i][1]) : ''), 't-loc mono'));\n",
    "    }\n",
    "    if (locs.length > 4) tip.appendChild(el('div', '\\u2026 ' + (locs.length - 4) +\n",
    "      ' more locations', 't-loc'));\n",
    "    tip.style.display = 'block';\n",
    "    var tw = tip.offsetWidth, th = tip.offsetHeight;\n",
    "    var tx = ev.clientX + 14, ty = ev.clientY + 14;\n",
    "    if (tx + tw > window.innerWidth - 4) tx = Math.max(4, ev.clientX - tw - 14);\n",
    "    if (ty + th > window.innerHeight - 4) ty = Math.max(4, ev.clientY - th - 14);\n",
    "    tip.style.left = tx + 'px';\n",
    "    tip.style.top = ty + 'px';\n",
    "  }\n",
    "\n",
    "  canvas.addEventListener('mousemove', function (ev) {\n",
    "    var f = hit(ev);\n",
    "    if (f >= 0) showTip(f, ev); else hideTip();\n",
    "  });\n",
    "  canvas.addEventListener('mouseleave', hideTip);\n",
    "  canvas.addEventListener('click', function (ev) {\n",
    "    var f = hit(ev);\n",
    "    if (f >= 0) zoom(f === focus ? fParent[f] : f);\n",
    "  });\n",
    "  $('reset').addEventListener('click', function () { zoom(0); });\n",
    "  $('zoom-out').addEventListener('click', function () { zoom(fParent[focus]); });\n",
    "  document.addEventListener('keydown', function (ev) {\n",
    "    if (ev.key === 'Escape' && ev.target.tagName !== 'INPUT') zoom(0);\n",
    "  });\n",
    "  window.addEventListener('resize', function () { draw(); });\n",
    "\n",
    "  /* ---- search ----\n",
    "     Case-insensitive substring of a function name or file:line. Frames are tested once\n",
    "     per search; flame nodes and stacks match when one of their frames does. */\n",
    "  function search() {\n",
    "    term = $('search').value.trim().toLowerCase();\n",
    "    var i, s, m = 0;\n",
    "    if (!lower) lower = S.map(function (x) { return x.toLowerCase(); });\n",
    "    for (i = 0; i < nframes; i++)\n",
    "      frameMatch[i] = term && (lower[F[i * NF]].indexOf(term) >= 0 ||\n",
    "        floc(i).toLowerCase().indexOf(term) >= 0) ? 1 : 0;\n",
    "    fMatch.fill(0);\n",
    "    for (i = 0; i < nnodes; i++) if (frameMatch[N[2 * i + 1]]) fMatch[flameOf[i]] = 1;\n",
    "    for (s = 0; s < nstacks; s++) {\n",
    "      var p = paths[s];\n",
    "      stackMatch[s] = 0;\n",
    "      for (var j = 0; j < p.length && !stackMatch[s]; j++)\n",
    "        stackMatch[s] = frameMatch[p[j]];\n",
    "    }\n",
    "    /* The matched share counts a match inside another match once. */\n",
    "    var inMatch = new Uint8Array(nflame);\n",
    "    for (i = 1; i < nflame; i++) {\n",
    "      if (fMatch[i] && !inMatch[fParent[i]]) m += V.val[i];\n",
    "      inMatch[i] = fMatch[i] | inMatch[fParent[i]];\n",
    "    }\n",
    "    $('matched').textContent = term ? 'Matched: ' + bytes(m) + ' (' + pct(m, V.total) +\n",
    "      ' of ' + (view === 'alloc' ? 'allocated' : 'live') + ' bytes)' : '';\n",
    "    draw();\n",
    "    renderTable();\n",
    "  }\n",
    "  $('search').addEventListener('input', search);\n",
    "\n",
    "  var radios = document.querySelectorAll('input[name=view]');\n",
    "  Array.prototype.forEach.call(radios, function (r) {\n",
    "    r.addEventListener('change', function () {\n",
    "      if (!r.checked) return;\n",
    "      view = r.value;\n",
    "      V = viewData(view);\n",
    "      focus = 0;\n",
    "      sortKey = view === 'alloc' ? 'alloc' : 'live';\n",
    "      sortDir = -1;\n",
    "      search();\n",
    "    });\n",
    "  });\n",
    "\n",
    "  /* ---- table ----\n",
    "     Rows by allocating (leaf) function or by stack, from the stacks that match the search\n",
    "     (all without one), so a search for a caller shows what it allocates through. */\n",
    "  var COLS = [\n",
    "    { key: 'fn', title: 'Function', cls: 'fn', text: true },\n",
    "    { key: 'loc', title: 'Location', cls: 'loc', text: true },\n",
    "    { key: 'live', title: 'Live bytes' },\n",
    "    { key: 'ci', title: '95 % interval', nosort: true },\n",
    "    { key: 'liveObj', title: 'Live objects' },\n",
    "    { key: 'alloc', title: 'Allocated bytes' },\n",
    "    { key: 'allocObj', title: 'Allocations' },\n",
    "    { key: 'lsamp', title: 'Live samples' },\n",
    "    { key: 'asamp', title: 'Alloc samples' }\n",
    "  ];\n",
    "  var sortKey = 'live', sortDir = -1, showAll = false, LIMIT = 200, PATH = 8;\n",
    "  var shownRows = [];\n",
    "\n",
    "  function rowsFor(group) {\n",
    "    var rows = [], byName = new Map();\n",
    "    for (var s = 0; s < nstacks; s++) {\n",
    "      if (term && !stackMatch[s]) continue;\n",
    "      var o = s * NS, p = paths[s], leaf = p[p.length - 1], r = byName.get(F[leaf * NF]);\n",
    "      if (!r) {\n",
    "        r = { fn: fname(leaf), loc: '', best: -1, live: 0, v: 0, liveObj: 0, alloc: 0,\n",
    "          allocObj: 0, lsamp: 0, asamp: 0, stacks: [] };\n",
    "        rows.push(r);\n",
    "        if (group === 'leaf') byName.set(F[leaf * NF], r);\n",
    "      }\n",
    "      /* The location shown is that of the stack holding the most bytes. */\n",
    "      if (T[o + IN_SPACE] + T[o + AL_SPACE] > r.best) {\n",
    "        r.best = T[o + IN_SPACE] + T[o + AL_SPACE];\n",
    "        r.loc = floc(leaf);\n",
    "      }\n",
    "      r.live += T[o + IN_SPACE]; r.v += T[o + IN_SD] * T[o + IN_SD];\n",
    "      r.liveObj += T[o + IN_OBJ]; r.alloc += T[o + AL_SPACE]; r.allocObj += T[o + AL_OBJ];\n",
    "      r.lsamp += T[o + L_SAMP]; r.asamp += T[o + A_SAMP];\n",
    "      r.stacks.push(s);\n",
    "    }\n",
    "    return rows;\n",
    "  }\n",
    "  /* A stack as \"leaf <- caller <- ...\", the first PATH frames or all of them. */\n",
    "  function pathText(s, all) {\n",
    "    var p = paths[s], out = [];\n",
    "    for (var i = p.length - 1; i >= 0 && (all || out.length < PATH); i--)\n",
    "      out.push(fname(p[i]));\n",
    "    var more = p.length - out.length;\n",
    "    return out.join(' \\u2190 ') + (more > 0 ? ' \\u2190 \\u2026 ' + more + ' more' : '');\n",
    "  }\n",
    "\n",
    "  function renderHead() {\n",
    "    var tr = document.querySelector('#sites thead tr');\n",
    "    tr.textContent = '';\n",
    "    COLS.forEach(function (c) {\n",
    "      var th = el('th', c.title, c.cls || '');\n",
    "      if (c.key === sortKey) th.className += sortDir < 0 ? ' sorted-desc' : ' sorted-asc';\n",
    "      th.setAttribute('aria-sort', c.key !== sortKey ? 'none' :\n",
    "        sortDir < 0 ? 'descending' : 'ascending');\n",
    "      if (c.nosort) th.style.cursor = 'default';\n",
    "      else th.addEventListener('click', function () {\n",
    "        if (sortKey === c.key) sortDir = -sortDir;\n",
    "        else { sortKey = c.key; sortDir = c.text ? 1 : -1; }\n",
    "        renderTable();\n",
    "      });\n",
    "      tr.appendChild(th);\n",
    "    });\n",
    "  }\n",
    "\n",
    "  function renderTable() {\n",
    "    renderHead();\n",
    "    var group = $('group').value, rows = rowsFor(group);\n",
    "    var text = sortKey === 'fn' || sortKey === 'loc';\n",
    "    rows.sort(function (a, b) {\n",
    "      var x = a[sortKey], y = b[sortKey];\n",
    "      var c = text ? (x < y ? -1 : x > y ? 1 : 0) : x - y;\n",
    "      return c * sortDir || b.live - a.live || b.alloc - a.alloc;\n",
    "    });\n",
    "    var tb = document.querySelector('#sites tbody');\n",
    "    var frag = document.createDocumentFragment();\n",
    "    var shown = showAll ? rows.length : Math.min(rows.length, LIMIT);\n",
    "    tb.textContent = '';\n",
    "    for (var i = 0; i < shown; i++) {\n",
    "      var r = rows[i], tr = el('tr'), fn = el('td', undefined, 'fn');\n",
    "      fn.appendChild(el('span', r.fn, 'mono'));\n",
    "      if (group === 'stack') {\n",
    "        var pt = el('div', pathText(r.stacks[0], false), 'path');\n",
    "        pt.title = pathText(r.stacks[0], true);\n",
    "        fn.appendChild(pt);\n",
    "      } else if (r.stacks.length > 1) {\n",
    "        fn.appendChild(el('div', r.stacks.length + ' call stacks', 'path'));\n",
    "      }\n",
    "      tr.appendChild(fn);\n",
    "      tr.appendChild(el('td', r.loc, 'loc mono'));\n",
    "      tr.appendChild(el('td', bytes(r.live)));\n",
    "      tr.appendChild(el('td', r.lsamp ? interval(r.live, Math.sqrt(r.v)) : '\\u2013',\n",
    "        'muted'));\n",
    "      tr.appendChild(el('td', num(r.liveObj)));\n",
    "      tr.appendChild(el('td', bytes(r.alloc)));\n",
    "      tr.appendChild(el('td', num(r.allocObj)));\n",
    "      tr.appendChild(el('td', num(r.lsamp)));\n",
    "      tr.appendChild(el('td', num(r.asamp)));\n",
    "      tr.title = 'Click to search for ' + r.fn;\n",
    "      tr.setAttribute('data-row', i);\n",
    "      frag.appendChild(tr);\n",
    "    }\n",
    "    tb.appendChild(frag);\n",
    "    shownRows = rows;\n",
    "    $('table-note').textContent = (shown < rows.length ? 'Showing ' + num(shown) + ' of ' :\n",
    "      '') + num(rows.length) + ' rows' + (term ? ' from stacks matching the search' : '') +\n",
    "      '.';\n",
    "    $('show-all').hidden = shown >= rows.length;\n",
    "  }\n",
    "  /* One listener for all rows: a click searches for the row's function. */\n",
    "  document.querySelector('#sites tbody').addEventListener('click', function (ev) {\n",
    "    var tr = ev.target.closest('tr[data-row]');\n",
    "    if (!tr) return;\n",
    "    $('search').value = shownRows[+tr.getAttribute('data-row')].fn;\n",
    "    search();\n",
    "  });\n",
    "  $('group').addEventListener('change', function () { showAll = false; renderTable(); });\n",
    "  $('show-all').addEventListener('click', function () { showAll = true; renderTable(); });\n",
    "\n",
    "  search();\n",
    "})();\n",
    "</script>\n",
    "</body>\n",
    "</html>\n",
};
// clang-format on

static void put_lines(const char *const *lines, size_t n, FILE *out)
{
    for (size_t i = 0; i < n; i++)
        fputs(lines[i], out);
}

/* ---- Strings, frames and the call tree ------------------------------------------------- */

static uint64_t fnv(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Open-addressing tables keep `index + 1` (0 = empty); capacities are powers of two. */
static size_t table_cap(size_t n)
{
    size_t cap = 64;
    while (cap < n * 2)
        cap <<= 1;
    return cap;
}

struct html_data {
    struct memprof_uframes u;
    /* String table: labels and file names, each once. */
    const char **str;
    uint32_t nstr;
    uint32_t *str_table;
    size_t str_cap;
    char **owned; /* labels built into a buffer (unresolved frames), copied */
    uint32_t nowned;
    uint32_t *name_of, *file_of; /* unique frame -> string index (file: UINT32_MAX none) */
    /* Call tree: node -> (parent or UINT32_MAX, unique frame). Nodes are numbered in
     * creation order, so a parent comes before its children: the page's script relies on
     * it to sum values bottom-up and to merge frames in one pass. */
    uint32_t *parent, *frame, nnodes;
    uint32_t *node_table;
    size_t node_cap;
    uint32_t *leaf; /* stack -> its leaf node, UINT32_MAX if left out */
};

static uint32_t intern(struct html_data *d, const char *s)
{
    size_t k = (size_t)fnv(s) & (d->str_cap - 1);
    for (; d->str_table[k]; k = (k + 1) & (d->str_cap - 1))
        if (strcmp(d->str[d->str_table[k] - 1], s) == 0)
            return d->str_table[k] - 1;
    d->str[d->nstr] = s;
    d->str_table[k] = ++d->nstr;
    return d->nstr - 1;
}

static uint32_t tree_child(struct html_data *d, uint32_t parent, uint32_t frame)
{
    uint64_t h = ((uint64_t)parent << 32 | frame) * 0x9E3779B97F4A7C15ull;
    size_t k = (size_t)(h >> 32) & (d->node_cap - 1);
    for (; d->node_table[k]; k = (k + 1) & (d->node_cap - 1)) {
        uint32_t n = d->node_table[k] - 1;
        if (d->parent[n] == parent && d->frame[n] == frame)
            return n;
    }
    d->parent[d->nnodes] = parent;
    d->frame[d->nnodes] = frame;
    d->node_table[k] = ++d->nnodes;
    return d->nnodes - 1;
}

static void data_free(struct html_data *d)
{
    for (uint32_t i = 0; i < d->nowned; i++)
        free(d->owned[i]);
    free(d->owned);
    free(d->str);
    free(d->str_table);
    free(d->name_of);
    free(d->file_of);
    free(d->parent);
    free(d->frame);
    free(d->node_table);
    free(d->leaf);
    memprof__uframes_free(&d->u);
}

static int data_build(const struct memprof_profile *p, struct html_data *d, uint32_t *path)
{
    memset(d, 0, sizeof *d);
    if (memprof__uframes_build(p, &d->u) < 0)
        return -ENOMEM;
    uint32_t nu = d->u.n;
    size_t total = 0; /* tree nodes needed at most: the path lengths of kept stacks */
    for (size_t i = 0; i < p->nstacks; i++)
        total += (size_t)p->stacks[i].nframes + 1;
    d->str_cap = table_cap(2 * (size_t)nu);
    d->node_cap = table_cap(total);
    d->str = malloc((2 * (size_t)nu + 1) * sizeof *d->str);
    d->str_table = calloc(d->str_cap, sizeof *d->str_table);
    d->owned = malloc(((size_t)nu + 1) * sizeof *d->owned);
    d->name_of = malloc(((size_t)nu + 1) * sizeof *d->name_of);
    d->file_of = malloc(((size_t)nu + 1) * sizeof *d->file_of);
    d->parent = malloc((total + 1) * sizeof *d->parent);
    d->frame = malloc((total + 1) * sizeof *d->frame);
    d->node_table = calloc(d->node_cap, sizeof *d->node_table);
    d->leaf = malloc((p->nstacks + 1) * sizeof *d->leaf);
    if (!d->str || !d->str_table || !d->owned || !d->name_of || !d->file_of || !d->parent ||
        !d->frame || !d->node_table || !d->leaf)
        return -ENOMEM;

    for (uint32_t i = 0; i < nu; i++) {
        char buf[256];
        const char *file;
        uint32_t line;
        const char *label = memprof__uframe_label(p, &d->u, i, buf, sizeof buf, &file, &line);
        if (label == buf) {
            /* Built for this call only: keep a copy for the string table. */
            if (!(label = d->owned[d->nowned] = strdup(buf)))
                return -ENOMEM;
            d->nowned++;
        }
        d->name_of[i] = intern(d, label);
        d->file_of[i] = file ? intern(d, file) : UINT32_MAX;
    }
    /* Stacks with nothing to show in either view stay out of the page. */
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        d->leaf[i] = UINT32_MAX;
        if (st->inuse_space == 0 && st->alloc_space == 0)
            continue;
        uint32_t n = memprof__uframes_path(p, &d->u, st, path), node = UINT32_MAX;
        for (uint32_t j = 0; j < n; j++)
            node = tree_child(d, node, path[j]);
        d->leaf[i] = node;
    }
    return 0;
}

/* ---- Writing --------------------------------------------------------------------------- */

/* Values of a flat JSON array, with a line break now and then for readable diffs. */
static void put_sep(FILE *out, size_t *count)
{
    if (*count)
        fputs(*count % 24 ? "," : ",\n", out);
    (*count)++;
}

static void put_u64(FILE *out, uint64_t v, size_t *count)
{
    put_sep(out, count);
    fprintf(out, "%" PRIu64, v);
}

/* An index, or -1 for "none" (UINT32_MAX). */
static void put_index(FILE *out, uint32_t v, size_t *count)
{
    put_sep(out, count);
    if (v == UINT32_MAX)
        fputs("-1", out);
    else
        fprintf(out, "%" PRIu32, v);
}

static uint64_t frame_kind(const struct memprof_profile *p, const struct memprof_uframes *u,
                           uint32_t i)
{
    if (u->rep[i] == UINT32_MAX)
        return 3;
    uint32_t flags = p->frames[u->rep[i]].flags;
    uint64_t kind = (flags & MEMPROF_FRAME_RUNTIME)      ? 1
                    : (flags & MEMPROF_FRAME_UNRESOLVED) ? 2
                                                         : 0;
    return kind | ((flags & MEMPROF_FRAME_INLINED) ? 4 : 0);
}

static void write_data(const struct memprof_profile *p, const struct html_data *d, FILE *out)
{
    uint64_t lo, hi;
    memprof__est_interval((double)p->inuse_space, p->inuse_space_var, &lo, &hi);
    fprintf(out,
            "{\"version\":\"" MEMPROF_VERSION_STRING "\",\"time\":%" PRIu64 ",\"rate\":%" PRIu64
            ",\n\"heap\":{\"bytes\":%" PRIu64 ",\"lo\":%" PRIu64 ",\"hi\":%" PRIu64
            ",\"objects\":%" PRIu64 ",\"samples\":%" PRIu64 "},\n"
            "\"health\":{\"dropped\":%" PRIu64 ",\"overflows\":%" PRIu64 ",\"truncated\":%" PRIu64
            ",\"unresolved\":%" PRIu64 ",\"addresses\":%" PRIu64 "},\n\"strings\":[",
            p->time_unix_ns / 1000000000u, p->sampling_rate, p->inuse_space, lo, hi,
            p->inuse_objects, p->live_samples, p->dropped_samples, p->stack_overflows,
            p->truncated_stacks, p->unresolved_addresses, p->total_addresses);
    for (uint32_t i = 0; i < d->nstr; i++) {
        fputs(i ? ",\n" : "\n", out);
        memprof__json_string(out, d->str[i], true);
    }
    size_t count = 0;
    fputs("],\n\"frames\":[\n", out);
    for (uint32_t i = 0; i < d->u.n; i++) {
        const char *file;
        uint32_t line;
        char buf[256];
        memprof__uframe_label(p, &d->u, i, buf, sizeof buf, &file, &line);
        put_index(out, d->name_of[i], &count);
        put_index(out, d->file_of[i], &count);
        put_u64(out, line, &count);
        put_u64(out, frame_kind(p, &d->u, i), &count);
    }
    count = 0;
    fputs("],\n\"nodes\":[\n", out);
    for (uint32_t i = 0; i < d->nnodes; i++) {
        put_index(out, d->parent[i], &count);
        put_index(out, d->frame[i], &count);
    }
    count = 0;
    fputs("],\n\"stacks\":[\n", out);
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        if (d->leaf[i] == UINT32_MAX)
            continue;
        double sd = sqrt(st->inuse_space_var);
        put_index(out, d->leaf[i], &count);
        put_u64(out, st->inuse_space, &count);
        put_u64(out, isfinite(sd) ? memprof__est_round(sd) : 0, &count);
        put_u64(out, st->inuse_objects, &count);
        put_u64(out, st->alloc_space, &count);
        put_u64(out, st->alloc_objects, &count);
        put_u64(out, st->live_samples, &count);
        put_u64(out, st->alloc_samples, &count);
    }
    fputs("]}\n", out);
}

int memprof__export_html(const struct memprof_profile *p, FILE *out)
{
    uint32_t longest = 0;
    for (size_t i = 0; i < p->nstacks; i++)
        longest = p->stacks[i].nframes > longest ? p->stacks[i].nframes : longest;
    uint32_t *path = malloc(((size_t)longest + 1) * sizeof *path);
    struct html_data d;
    int rc = path ? data_build(p, &d, path) : -ENOMEM;
    if (rc == 0) {
        put_lines(page_head, sizeof page_head / sizeof *page_head, out);
        fputs("<script type=\"application/json\" id=\"memprof-data\">", out);
        write_data(p, &d, out);
        fputs("</script>\n", out);
        put_lines(page_tail, sizeof page_tail / sizeof *page_tail, out);
        rc = ferror(out) ? -EIO : 0;
    }
    if (path)
        data_free(&d);
    free(path);
    return rc;
}
