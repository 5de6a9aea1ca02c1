/* SPDX-License-Identifier: MIT */
/*
 * The HTML writer: one self-contained page a person can open from disk or attach to a bug
 * report. It loads nothing from the network (inline CSS and plain JavaScript, system fonts),
 * so it works offline and leaks nothing when opened. The page shows the whole-heap estimate
 * with its interval, the peak and the profiler's health; the heap over time (an SVG chart of
 * live and allocated bytes with the peak marked); a view switcher (live, peak, allocated,
 * temporary, leaks; doc/guide.md, "Views") that re-renders, from data embedded for every
 * view, an icicle flame graph (root at the top; click to zoom, search with the matched share,
 * tooltips with bytes, percent and file:line) and a sortable table of sites by allocating
 * function, by stack or by thread, with intervals, a mark on estimates from few samples
 * (memprof__export_interval(), as in the text report), lifetimes and threads.
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

#include "common/estimate.h"
#include "export/export.h"
#include "export/json.h"
#include "memprof/memprof.h"

/* ---- The page ---------------------------------------------------------------------------
 * The HTML before and after the data, one literal per line so the page stays readable here
 * (one string each: an array of pointers to the lines would need a relocation per line when
 * the library is loaded, in every process the plugin starts).
 * The script reads the data layout documented at its top (frames, nodes, stacks). Nothing
 * in the page may reference a URL, not even a link: check_views.py rejects any. */

// clang-format off
static const char page_head[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<meta name=\"referrer\" content=\"no-referrer\">\n"
    "<title>libmemprof heap profile</title>\n"
    "<style>\n"
    ":root { --fg: #1d1f21; --muted: #5f6368; --bg: #fff; --line: #dadce0; --warn-bg: #fff4e5;\n"
    "  --warn: #8a4b00; --accent: #1a73e8; --match: #d633ff; }\n"
    "* { box-sizing: border-box; }\n"
    "body { margin: 0; padding: 16px 20px 40px;\n"
    "  font: 14px/1.45 system-ui, -apple-system, \"Segoe UI\", Roboto, \"Helvetica Neue\",\n"
    "  Arial, sans-serif; color: var(--fg); background: var(--bg); }\n"
    "h1 { font-size: 20px; margin: 0 0 6px; }\n"
    "h2 { font-size: 16px; margin: 24px 0 8px; }\n"
    ".muted { color: var(--muted); }\n"
    ".mono { font-family: ui-monospace, \"SF Mono\", Menlo, Consolas, \"DejaVu Sans Mono\",\n"
    "  monospace; font-size: 12px; }\n"
    "#summary p { margin: 2px 0; }\n"
    ".bad { color: #b3261e; font-weight: 600; }\n"
    ".warn { background: var(--warn-bg); color: var(--warn); border: 1px solid #f5c27a;\n"
    "  border-radius: 6px; padding: 6px 10px; margin: 8px 0; }\n"
    ".controls { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center;\n"
    "  margin: 12px 0 8px; }\n"
    ".controls label { cursor: pointer; }\n"
    "button { font: inherit; padding: 3px 10px; border: 1px solid var(--line);\n"
    "  border-radius: 4px; background: #f8f9fa; cursor: pointer; }\n"
    "button:hover { background: #eef1f4; }\n"
    "button:disabled { cursor: default; opacity: 0.5; }\n"
    "input[type=search] { font: inherit; padding: 3px 8px; width: 18em;\n"
    "  border: 1px solid var(--line); border-radius: 4px; }\n"
    "#matched { min-width: 14em; }\n"
    "#crumbs { margin: 4px 0; min-height: 1.4em; font-size: 13px; }\n"
    "#flame-box { position: relative; border: 1px solid var(--line); border-radius: 4px;\n"
    "  overflow: hidden; }\n"
    "#flame { display: block; width: 100%; cursor: pointer; }\n"
    "#flame-empty { padding: 24px; text-align: center; }\n"
    "#tip { position: fixed; z-index: 10; pointer-events: none; display: none; max-width: 560px;\n"
    "  background: #202124; color: #fff; border-radius: 6px; padding: 8px 10px; font-size: 12px;\n"
    "  line-height: 1.4; box-shadow: 0 2px 8px rgba(0,0,0,.3); word-break: break-all; }\n"
    "#tip b { font-size: 13px; }\n"
    "#tip .t-loc { color: #bdc1c6; }\n"
    "table { border-collapse: collapse; width: 100%; font-size: 13px; }\n"
    "th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: right;\n"
    "  vertical-align: top; white-space: nowrap; }\n"
    "th { position: sticky; top: 0; background: #f1f3f4; cursor: pointer; user-select: none; }\n"
    "th.sorted-asc::after { content: \" \\25b2\"; }\n"
    "th.sorted-desc::after { content: \" \\25bc\"; }\n"
    "td.fn, th.fn, td.loc, th.loc { text-align: left; }\n"
    "td.fn { white-space: normal; word-break: break-all; min-width: 16em; }\n"
    "td.loc { color: var(--muted); }\n"
    "td.thr, th.thr { text-align: left; white-space: normal; min-width: 8em; }\n"
    "td.thr { color: var(--muted); }\n"
    "tbody tr { cursor: pointer; }\n"
    "tbody tr:hover { background: #f1f8ff; }\n"
    ".path { color: var(--muted); font-size: 12px; }\n"
    "#table-box { overflow-x: auto; }\n"
    "footer { margin-top: 24px; font-size: 12px; }\n"
    ".views { display: inline-flex; flex-wrap: wrap; gap: 0; border: 1px solid var(--line);\n"
    "  border-radius: 6px; overflow: hidden; }\n"
    ".views label { padding: 4px 12px; border-left: 1px solid var(--line);\n"
    "  background: #f8f9fa; }\n"
    ".views label:first-child { border-left: 0; }\n"
    ".views label.on { background: var(--accent); color: #fff; }\n"
    ".views label.none { color: var(--muted); }\n"
    ".views label.on.none { color: #fff; }\n"
    ".views input { position: absolute; opacity: 0; width: 1px; height: 1px; }\n"
    ".views label:focus-within { outline: 2px solid var(--accent); outline-offset: -2px; }\n"
    ".views .total { font-size: 12px; opacity: 0.8; }\n"
    "#view-note { margin: 4px 0 0; }\n"
    "#chart-box { position: relative; border: 1px solid var(--line); border-radius: 4px; }\n"
    "#chart { display: block; width: 100%; height: 240px; font-size: 11px; }\n"
    "#chart .axis { stroke: #9aa0a6; stroke-width: 1; }\n"
    "#chart .grid { stroke: #eceff1; stroke-width: 1; }\n"
    "#chart .live { fill: none; stroke: var(--accent); stroke-width: 1.8; }\n"
    "#chart .alloc { fill: none; stroke: #e8710a; stroke-width: 1.5; stroke-dasharray: 5 3; }\n"
    "#chart .peak-line { stroke: #b3261e; stroke-width: 1; stroke-dasharray: 3 3; }\n"
    "#chart .peak-dot { fill: #b3261e; }\n"
    "#chart .peak-label { fill: #b3261e; font-weight: 600; font-size: 12px; }\n"
    "#chart .cursor { stroke: #5f6368; stroke-width: 1; }\n"
    "#chart text { fill: var(--muted); }\n"
    "#chart-empty { padding: 24px; text-align: center; }\n"
    ".legend { font-size: 12px; margin: 4px 0; display: flex; flex-wrap: wrap; gap: 4px 18px; }\n"
    ".key { display: inline-block; width: 22px; height: 0; vertical-align: middle;\n"
    "  border-top: 2px solid var(--accent); margin-right: 4px; }\n"
    ".key.alloc { border-top: 2px dashed #e8710a; }\n"
    ".key.peak { width: 8px; height: 8px; border: 0; border-radius: 50%; background: #b3261e; }\n"
    "td.low, span.low { color: var(--warn); }\n"
    "tr.low td.fn span.mono::after { content: \" (few samples)\"; color: var(--warn);\n"
    "  font-family: system-ui, sans-serif; font-size: 11px; }\n"
    "</style>\n"
    "</head>\n"
    "<body>\n"
    "<noscript><p class=\"warn\">This report draws its charts, flame graph and table with\n"
    "JavaScript, which is turned off. The profile data is embedded in this file as JSON.</p>\n"
    "</noscript>\n"
    "<h1 id=\"title\">Heap profile</h1>\n"
    "<div id=\"summary\"></div>\n"
    "<h2>Heap over time</h2>\n"
    "<div id=\"chart-box\"><svg id=\"chart\" role=\"img\" aria-label=\"Heap over time\"></svg>\n"
    "  <div id=\"chart-empty\" class=\"muted\" hidden>This profile has no heap-over-time\n"
    "  series.</div>\n"
    "</div>\n"
    "<div class=\"legend\"><span><span class=\"key\"></span>live bytes (left axis)</span>\n"
    "  <span><span class=\"key alloc\"></span>bytes allocated so far (right axis)</span>\n"
    "  <span><span class=\"key peak\"></span>the recorded peak</span>\n"
    "  <span id=\"chart-read\" class=\"muted\"></span></div>\n"
    "<h2>View</h2>\n"
    "<div class=\"controls\">\n"
    "  <span class=\"views\" role=\"radiogroup\" aria-label=\"View\" id=\"views\">\n"
    "    <label><input type=\"radio\" name=\"view\" value=\"live\"> Live</label>\n"
    "    <label><input type=\"radio\" name=\"view\" value=\"peak\"> Peak</label>\n"
    "    <label><input type=\"radio\" name=\"view\" value=\"alloc\"> Allocated</label>\n"
    "    <label><input type=\"radio\" name=\"view\" value=\"temporary\"> Temporary</label>\n"
    "    <label><input type=\"radio\" name=\"view\" value=\"leaks\"> Leaks</label>\n"
    "  </span>\n"
    "  <span><input type=\"search\" id=\"search\" placeholder=\"Search functions and files\"\n"
    "    aria-label=\"Search\"> <span id=\"matched\" class=\"muted\"></span></span>\n"
    "  <span><button id=\"zoom-out\" type=\"button\">Zoom out</button>\n"
    "    <button id=\"reset\" type=\"button\">Reset zoom</button></span>\n"
    "</div>\n"
    "<p id=\"view-note\"></p>\n"
    "<div id=\"crumbs\" class=\"muted\"></div>\n"
    "<div id=\"flame-box\"><canvas id=\"flame\" aria-label=\"Flame graph\"></canvas>\n"
    "  <div id=\"flame-empty\" class=\"muted\" hidden>No samples in this view.</div></div>\n"
    "<div id=\"tip\"></div>\n"
    "<p class=\"muted\" style=\"font-size:12px\">Callers above callees (root at the top);\n"
    "widths are proportional to the view's estimated bytes. Click a frame to zoom into it,\n"
    "press Escape or &ldquo;Reset zoom&rdquo; to zoom out.</p>\n"
    "<h2>Allocation sites</h2>\n"
    "<div class=\"controls\">\n"
    "  <label>Group by <select id=\"group\">\n"
    "    <option value=\"leaf\">allocating function</option>\n"
    "    <option value=\"stack\">call stack</option>\n"
    "    <option value=\"thread\">thread</option></select></label>\n"
    "  <span id=\"table-note\" class=\"muted\"></span>\n"
    "  <button id=\"show-all\" type=\"button\" hidden>Show all</button>\n"
    "</div>\n"
    "<div id=\"table-box\"><table id=\"sites\"><thead><tr></tr></thead><tbody></tbody></table>\n"
    "</div>\n"
    "<footer class=\"muted\">Estimates are unbiased: each sampled allocation of s bytes\n"
    "stands for s / (1 - exp(-s / rate)) bytes. Intervals are 95 % intervals (live and\n"
    "peak); an estimate marked &ldquo;~&rdquo; or &ldquo;few samples&rdquo; rests on little\n"
    "information: treat it as rough. &ldquo;Freed after&rdquo; gives the lifetimes of a\n"
    "site's freed samples (median and 90th percentile, as the upper edge of a factor-4\n"
    "bucket). The views and the statistics of peaks and leaks are described in the guide\n"
    "(&ldquo;Views&rdquo;) and in doc/statistics.md.</footer>\n";

static const char page_tail[] =
    "<script>\n"
    "(function () {\n"
    "  'use strict';\n"
    "  var D = JSON.parse(document.getElementById('memprof-data').textContent);\n"
    "  var S = D.strings, F = D.frames, N = D.nodes, T = D.stacks;\n"
    "  /* Flat arrays. frames: [name, file, line, kind] (name and file index strings, file -1\n"
    "     when unknown; kind 0 native, 1 interpreter, 2 no symbol, 3 synthetic, +4 inlined).\n"
    "     nodes: [parent, frame], the call tree of all stacks with root-first paths, parents\n"
    "     before children (-1 at the roots). stacks: NS values each, at the offsets in C below:\n"
    "     the leaf node, then per view its bytes, interval (lo, hi) and standard deviation where\n"
    "     the view has a variance, objects and samples; the leak rate (bytes per second), the\n"
    "     thread (0 unknown, else index into threads + 1) and the low-information bits (bit v\n"
    "     for view v: the estimate rests on few samples), the frame that names the site (the\n"
    "     innermost that is the user's: the leaf unless the page shows every native frame).\n"
    "     life: [stack, 16 lifetime bucket\n"
    "     counts] for the stacks that freed samples. threads: [tid, name string or -1].\n"
    "     series: [t_ns, live, alloc], the heap over time. */\n"
    "  var NF = 4, NS = 25, NB = 16;\n"
    "  var C = { node: 0, live: 1, liveLo: 2, liveHi: 3, liveSd: 4, liveObj: 5, liveSamp: 6,\n"
    "    alloc: 7, allocObj: 8, allocSamp: 9, peak: 10, peakLo: 11, peakHi: 12, peakSd: 13,\n"
    "    peakObj: 14, peakSamp: 15, temp: 16, tempObj: 17, tempSamp: 18, leak: 19,\n"
    "    leakRate: 20, leakSamp: 21, thread: 22, low: 23, site: 24 };\n"
    "  var nframes = F.length / NF, nnodes = N.length / 2, nstacks = T.length / NS;\n"
    "  var $ = function (id) { return document.getElementById(id); };\n"
    "\n"
    "  /* The views (doc/guide.md, \"Views\"): which columns hold their numbers. */\n"
    "  var VIEWS = {\n"
    "    live: { bytes: C.live, lo: C.liveLo, hi: C.liveHi, sd: C.liveSd, obj: C.liveObj,\n"
    "      samp: C.liveSamp, bit: 1, title: 'Live bytes', objTitle: 'Live objects',\n"
    "      word: 'live' },\n"
    "    alloc: { bytes: C.alloc, lo: -1, obj: C.allocObj, samp: C.allocSamp, bit: 2,\n"
    "      title: 'Allocated bytes', objTitle: 'Allocations', word: 'allocated' },\n"
    "    peak: { bytes: C.peak, lo: C.peakLo, hi: C.peakHi, sd: C.peakSd, obj: C.peakObj,\n"
    "      samp: C.peakSamp, bit: 4, title: 'Bytes at the peak', objTitle: 'Objects',\n"
    "      word: 'peak' },\n"
    "    temporary: { bytes: C.temp, lo: -1, obj: C.tempObj, samp: C.tempSamp, bit: 8,\n"
    "      title: 'Temporary bytes', objTitle: 'Allocations', word: 'temporary' },\n"
    "    leaks: { bytes: C.leak, lo: -1, obj: -1, samp: C.leakSamp, bit: 16,\n"
    "      title: 'Leaked bytes', word: 'leaked' }\n"
    "  };\n"
    "  var VIEW_NAMES = ['live', 'peak', 'alloc', 'temporary', 'leaks'];\n"
    "\n"
    "  /* ---- formatting ---- */\n"
    "  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];\n"
    "  function bytes(b) {\n"
    "    var u = 0;\n"
    "    while (b >= 1024 && u < UNITS.length - 1) { b /= 1024; u++; }\n"
    "    if (!u) return Math.round(b) + ' B';\n"
    "    return b.toFixed(b < 10 ? 2 : 1).replace(/\\.0+$/, '') + ' ' + UNITS[u];\n"
    "  }\n"
    "  function num(n) { return Math.round(n).toLocaleString('en-US'); }\n"
    "  function pct(a, b) {\n"
    "    if (!(b > 0)) return '0 %';\n"
    "    var p = 100 * a / b;\n"
    "    return (p >= 10 || p === 0 ? p.toFixed(1) : p.toPrecision(2)) + ' %';\n"
    "  }\n"
    "  /* A duration in nanoseconds, as the text writer prints it. */\n"
    "  function dur(ns) {\n"
    "    if (ns < 1e3) return Math.round(ns) + ' ns';\n"
    "    if (ns < 1e6) return +(ns / 1e3).toPrecision(3) + ' us';\n"
    "    if (ns < 1e9) return +(ns / 1e6).toPrecision(3) + ' ms';\n"
    "    if (ns < 1e12) return (ns / 1e9).toFixed(ns < 1e10 ? 2 : ns < 1e11 ? 1 : 0) + ' s';\n"
    "    return (ns / 3.6e12).toFixed(1) + ' h';\n"
    "  }\n"
    "  function el(tag, text, cls) {\n"
    "    var e = document.createElement(tag);\n"
    "    if (text !== undefined) e.textContent = text;\n"
    "    if (cls) e.className = cls;\n"
    "    return e;\n"
    "  }\n"
    "  function fname(f) { return S[F[f * NF]]; }\n"
    "  function floc(f) {\n"
    "    var fi = F[f * NF + 1], ln = F[f * NF + 2];\n"
    "    return fi < 0 ? '' : S[fi] + (ln ? ':' + ln : '');\n"
    "  }\n"
    "  function kindText(k) {\n"
    "    return ['', 'interpreter frame', 'no symbol', ''][k & 3] + (k & 4 ? ' (inlined)' : '');\n"
    "  }\n"
    "  function threadName(t) {\n"
    "    if (!(t > 0) || t > D.threads.length / 2) return '';\n"
    "    var tid = D.threads[2 * (t - 1)], nm = D.threads[2 * (t - 1) + 1];\n"
    "    return nm >= 0 ? S[nm] + ' (tid ' + tid + ')' : 'tid ' + tid;\n"
    "  }\n"
    "\n"
    "  /* The 95 % interval of src/export/interval.c for rows that merge several stacks (a\n"
    "     single stack's comes from the writer): the estimate splits into a certain part k and\n"
    "     c times a Poisson count of mean m = var / c^2 (c = max(var / est, rate)), whose\n"
    "     Garwood interval is [Gamma^-1(m; 0.025), Gamma^-1(m + 1; 0.975)]; low information is\n"
    "     an effective sample count est^2 / var under 10. Nothing sampled: [0, ln(40) rate]. */\n"
    "  function lgam(a) {\n"
    "    var c = [76.18009172947146, -86.50532032941677, 24.01409824083091,\n"
    "             -1.231739572450155, 0.1208650973866179e-2, -0.5395239384953e-5];\n"
    "    var x = a, y = a, t = a + 5.5, ser = 1.000000000190015;\n"
    "    t -= (x + 0.5) * Math.log(t);\n"
    "    for (var j = 0; j < 6; j++) ser += c[j] / ++y;\n"
    "    return -t + Math.log(2.5066282746310005 * ser / x);\n"
    "  }\n"
    "  function gammaP(a, x) {\n"
    "    if (!(x > 0)) return 0;\n"
    "    var front = Math.exp(a * Math.log(x) - x - lgam(a)), k;\n"
    "    if (x < a + 1) {\n"
    "      var ak = a, term = 1 / a, sum = term;\n"
    "      for (k = 0; k < 100000 && term >= sum * 1e-15; k++) { ak += 1; term *= x / ak; sum += term; }\n"
    "      return Math.min(1, sum * front);\n"
    "    }\n"
    "    var b = x + 1 - a, cc = 1e300, d = 1 / b, h = d;\n"
    "    for (k = 1; k < 100000; k++) {\n"
    "      var an = -k * (k - a);\n"
    "      b += 2; d = an * d + b; if (Math.abs(d) < 1e-300) d = 1e-300;\n"
    "      cc = b + an / cc; if (Math.abs(cc) < 1e-300) cc = 1e-300;\n"
    "      d = 1 / d; var del = d * cc; h *= del;\n"
    "      if (Math.abs(del - 1) < 1e-15) break;\n"
    "    }\n"
    "    return Math.max(0, 1 - front * h);\n"
    "  }\n"
    "  function gammaQuantile(a, p) {\n"
    "    if (!(a > 0)) return 0;\n"
    "    var lo = -745, hi = Math.log(a + 50 * Math.sqrt(a) + 50);\n"
    "    for (var i = 0; i < 200 && hi - lo > 1e-12 * (1 + Math.abs(hi)); i++) {\n"
    "      var mid = (lo + hi) / 2;\n"
    "      if (gammaP(a, Math.exp(mid)) < p) lo = mid; else hi = mid;\n"
    "    }\n"
    "    return Math.exp((lo + hi) / 2);\n"
    "  }\n"
    "  function interval(est, v, samp, rate) {\n"
    "    if (!(est > 0) || !samp) return { lo: 0, hi: Math.round(3.6888794541139363 * rate), low: true };\n"
    "    if (!(v > 0)) v = 0;\n"
    "    var c = Math.max(v / est, rate);\n"
    "    if (!(c > 0)) return { lo: Math.round(est), hi: Math.round(est), low: false };\n"
    "    var m = v / (c * c), k = Math.max(0, est - v / c);\n"
    "    return { lo: Math.round(k + c * gammaQuantile(m, 0.025)),\n"
    "             hi: Math.round(k + c * gammaQuantile(m + 1, 0.975)),\n"
    "             low: v > 0 && est * est / v < 10 };\n"
    "  }\n"
    "\n"
    "  /* When the peak was; merged profiles' peaks were moments of different processes. */\n"
    "  function peakWhen(pk) {\n"
    "    return pk.merged > 1 ? '(the sum of ' + pk.merged + ' profiles\\u2019 peaks)' :\n"
    "      'at ' + dur(pk.t_ns);\n"
    "  }\n"
    "  /* Lifetime buckets (profile.h): bucket 0 under 1 us, bucket b below 4^b us, the last\n"
    "     one the rest. A quantile is the upper edge of the bucket it falls in, as in C. */\n"
    "  function bucketEnd(b) { return b >= NB - 1 ? Infinity : 1000 * Math.pow(4, b); }\n"
    "  function quantile(h, q) {\n"
    "    var total = 0, seen = 0, b;\n"
    "    for (b = 0; b < NB; b++) total += h[b];\n"
    "    if (!total) return 0;\n"
    "    for (b = 0; b < NB; b++) {\n"
    "      seen += h[b];\n"
    "      if (seen >= q * total && h[b]) return bucketEnd(b);\n"
    "    }\n"
    "    return Infinity;\n"
    "  }\n"
    "  function lifeText(edge) {\n"
    "    if (!edge) return '';\n"
    "    return edge === Infinity ? '\\u2265 ' + dur(bucketEnd(NB - 2)) : '< ' + dur(edge);\n"
    "  }\n"
    "  var lifeOf = new Map();\n"
    "  for (var li = 0; li < D.life.length; li += NB + 1)\n"
    "    lifeOf.set(D.life[li], D.life.slice(li + 1, li + 1 + NB));\n"
    "\n"
    "  /* Root-first frame paths of the stacks. */\n"
    "  var paths = new Array(nstacks);\n"
    "  for (var s = 0; s < nstacks; s++) {\n"
    "    var p = [];\n"
    "    for (var n = T[s * NS]; n >= 0; n = N[n * 2]) p.push(N[n * 2 + 1]);\n"
    "    paths[s] = p.reverse();\n"
    "  }\n"
    "  var totals = {};\n"
    "  VIEW_NAMES.forEach(function (v) {\n"
    "    var t = 0;\n"
    "    for (var s = 0; s < nstacks; s++) t += T[s * NS + VIEWS[v].bytes];\n"
    "    totals[v] = t;\n"
    "  });\n"
    "\n"
    "  /* ---- header ---- */\n"
    "  (function () {\n"
    "    var h = D.heap, pk = D.peak, ti = D.time ? new Date(D.time * 1000).toISOString()\n"
    "      .replace('T', ' ').replace(/\\.\\d+Z$/, ' UTC') : '';\n"
    "    document.title = 'Heap profile' + (ti ? ' ' + ti : '') + ' \\u2013 libmemprof';\n"
    "    $('title').textContent = 'Heap profile' + (ti ? ' \\u2013 ' + ti : '');\n"
    "    var sum = $('summary'), allocTotal = totals.alloc, hasPeak = pk.bytes > 0 ||\n"
    "      pk.samples > 0;\n"
    "    var peakText = bytes(pk.bytes) + ' (95 % interval ' + bytes(pk.lo) + ' \\u2013 ' +\n"
    "      bytes(pk.hi) + (pk.low ? ', few samples' : '') + ') ' + peakWhen(pk);\n"
    "    var p1 = el('p');\n"
    "    p1.appendChild(el('span', 'Estimated live heap: '));\n"
    "    if (h.bytes === 0 && allocTotal > 0) {\n"
    "      /* A bare \"0 B\" would read as \"nothing happened\": say what did. */\n"
    "      p1.appendChild(el('b', '0 B live'));\n"
    "      p1.appendChild(el('span', ' at the snapshot; ' + (hasPeak ? 'peak ' + peakText :\n"
    "        'no peak recorded') + '; allocated in total: ' + bytes(allocTotal) + '.'));\n"
    "    } else {\n"
    "      p1.appendChild(el('b', bytes(h.bytes)));\n"
    "      p1.appendChild(el('span', ' (95 % interval ' + bytes(h.lo) + ' \\u2013 ' +\n"
    "        bytes(h.hi) + '), ~' + num(h.objects) + ' live allocations, from ' +\n"
    "        num(h.samples) + ' live samples.'));\n"
    "    }\n"
    "    sum.appendChild(p1);\n"
    "    if (h.bytes !== 0 || !(allocTotal > 0)) {\n"
    "      var p3 = el('p');\n"
    "      if (hasPeak) {\n"
    "        p3.appendChild(el('span', 'Peak: '));\n"
    "        p3.appendChild(el('b', bytes(pk.bytes)));\n"
    "        p3.appendChild(el('span', peakText.slice(bytes(pk.bytes).length) +\n"
    "          '; live at the snapshot' +\n"
    "          (D.duration_ns ? ' (' + dur(D.duration_ns) + ')' : '') +\n"
    "          ': ' + bytes(h.bytes) + '; allocated in total: ' + bytes(allocTotal) + '.'));\n"
    "      } else {\n"
    "        p3.textContent = 'Peak: not recorded in this profile. Allocated in total: ' +\n"
    "          bytes(allocTotal) + '.';\n"
    "      }\n"
    "      sum.appendChild(p3);\n"
    "    }\n"
    "    sum.appendChild(el('p', 'Sampling rate: one sample per ' + bytes(D.rate) +\n"
    "      ' allocated on average (' + num(D.rate) + ' bytes) \\u00b7 ' + num(nstacks) +\n"
    "      ' call stacks' + (D.threads.length ? ' \\u00b7 ' + num(D.threads.length / 2) +\n"
    "      ' threads' : '') + ' \\u00b7 libmemprof ' + D.version, 'muted'));\n"
    "    var hl = D.health, p2 = el('p');\n"
    "    p2.appendChild(el('span', 'Health: '));\n"
    "    function item(v, text, sep) {\n"
    "      p2.appendChild(el('span', num(v), v ? 'bad' : ''));\n"
    "      p2.appendChild(el('span', text + (sep ? ', ' : '')));\n"
    "    }\n"
    "    item(hl.dropped, ' samples dropped (heap map full)', 1);\n"
    "    item(hl.overflows, ' stack-table overflows', 1);\n"
    "    item(hl.truncated, ' truncated stacks', 1);\n"
    "    if (hl.raw) {\n"
    "      /* Written with MEMPROF_SYMBOLIZE=0: nothing was looked up, so nothing failed. */\n"
    "      p2.appendChild(el('span', 'the profile is unsymbolized (written with ' +\n"
    "        'MEMPROF_SYMBOLIZE=0): memprof report --symbolize names its frames', 'bad'));\n"
    "    } else {\n"
    "      item(hl.unresolved, ' of ' + num(hl.addresses) + ' code addresses without symbols',\n"
    "        0);\n"
    "    }\n"
    "    sum.appendChild(p2);\n"
    "    if (hl.unnamed.length)\n"
    "      sum.appendChild(el('p', 'The frames without a name are in ' +\n"
    "        hl.unnamed.join(', ') + (hl.unnamed_more ? ' and others' : '') +\n"
    "        ' (no symbols or debug information found). Install their debug files (Debian: ' +\n"
    "        'the -dbgsym packages) and profile again, or name a pprof file later: memprof ' +\n"
    "        'report --symbolize --debug-dir DIR FILE.', 'warn'));\n"
    "    if (h.low && h.samples > 0)\n"
    "      sum.appendChild(el('p', 'Only ' + num(h.samples) + ' live samples: treat the ' +\n"
    "        'estimates as rough. A lower sampling rate gives more precision.', 'warn'));\n"
    "  })();\n"
    "\n"
    "  /* ---- heap over time ----\n"
    "     An SVG chart of the series: live bytes on the left axis, bytes allocated so far on the\n"
    "     right one (they differ by orders of magnitude), seconds since sampling started below,\n"
    "     and the recorded peak marked and labelled. Drawn again when the window resizes. */\n"
    "  var svg = $('chart'), SVGNS = svg.namespaceURI, P = D.series, np = P.length / 3;\n"
    "  function sv(tag, attrs, text) {\n"
    "    var e = document.createElementNS(SVGNS, tag);\n"
    "    for (var k in attrs) e.setAttribute(k, attrs[k]);\n"
    "    if (text !== undefined) e.textContent = text;\n"
    "    svg.appendChild(e);\n"
    "    return e;\n"
    "  }\n"
    "  /* Tick step for a range: 1, 2 or 5 times a power of ten of `unit`. */\n"
    "  function step(max, unit, n) {\n"
    "    var raw = max / unit / n, p = Math.pow(10, Math.floor(Math.log10(raw)));\n"
    "    var m = raw / p;\n"
    "    return unit * p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10);\n"
    "  }\n"
    "  function byteStep(max, n) {\n"
    "    var unit = 1;\n"
    "    while (max / unit >= 1024 && unit < Math.pow(1024, 6)) unit *= 1024;\n"
    "    return step(max, unit, n);\n"
    "  }\n"
    "  function drawChart() {\n"
    "    var pk = D.peak, hasPeak = pk.bytes > 0 || pk.samples > 0;\n"
    "    svg.textContent = '';\n"
    "    $('chart-empty').hidden = np > 0;\n"
    "    svg.style.display = np > 0 ? '' : 'none';\n"
    "    if (!np) return;\n"
    "    var W = svg.clientWidth || 800, H = svg.clientHeight || 240;\n"
    "    var L = 72, R = 72, TOP = 22, B = 30, w = Math.max(10, W - L - R), h = H - TOP - B;\n"
    "    var tmax = Math.max(P[3 * (np - 1)], hasPeak ? pk.t_ns : 0, D.duration_ns) || 1;\n"
    "    var lmax = hasPeak ? pk.bytes : 0, amax = 0, i;\n"
    "    for (i = 0; i < np; i++) {\n"
    "      lmax = Math.max(lmax, P[3 * i + 1]);\n"
    "      amax = Math.max(amax, P[3 * i + 2]);\n"
    "    }\n"
    "    lmax = lmax * 1.12 || 1;\n"
    "    amax = amax * 1.05 || 1;\n"
    "    function X(t) { return L + w * t / tmax; }\n"
    "    function YL(v) { return TOP + h - h * v / lmax; }\n"
    "    function YA(v) { return TOP + h - h * v / amax; }\n"
    "    var st = step(tmax, 1e9, 8), t, v;\n"
    "    for (t = 0; t <= tmax + 1; t += st) {\n"
    "      sv('line', { x1: X(t), x2: X(t), y1: TOP, y2: TOP + h, 'class': 'grid' });\n"
    "      sv('text', { x: X(t), y: TOP + h + 14, 'text-anchor': 'middle' },\n"
    "        +(t / 1e9).toPrecision(4) + ' s');\n"
    "    }\n"
    "    var sl = byteStep(lmax, 5);\n"
    "    for (v = 0; v <= lmax; v += sl) {\n"
    "      sv('line', { x1: L, x2: L + w, y1: YL(v), y2: YL(v), 'class': 'grid' });\n"
    "      sv('text', { x: L - 6, y: YL(v) + 4, 'text-anchor': 'end' }, bytes(v));\n"
    "    }\n"
    "    var sa = byteStep(amax, 5);\n"
    "    for (v = 0; v <= amax; v += sa)\n"
    "      sv('text', { x: L + w + 6, y: YA(v) + 4, 'text-anchor': 'start' }, bytes(v));\n"
    "    sv('line', { x1: L, x2: L, y1: TOP, y2: TOP + h, 'class': 'axis' });\n"
    "    sv('line', { x1: L + w, x2: L + w, y1: TOP, y2: TOP + h, 'class': 'axis' });\n"
    "    sv('line', { x1: L, x2: L + w, y1: TOP + h, y2: TOP + h, 'class': 'axis' });\n"
    "    sv('text', { x: L + w / 2, y: H - 2, 'text-anchor': 'middle' },\n"
    "      'seconds since sampling started');\n"
    "    var dl = '', da = '';\n"
    "    for (i = 0; i < np; i++) {\n"
    "      dl += (i ? 'L' : 'M') + X(P[3 * i]).toFixed(1) + ',' + YL(P[3 * i + 1]).toFixed(1);\n"
    "      da += (i ? 'L' : 'M') + X(P[3 * i]).toFixed(1) + ',' + YA(P[3 * i + 2]).toFixed(1);\n"
    "    }\n"
    "    sv('path', { d: da, 'class': 'alloc', id: 'chart-alloc' });\n"
    "    sv('path', { d: dl, 'class': 'live', id: 'chart-live' });\n"
    "    if (hasPeak) {\n"
    "      var px = X(pk.t_ns), py = YL(pk.bytes);\n"
    "      sv('line', { x1: px, x2: px, y1: py, y2: TOP + h, 'class': 'peak-line' });\n"
    "      sv('circle', { cx: px, cy: py, r: 4, 'class': 'peak-dot' });\n"
    "      var right = px > L + w * 0.7;\n"
    "      sv('text', { x: right ? px - 8 : px + 8, y: Math.max(TOP - 6, py - 8) + 4,\n"
    "        'text-anchor': right ? 'end' : 'start', 'class': 'peak-label', id: 'chart-peak' },\n"
    "        'peak ' + bytes(pk.bytes) + ' at ' + dur(pk.t_ns));\n"
    "    }\n"
    "    var cursor = sv('line', { x1: -10, x2: -10, y1: TOP, y2: TOP + h, 'class': 'cursor' });\n"
    "    svg.onmousemove = function (ev) {\n"
    "      var b = svg.getBoundingClientRect(), t = (ev.clientX - b.left - L) / w * tmax;\n"
    "      var best = 0;\n"
    "      for (var i = 1; i < np; i++)\n"
    "        if (Math.abs(P[3 * i] - t) < Math.abs(P[3 * best] - t)) best = i;\n"
    "      cursor.setAttribute('x1', X(P[3 * best]));\n"
    "      cursor.setAttribute('x2', X(P[3 * best]));\n"
    "      $('chart-read').textContent = 'at ' + dur(P[3 * best]) + ': ' +\n"
    "        bytes(P[3 * best + 1]) + ' live, ' + bytes(P[3 * best + 2]) + ' allocated so far';\n"
    "    };\n"
    "  }\n"
    "  drawChart();\n"
    "\n"
    "  /* ---- flame graph model ----\n"
    "     Flame nodes merge call-tree nodes by function name under the same flame parent, as\n"
    "     other flame-graph tools do (index 0 is the root, \"all\"). The merge is done once, the\n"
    "     values per view; both loops rely on parents coming before their children. */\n"
    "  var fParent = [-1], fName = [-1], fKind = [3], fDepth = [0], fKids = [[]];\n"
    "  var flameOf = new Int32Array(nnodes), childOf = new Map();\n"
    "  for (var i = 0; i < nnodes; i++) {\n"
    "    var tp = N[2 * i], fr = N[2 * i + 1], fp = tp < 0 ? 0 : flameOf[tp];\n"
    "    var key = fp * S.length + F[fr * NF], fn = childOf.get(key);\n"
    "    if (fn === undefined) {\n"
    "      fn = fParent.length;\n"
    "      childOf.set(key, fn);\n"
    "      fParent.push(fp); fName.push(F[fr * NF]); fKind.push(F[fr * NF + 3]);\n"
    "      fDepth.push(fDepth[fp] + 1); fKids.push([]); fKids[fp].push(fn);\n"
    "    }\n"
    "    flameOf[i] = fn;\n"
    "  }\n"
    "  var nflame = fParent.length, views = {};\n"
    "\n"
    "  /* Per view: bytes through each call-tree node (tv) and flame node (val), bytes\n"
    "     allocated in the frame itself (self), and each flame node's left edge (x). */\n"
    "  function viewData(v) {\n"
    "    if (views[v]) return views[v];\n"
    "    var col = VIEWS[v].bytes;\n"
    "    var tv = new Float64Array(nnodes), val = new Float64Array(nflame);\n"
    "    var self = new Float64Array(nflame), x = new Float64Array(nflame), total = 0;\n"
    "    for (var s = 0; s < nstacks; s++) {\n"
    "      var w = T[s * NS + col], n = T[s * NS];\n"
    "      if (!(w > 0) || n < 0) continue;\n"
    "      total += w; tv[n] += w; self[flameOf[n]] += w;\n"
    "    }\n"
    "    for (var i = nnodes - 1; i >= 0; i--) {\n"
    "      if (N[2 * i] >= 0) tv[N[2 * i]] += tv[i];\n"
    "      val[flameOf[i]] += tv[i];\n"
    "    }\n"
    "    val[0] = total;\n"
    "    /* Largest callee first; the layout is per view, so the order follows the view. */\n"
    "    var order = fKids.map(function (k) {\n"
    "      return k.slice().sort(function (a, b) { return val[b] - val[a]; });\n"
    "    });\n"
    "    (function layout(f, x0) {\n"
    "      var k = order[f];\n"
    "      x[f] = x0;\n"
    "      for (var j = 0; j < k.length && val[k[j]] > 0; j++) {\n"
    "        layout(k[j], x0);\n"
    "        x0 += val[k[j]];\n"
    "      }\n"
    "    })(0, 0);\n"
    "    return (views[v] = { tv: tv, val: val, self: self, x: x, total: total, kids: order });\n"
    "  }\n"
    "\n"
    "  /* ---- state ---- */\n"
    "  var view = VIEWS[D.view] ? D.view : 'live', VI = VIEWS[view], V = viewData(view);\n"
    "  var focus = 0, term = '', rects = [];\n"
    "  var fMatch = new Uint8Array(nflame), frameMatch = new Uint8Array(nframes);\n"
    "  var stackMatch = new Uint8Array(nstacks);\n"
    "  var canvas = $('flame'), ctx = canvas.getContext('2d'), tip = $('tip');\n"
    "  var ROW = 18, MINW = 0.5, MATCH = '#d633ff', lower = null;\n"
    "\n"
    "  function nodeName(f) { return f ? S[fName[f]] : 'all'; }\n"
    "  function hash(str) {\n"
    "    var h = 2166136261;\n"
    "    for (var i = 0; i < str.length; i++) h = Math.imul(h ^ str.charCodeAt(i), 16777619);\n"
    "    return h >>> 0;\n"
    "  }\n"
    "  function color(f) {\n"
    "    if (!f) return '#c8ccd1';\n"
    "    if (term && fMatch[f]) return MATCH;\n"
    "    var k = fKind[f] & 3, h = hash(S[fName[f]]);\n"
    "    if (k === 3 || k === 2) return 'hsl(0,0%,' + (72 + h % 12) + '%)';\n"
    "    if (k === 1) return 'hsl(' + (175 + h % 40) + ',55%,' + (62 + h % 14) + '%)';\n"
    "    return 'hsl(' + (h % 50) + ',' + (70 + h % 25) + '%,' + (58 + (h >> 8) % 14) + '%)';\n"
    "  }\n"
    "\n"
    "  function draw() {\n"
    "    var W = canvas.clientWidth || 800, dpr = window.devicePixelRatio || 1;\n"
    "    var val = V.val, X = V.x, fx = X[focus], fw = val[focus], scale = fw > 0 ? W / fw : 0;\n"
    "    var empty = !(V.total > 0), maxDepth = 0;\n"
    "    $('flame-empty').hidden = !empty;\n"
    "    canvas.hidden = empty;\n"
    "    rects = [];\n"
    "    /* Ancestors of the focus span the full width; nodes narrower than MINW pixels (and so\n"
    "       their callees) are left out. */\n"
    "    (function walk(f) {\n"
    "      var x0 = (X[f] - fx) * scale, w = val[f] * scale;\n"
    "      if (x0 + w < 0 || x0 > W || w < MINW) return;\n"
    "      var l = Math.max(0, x0), r = Math.min(W, x0 + w);\n"
    "      rects.push({ f: f, x: l, w: r - l, y: fDepth[f] * ROW });\n"
    "      if (fDepth[f] > maxDepth) maxDepth = fDepth[f];\n"
    "      for (var k = fKids[f], j = 0; j < k.length; j++) walk(k[j]);\n"
    "    })(0);\n"
    "    var H = (maxDepth + 1) * ROW;\n"
    "    canvas.style.height = H + 'px';\n"
    "    canvas.width = Math.round(W * dpr);\n"
    "    canvas.height = Math.round(H * dpr);\n"
    "    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);\n"
    "    ctx.clearRect(0, 0, W, H);\n"
    "    ctx.font = '12px ui-monospace, Menlo, Consolas, \"DejaVu Sans Mono\", monospace';\n"
    "    ctx.textBaseline = 'middle';\n"
    "    var cw = ctx.measureText('mmmmmmmmmm').width / 10 || 7, fd = fDepth[focus];\n"
    "    for (var i = 0; i < rects.length; i++) {\n"
    "      var r = rects[i], f = r.f;\n"
    "      ctx.fillStyle = color(f);\n"
    "      ctx.globalAlpha = fDepth[f] < fd ? 0.6 : 1;\n"
    "      ctx.fillRect(r.x, r.y, Math.max(r.w - 0.5, 0.5), ROW - 1);\n"
    "      ctx.globalAlpha = 1;\n"
    "      var fit = Math.floor((r.w - 6) / cw);\n"
    "      if (fit >= 4) {\n"
    "        var label = f ? nodeName(f) : 'all (' + bytes(V.total) + ')';\n"
    "        if (label.length > fit) label = label.slice(0, fit - 1) + '\\u2026';\n"
    "        ctx.fillStyle = term && fMatch[f] ? '#fff' : '#111';\n"
    "        ctx.fillText(label, r.x + 3, r.y + ROW / 2);\n"
    "      }\n"
    "    }\n"
    "    crumbs();\n"
    "    $('zoom-out').disabled = $('reset').disabled = focus === 0;\n"
    "  }\n"
    "\n"
    "  function crumbs() {\n"
    "    var c = $('crumbs'), chain = [];\n"
    "    c.textContent = '';\n"
    "    if (!focus) { c.textContent = 'Showing everything.'; return; }\n"
    "    for (var f = focus; f >= 0; f = fParent[f]) chain.unshift(f);\n"
    "    c.appendChild(el('span', 'Zoomed into: '));\n"
    "    chain.forEach(function (g, i) {\n"
    "      if (i) c.appendChild(el('span', ' \\u203a '));\n"
    "      var a = el('a', nodeName(g));\n"
    "      a.href = '#';\n"
    "      a.addEventListener('click', function (e) { e.preventDefault(); zoom(g); });\n"
    "      c.appendChild(a);\n"
    "    });\n"
    "    c.appendChild(el('span', ' (' + bytes(V.val[focus]) + ', ' +\n"
    "      pct(V.val[focus], V.total) + ' of total)'));\n"
    "  }\n"
    "\n"
    "  function zoom(f) { focus = f > 0 && V.val[f] > 0 ? f : 0; hideTip(); draw(); }\n"
    "\n"
    "  function hit(ev) {\n"
    "    var b = canvas.getBoundingClientRect(), x = ev.clientX - b.left;\n"
    "    var y = ev.clientY - b.top;\n"
    "    for (var i = 0; i < rects.length; i++) {\n"
    "      var r = rects[i];\n"
    "      if (y >= r.y && y < r.y + ROW && x >= r.x && x < r.x + r.w) return r.f;\n"
    "    }\n"
    "    return -1;\n"
    "  }\n"
    "\n"
    "  function hideTip() { tip.style.display = 'none'; }\n"
    "  function showTip(f, ev) {\n"
    "    var val = V.val[f];\n"
    "    tip.textContent = '';\n"
    "    tip.appendChild(el('b', nodeName(f)));\n"
    "    tip.appendChild(el('div', VI.title + ': ' + bytes(val) + ' (' + num(val) +\n"
    "      ' bytes), ' + pct(val, V.total) + ' of total' +\n"
    "      (focus ? ', ' + pct(val, V.val[focus]) + ' of zoom' : '')));\n"
    "    if (V.self[f] > 0) tip.appendChild(el('div', 'Allocated in this frame: ' +\n"
    "      bytes(V.self[f])));\n"
    "    /* The source locations merged into this node, largest first. */\n"
    "    var byFrame = new Map(), locs = [];\n"
    "    for (var i = 0; f && i < nnodes; i++)\n"
    "      if (flameOf[i] === f && V.tv[i] > 0)\n"
    "        byFrame.set(N[2 * i + 1], (byFrame.get(N[2 * i + 1]) || 0) + V.tv[i]);\n"
    "    byFrame.forEach(function (v, fr) { locs.push([fr, v]); });\n"
    "    locs.sort(function (a, b) { return b[1] - a[1]; });\n"
    "    for (i = 0; i < locs.length && i < 4; i++) {\n"
    "      var l = floc(locs[i][0]) || '(no source location)';\n"
    "      var k = kindText(F[locs[i][0] * NF + 3]);\n"
    "      tip.appendChild(el('div', l + (k ? ' \\u2013 ' + k : '') +\n"
    "        (locs.length > 1 ? ': ' + bytes(locs[i][1]) : ''), 't-loc mono'));\n"
    "    }\n"
    "    if (locs.length > 4) tip.appendChild(el('div', '\\u2026 ' + (locs.length - 4) +\n"
    "      ' more locations', 't-loc'));\n"
    "    tip.style.display = 'block';\n"
    "    var tw = tip.offsetWidth, th = tip.offsetHeight;\n"
    "    var tx = ev.clientX + 14, ty = ev.clientY + 14;\n"
    "    if (tx + tw > window.innerWidth - 4) tx = Math.max(4, ev.clientX - tw - 14);\n"
    "    if (ty + th > window.innerHeight - 4) ty = Math.max(4, ev.clientY - th - 14);\n"
    "    tip.style.left = tx + 'px';\n"
    "    tip.style.top = ty + 'px';\n"
    "  }\n"
    "\n"
    "  canvas.addEventListener('mousemove', function (ev) {\n"
    "    var f = hit(ev);\n"
    "    if (f >= 0) showTip(f, ev); else hideTip();\n"
    "  });\n"
    "  canvas.addEventListener('mouseleave', hideTip);\n"
    "  canvas.addEventListener('click', function (ev) {\n"
    "    var f = hit(ev);\n"
    "    if (f >= 0) zoom(f === focus ? fParent[f] : f);\n"
    "  });\n"
    "  $('reset').addEventListener('click', function () { zoom(0); });\n"
    "  $('zoom-out').addEventListener('click', function () { zoom(fParent[focus]); });\n"
    "  document.addEventListener('keydown', function (ev) {\n"
    "    if (ev.key === 'Escape' && ev.target.tagName !== 'INPUT') zoom(0);\n"
    "  });\n"
    "  window.addEventListener('resize', function () { draw(); drawChart(); });\n"
    "\n"
    "  /* ---- search ----\n"
    "     Case-insensitive substring of a function name or file:line. Frames are tested once\n"
    "     per search; flame nodes and stacks match when one of their frames does. */\n"
    "  function search() {\n"
    "    term = $('search').value.trim().toLowerCase();\n"
    "    var i, s, m = 0;\n"
    "    if (!lower) lower = S.map(function (x) { return x.toLowerCase(); });\n"
    "    for (i = 0; i < nframes; i++)\n"
    "      frameMatch[i] = term && (lower[F[i * NF]].indexOf(term) >= 0 ||\n"
    "        floc(i).toLowerCase().indexOf(term) >= 0) ? 1 : 0;\n"
    "    fMatch.fill(0);\n"
    "    for (i = 0; i < nnodes; i++) if (frameMatch[N[2 * i + 1]]) fMatch[flameOf[i]] = 1;\n"
    "    for (s = 0; s < nstacks; s++) {\n"
    "      var p = paths[s];\n"
    "      stackMatch[s] = 0;\n"
    "      for (var j = 0; j < p.length && !stackMatch[s]; j++)\n"
    "        stackMatch[s] = frameMatch[p[j]];\n"
    "    }\n"
    "    /* The matched share counts a match inside another match once. */\n"
    "    var inMatch = new Uint8Array(nflame);\n"
    "    for (i = 1; i < nflame; i++) {\n"
    "      if (fMatch[i] && !inMatch[fParent[i]]) m += V.val[i];\n"
    "      inMatch[i] = fMatch[i] | inMatch[fParent[i]];\n"
    "    }\n"
    "    $('matched').textContent = term ? 'Matched: ' + bytes(m) + ' (' + pct(m, V.total) +\n"
    "      ' of ' + VI.word + ' bytes)' : '';\n"
    "    draw();\n"
    "    renderTable();\n"
    "  }\n"
    "  $('search').addEventListener('input', search);\n"
    "\n"
    "  /* ---- the view switcher ----\n"
    "     Every view's numbers are in the data; switching re-renders the flame graph and the\n"
    "     table from them. */\n"
    "  function viewNote() {\n"
    "    var pk = D.peak, t = D.temp_threshold_ns, nsus = 0;\n"
    "    for (var s = 0; s < nstacks; s++) if (T[s * NS + C.leak] > 0) nsus++;\n"
    "    var notes = {\n"
    "      live: 'Bytes live at the snapshot' + (D.duration_ns ? ' (' + dur(D.duration_ns) +\n"
    "        ' after sampling started)' : '') + ', by the call stack that allocated them.',\n"
    "      peak: pk.bytes > 0 || pk.samples > 0 ? 'Bytes live at the recorded peak: ' +\n"
    "        bytes(pk.bytes) + ' ' + peakWhen(pk) +\n"
    "        ', by the call stack that allocated them.' :\n"
    "        'This profile recorded no peak.',\n"
    "      alloc: 'Bytes allocated since sampling began, freed or not: where the allocation ' +\n"
    "        'traffic comes from.',\n"
    "      temporary: 'Bytes of allocations freed within ' +\n"
    "        (t ? dur(t) : 'the threshold (not recorded in this profile)') +\n"
    "        ' of being made: short-lived churn.',\n"
    "      leaks: nsus ? nsus + ' leak suspect' + (nsus > 1 ? 's' : '') + ': sites whose ' +\n"
    "        'surviving allocations are spread over the run as a steady leak\\u2019s are; ' +\n"
    "        'their bytes are the survivors, their rate the growth per second.' :\n"
    "        'No leak suspects: no site\\u2019s surviving allocations are spread over the ' +\n"
    "        'run as a steady leak\\u2019s are.'\n"
    "    };\n"
    "    var opened = !(view === 'peak' && D.opened_on_peak) ? '' : totals.live > 0 ?\n"
    "      'Little was live at the snapshot (' + bytes(totals.live) + ', against ' +\n"
    "      bytes(totals.peak) + ' at the peak), so the page opened on the peak. ' :\n"
    "      'Nothing sampled was live at the snapshot (the program freed what it allocated), ' +\n"
    "      'so the page opened on the peak. ';\n"
    "    $('view-note').textContent = opened + notes[view];\n"
    "  }\n"
    "  var radios = document.querySelectorAll('input[name=view]');\n"
    "  function setView(v) {\n"
    "    view = v;\n"
    "    VI = VIEWS[v];\n"
    "    V = viewData(v);\n"
    "    focus = 0;\n"
    "    sortKey = v === 'leaks' ? 'rate' : 'bytes';\n"
    "    sortDir = -1;\n"
    "    showAll = false;\n"
    "    Array.prototype.forEach.call(radios, function (r) {\n"
    "      r.checked = r.value === v;\n"
    "      r.parentNode.className = (r.checked ? 'on' : '') +\n"
    "        (totals[r.value] > 0 ? '' : ' none');\n"
    "    });\n"
    "    viewNote();\n"
    "    search();\n"
    "  }\n"
    "  Array.prototype.forEach.call(radios, function (r) {\n"
    "    var t = el('span', ' ' + (totals[r.value] > 0 ? bytes(totals[r.value]) : '\\u2013'),\n"
    "      'total');\n"
    "    r.parentNode.appendChild(t);\n"
    "    if (!(totals[r.value] > 0)) r.parentNode.title = 'Nothing in this view';\n"
    "    r.addEventListener('change', function () { if (r.checked) setView(r.value); });\n"
    "  });\n"
    "\n"
    "  /* ---- table ----\n"
    "     Rows by allocating (leaf) function, by stack or by thread, from the stacks that have\n"
    "     bytes in the view and match the search (all without one), so a search for a caller\n"
    "     shows what it allocates through. */\n"
    "  function columns() {\n"
    "    var c = [{ key: 'fn', title: $('group').value === 'thread' ? 'Thread' : 'Function',\n"
    "      cls: 'fn', text: true }];\n"
    "    if ($('group').value !== 'thread')\n"
    "      c.push({ key: 'loc', title: 'Location', cls: 'loc', text: true });\n"
    "    c.push({ key: 'bytes', title: VI.title }, { key: 'share', title: 'Share' });\n"
    "    if (VI.lo >= 0) c.push({ key: 'ci', title: '95 % interval', nosort: true });\n"
    "    if (view === 'leaks') c.push({ key: 'rate', title: 'Leak rate' });\n"
    "    if (VI.obj >= 0) c.push({ key: 'obj', title: VI.objTitle });\n"
    "    c.push({ key: 'samp', title: 'Samples' }, { key: 'p50', title: 'Freed after (p50)' },\n"
    "      { key: 'p90', title: 'p90' });\n"
    "    if (D.threads.length && $('group').value !== 'thread')\n"
    "      c.push({ key: 'thread', title: 'Thread', cls: 'thr', text: true });\n"
    "    return c;\n"
    "  }\n"
    "  var sortKey = view === 'leaks' ? 'rate' : 'bytes', sortDir = -1, showAll = false;\n"
    "  var LIMIT = 200, PATH = 8, shownRows = [], COLS = [];\n"
    "\n"
    "  function rowsFor(group) {\n"
    "    var rows = [], byKey = new Map();\n"
    "    for (var s = 0; s < nstacks; s++) {\n"
    "      var o = s * NS, b = T[o + VI.bytes];\n"
    "      if (!(b > 0) || (term && !stackMatch[s])) continue;\n"
    "      var leaf = T[o + C.site], th = T[o + C.thread];\n"
    "      /* By stack: by call-tree leaf, so one stack allocated from several threads is one\n"
    "         row. */\n"
    "      var k = group === 'leaf' ? F[leaf * NF] : group === 'thread' ? th : T[o + C.node];\n"
    "      var r = byKey.get(k);\n"
    "      if (!r) {\n"
    "        r = { fn: group !== 'thread' ? fname(leaf) :\n"
    "          threadName(th) || '(thread not known)',\n"
    "          loc: '', best: -1, bytes: 0, v: 0, obj: 0, samp: 0, rate: 0,\n"
    "          life: new Float64Array(NB), threads: new Set(), stacks: [] };\n"
    "        rows.push(r);\n"
    "        byKey.set(k, r);\n"
    "      }\n"
    "      /* The location shown is that of the stack holding the most bytes. */\n"
    "      if (b > r.best) { r.best = b; r.loc = floc(leaf); }\n"
    "      r.bytes += b;\n"
    "      if (VI.lo >= 0) r.v += T[o + VI.sd] * T[o + VI.sd];\n"
    "      if (VI.obj >= 0) r.obj += T[o + VI.obj];\n"
    "      r.samp += T[o + VI.samp];\n"
    "      r.rate += T[o + C.leakRate];\n"
    "      var h = lifeOf.get(s);\n"
    "      if (h) for (var j = 0; j < NB; j++) r.life[j] += h[j];\n"
    "      r.threads.add(th);\n"
    "      r.stacks.push(s);\n"
    "    }\n"
    "    rows.forEach(function (r) {\n"
    "      var one = r.stacks.length === 1 ? r.stacks[0] * NS : -1;\n"
    "      /* One stack: the writer's interval and mark (the same as the text report's).\n"
    "         Several: their estimates are independent, so the variances add, and the same\n"
    "         construction (interval() above) gives the interval and the mark. */\n"
    "      var own = one >= 0 && VI.lo >= 0, iv = own || VI.lo < 0 ? null :\n"
    "        interval(r.bytes, r.v, r.samp, D.rate);\n"
    "      r.lo = own ? T[one + VI.lo] : iv ? iv.lo : 0;\n"
    "      r.hi = own ? T[one + VI.hi] : iv ? iv.hi : 0;\n"
    "      r.low = one >= 0 ? (T[one + C.low] & VI.bit) !== 0 : iv ? iv.low : r.samp < D.few;\n"
    "      r.share = r.bytes;\n"
    "      r.p50 = quantile(r.life, 0.5);\n"
    "      r.p90 = quantile(r.life, 0.9);\n"
    "      var ts = [];\n"
    "      r.threads.forEach(function (t) { if (t) ts.push(t); });\n"
    "      r.thread = ts.length === 1 ? threadName(ts[0]) :\n"
    "        ts.length ? ts.length + ' threads' : '';\n"
    "    });\n"
    "    return rows;\n"
    "  }\n"
    "  /* A stack as \"leaf <- caller <- ...\", the first PATH frames or all of them. */\n"
    "  function pathText(s, all) {\n"
    "    var p = paths[s], out = [];\n"
    "    for (var i = p.length - 1; i >= 0 && (all || out.length < PATH); i--)\n"
    "      out.push(fname(p[i]));\n"
    "    var more = p.length - out.length;\n"
    "    return out.join(' \\u2190 ') + (more > 0 ? ' \\u2190 \\u2026 ' + more + ' more' : '');\n"
    "  }\n"
    "\n"
    "  function renderHead() {\n"
    "    var tr = document.querySelector('#sites thead tr');\n"
    "    tr.textContent = '';\n"
    "    COLS.forEach(function (c) {\n"
    "      var th = el('th', c.title, c.cls || '');\n"
    "      if (c.key === sortKey) th.className += sortDir < 0 ? ' sorted-desc' : ' sorted-asc';\n"
    "      th.setAttribute('aria-sort', c.key !== sortKey ? 'none' :\n"
    "        sortDir < 0 ? 'descending' : 'ascending');\n"
    "      if (c.nosort) th.style.cursor = 'default';\n"
    "      else th.addEventListener('click', function () {\n"
    "        if (sortKey === c.key) sortDir = -sortDir;\n"
    "        else { sortKey = c.key; sortDir = c.text ? 1 : -1; }\n"
    "        renderTable();\n"
    "      });\n"
    "      tr.appendChild(th);\n"
    "    });\n"
    "  }\n"
    "\n"
    "  function renderTable() {\n"
    "    COLS = columns();\n"
    "    if (!COLS.some(function (c) { return c.key === sortKey; })) sortKey = 'bytes';\n"
    "    renderHead();\n"
    "    var group = $('group').value, rows = rowsFor(group);\n"
    "    var text = sortKey === 'fn' || sortKey === 'loc' || sortKey === 'thread';\n"
    "    rows.sort(function (a, b) {\n"
    "      var x = a[sortKey], y = b[sortKey];\n"
    "      var c = text ? (x < y ? -1 : x > y ? 1 : 0) : x === y ? 0 : x < y ? -1 : 1;\n"
    "      return c * sortDir || b.bytes - a.bytes;\n"
    "    });\n"
    "    var tb = document.querySelector('#sites tbody');\n"
    "    var frag = document.createDocumentFragment();\n"
    "    var shown = showAll ? rows.length : Math.min(rows.length, LIMIT);\n"
    "    tb.textContent = '';\n"
    "    for (var i = 0; i < shown; i++) {\n"
    "      var r = rows[i], tr = el('tr', undefined, r.low ? 'low' : '');\n"
    "      var fn = el('td', undefined, 'fn');\n"
    "      fn.appendChild(el('span', r.fn, 'mono'));\n"
    "      if (group === 'stack') {\n"
    "        var pt = el('div', pathText(r.stacks[0], false), 'path');\n"
    "        pt.title = pathText(r.stacks[0], true);\n"
    "        fn.appendChild(pt);\n"
    "      } else if (r.stacks.length > 1) {\n"
    "        fn.appendChild(el('div', r.stacks.length + ' call stacks', 'path'));\n"
    "      }\n"
    "      tr.appendChild(fn);\n"
    "      COLS.forEach(function (c) {\n"
    "        var td;\n"
    "        switch (c.key) {\n"
    "        case 'fn': return;\n"
    "        case 'loc': td = el('td', r.loc, 'loc mono'); break;\n"
    "        case 'bytes':\n"
    "          td = el('td', (r.low && VI.lo < 0 ? '~' : '') + bytes(r.bytes),\n"
    "            r.low ? 'low' : '');\n"
    "          break;\n"
    "        case 'share': td = el('td', pct(r.bytes, V.total)); break;\n"
    "        case 'ci':\n"
    "          td = el('td', (r.low ? '~ ' : '') + bytes(r.lo) + ' \\u2013 ' + bytes(r.hi),\n"
    "            r.low ? 'low' : 'muted');\n"
    "          break;\n"
    "        case 'rate': td = el('td', '~' + bytes(r.rate) + '/s'); break;\n"
    "        case 'obj': td = el('td', num(r.obj)); break;\n"
    "        case 'samp': td = el('td', num(r.samp)); break;\n"
    "        case 'p50': td = el('td', lifeText(r.p50)); break;\n"
    "        case 'p90': td = el('td', lifeText(r.p90)); break;\n"
    "        case 'thread': td = el('td', r.thread, 'thr'); break;\n"
    "        }\n"
    "        if (r.low && (c.key === 'bytes' || c.key === 'ci'))\n"
    "          td.title = 'Few samples: treat this estimate as rough';\n"
    "        tr.appendChild(td);\n"
    "      });\n"
    "      tr.title = 'Click to search for ' + r.fn;\n"
    "      tr.setAttribute('data-row', i);\n"
    "      frag.appendChild(tr);\n"
    "    }\n"
    "    tb.appendChild(frag);\n"
    "    shownRows = rows;\n"
    "    $('table-note').textContent = (shown < rows.length ? 'Showing ' + num(shown) + ' of ' :\n"
    "      '') + num(rows.length) + ' rows' + (term ? ' from stacks matching the search' : '') +\n"
    "      (rows.length ? '.' : ' in this view.');\n"
    "    $('show-all').hidden = shown >= rows.length;\n"
    "  }\n"
    "  /* One listener for all rows: a click searches for the row's function. */\n"
    "  document.querySelector('#sites tbody').addEventListener('click', function (ev) {\n"
    "    var tr = ev.target.closest('tr[data-row]');\n"
    "    if (!tr || $('group').value === 'thread') return;\n"
    "    $('search').value = shownRows[+tr.getAttribute('data-row')].fn;\n"
    "    search();\n"
    "  });\n"
    "  $('group').addEventListener('change', function () { showAll = false; renderTable(); });\n"
    "  $('show-all').addEventListener('click', function () { showAll = true; renderTable(); });\n"
    "\n"
    "  setView(view);\n"
    "})();\n"
    "</script>\n"
    "</body>\n"
    "</html>\n";
// clang-format on

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
    uint32_t *leaf;      /* stack -> its leaf node, UINT32_MAX if left out */
    uint32_t *thread_of; /* profile thread -> string index of its name (UINT32_MAX none) */
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
    free(d->thread_of);
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
    d->node_cap = table_cap(total);
    d->str_cap = table_cap(2 * (size_t)nu + p->nthreads);
    d->str = malloc((2 * (size_t)nu + p->nthreads + 1) * sizeof *d->str);
    d->str_table = calloc(d->str_cap, sizeof *d->str_table);
    d->thread_of = malloc((p->nthreads + 1) * sizeof *d->thread_of);
    d->owned = malloc(((size_t)nu + 1) * sizeof *d->owned);
    d->name_of = malloc(((size_t)nu + 1) * sizeof *d->name_of);
    d->file_of = malloc(((size_t)nu + 1) * sizeof *d->file_of);
    d->parent = malloc((total + 1) * sizeof *d->parent);
    d->frame = malloc((total + 1) * sizeof *d->frame);
    d->node_table = calloc(d->node_cap, sizeof *d->node_table);
    d->leaf = malloc((p->nstacks + 1) * sizeof *d->leaf);
    if (!d->str || !d->str_table || !d->owned || !d->name_of || !d->file_of || !d->parent ||
        !d->frame || !d->node_table || !d->leaf || !d->thread_of)
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
    for (size_t i = 0; i < p->nthreads; i++)
        d->thread_of[i] = p->threads[i].name ? intern(d, p->threads[i].name) : UINT32_MAX;
    /* Stacks with nothing to show in any view stay out of the page. */
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        d->leaf[i] = UINT32_MAX;
        int any = 0;
        for (int v = 0; v < MEMPROF_VIEW_COUNT && !any; v++) {
            struct memprof_pvalue val;
            memprof__pstack_view(st, (enum memprof_view)v, &val);
            any = val.bytes != 0;
        }
        if (!any)
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

/* The standard deviation of an estimate, rounded (the page sums variances of merged rows). */
static uint64_t sd_of(double var)
{
    double sd = sqrt(var > 0 ? var : 0);
    return isfinite(sd) ? memprof__est_round(sd) : 0;
}

/* One view of a stack in the page's columns: bytes, then lo, hi and sd where the view has a
 * variance, then objects (not for leaks) and samples. Returns the view's low-information
 * bit. */
static unsigned put_view(const struct memprof_pstack *st, enum memprof_view view, uint64_t rate,
                         FILE *out, size_t *count)
{
    struct memprof_pvalue v;
    struct memprof_export_interval iv;
    memprof__pstack_view(st, view, &v);
    memprof__export_interval((double)v.bytes, v.var_known ? v.var : -1.0, v.samples, rate, &iv);
    put_u64(out, v.bytes, count);
    if (view == MEMPROF_VIEW_LIVE || view == MEMPROF_VIEW_PEAK) {
        put_u64(out, iv.lo, count);
        put_u64(out, iv.hi, count);
        put_u64(out, sd_of(v.var), count);
    }
    if (view != MEMPROF_VIEW_LEAKS)
        put_u64(out, v.objects, count);
    put_u64(out, v.samples, count);
    return v.bytes && iv.low_information ? 1u << view : 0;
}

static void write_data(const struct memprof_profile *p, const struct html_data *d,
                       enum memprof_view view, int opened_on_peak, bool native, FILE *out)
{
    struct memprof_export_interval heap, peak;
    memprof__export_interval((double)p->inuse_space, p->inuse_space_var, p->live_samples,
                             p->sampling_rate, &heap);
    memprof__export_interval((double)p->peak_space, p->peak_space_var, p->peak_samples,
                             p->sampling_rate, &peak);
    /* A merged row of the table (several stacks) is marked below this many samples: the
     * count at which a single estimate of the same variance stops being marked. */
    uint64_t few = 1;
    for (struct memprof_export_interval iv; few < 1000; few++) {
        memprof__export_interval(1e6, -1.0, few, p->sampling_rate, &iv);
        if (!iv.low_information)
            break;
    }
    fprintf(out,
            "{\"version\":\"" MEMPROF_VERSION_STRING "\",\"time\":%" PRIu64 ",\"rate\":%" PRIu64
            ",\"view\":\"%s\",\"few\":%" PRIu64 ",\n\"heap\":{\"bytes\":%" PRIu64 ",\"lo\":%" PRIu64
            ",\"hi\":%" PRIu64 ",\"low\":%d,\"objects\":%" PRIu64 ",\"samples\":%" PRIu64
            "},\n\"peak\":{\"bytes\":%" PRIu64 ",\"lo\":%" PRIu64 ",\"hi\":%" PRIu64
            ",\"low\":%d,\"objects\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"t_ns\":%" PRIu64
            ",\"merged\":%u},\n\"duration_ns\":%" PRIu64 ",\"temp_threshold_ns\":%" PRIu64
            ",\n\"health\":{\"dropped\":%" PRIu64 ",\"overflows\":%" PRIu64
            ",\"truncated\":%" PRIu64 ",\"unresolved\":%" PRIu64 ",\"addresses\":%" PRIu64
            ",\"raw\":%d,\"unnamed\":[",
            p->time_unix_ns / 1000000000u, p->sampling_rate, memprof__view_name(view), few,
            p->inuse_space, heap.lo, heap.hi, heap.low_information, p->inuse_objects,
            p->live_samples, p->peak_space, peak.lo, peak.hi, peak.low_information, p->peak_objects,
            p->peak_samples, p->peak_time_ns, p->merged, p->duration_ns, p->temp_threshold_ns,
            p->dropped_samples, p->stack_overflows, p->truncated_stacks, p->unresolved_addresses,
            p->total_addresses, memprof__profile_unsymbolized(p));
    /* The modules whose frames have no name, for the note under the health line. */
    const char *mods[3];
    bool more;
    size_t nmods = memprof__unnamed_modules(p, mods, sizeof mods / sizeof *mods, &more);
    for (size_t i = 0; i < nmods; i++) {
        fputs(i ? "," : "", out);
        memprof__json_string(out, mods[i], true);
    }
    fprintf(out, "],\"unnamed_more\":%d},\n\"opened_on_peak\":%d,\n\"strings\":[", more,
            opened_on_peak);
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
    /* The columns of the page's script (C = {...}): keep the two in step. */
    count = 0;
    fputs("],\n\"stacks\":[\n", out);
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        if (d->leaf[i] == UINT32_MAX)
            continue;
        unsigned low = 0;
        put_index(out, d->leaf[i], &count);
        low |= put_view(st, MEMPROF_VIEW_LIVE, p->sampling_rate, out, &count);
        low |= put_view(st, MEMPROF_VIEW_ALLOC, p->sampling_rate, out, &count);
        low |= put_view(st, MEMPROF_VIEW_PEAK, p->sampling_rate, out, &count);
        low |= put_view(st, MEMPROF_VIEW_TEMPORARY, p->sampling_rate, out, &count);
        struct memprof_pvalue leak;
        memprof__pstack_view(st, MEMPROF_VIEW_LEAKS, &leak);
        struct memprof_export_interval iv;
        memprof__export_interval((double)leak.bytes, -1.0, leak.samples, p->sampling_rate, &iv);
        put_u64(out, leak.bytes, &count);
        put_u64(out, leak.bytes ? memprof__est_round(st->leak_rate) : 0, &count);
        put_u64(out, leak.samples, &count);
        low |= leak.bytes && iv.low_information ? 1u << MEMPROF_VIEW_LEAKS : 0;
        put_u64(out, st->thread <= p->nthreads ? st->thread : 0, &count);
        put_u64(out, low, &count);
        /* Shown from the site outward (sites.c), a stack starts at its site's frame; with every
         * native frame, the site is looked for. */
        uint32_t site = native && st->nframes ? memprof__pstack_site(p, st) : 0;
        if (st->nframes) /* a runtime's own method is named by the code that called it */
            site = memprof__pstack_label(p, st, site);
        put_index(out, st->nframes ? d->u.of[st->frames[site]] : d->u.no_stack, &count);
    }
    /* Lifetimes only for the stacks that freed samples: most stacks of a long-lived heap
     * have none, and 16 zeros each would double the page. */
    count = 0;
    fputs("],\n\"life\":[", out);
    for (size_t i = 0, row = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        if (d->leaf[i] == UINT32_MAX)
            continue;
        uint64_t freed = 0;
        for (unsigned b = 0; b < MEMPROF_LIFETIME_BUCKETS; b++)
            freed += st->lifetimes[b];
        if (freed) {
            put_u64(out, row, &count);
            for (unsigned b = 0; b < MEMPROF_LIFETIME_BUCKETS; b++)
                put_u64(out, st->lifetimes[b], &count);
        }
        row++;
    }
    count = 0;
    fputs("],\n\"threads\":[", out);
    for (size_t i = 0; i < p->nthreads; i++) {
        put_u64(out, p->threads[i].tid, &count);
        put_index(out, d->thread_of[i], &count);
    }
    count = 0;
    fputs("],\n\"series\":[", out);
    for (size_t i = 0; i < p->nseries; i++) {
        put_u64(out, p->series[i].t_ns, &count);
        put_u64(out, p->series[i].live, &count);
        put_u64(out, p->series[i].alloc, &count);
    }
    fputs("]}\n", out);
}

int memprof__export_html(const struct memprof_profile *p, FILE *out, enum memprof_view view)
{
    if ((unsigned)view >= MEMPROF_VIEW_COUNT)
        return -EINVAL;
    /* A program that freed (nearly) everything before the snapshot has an empty live view:
     * the page opens on what its memory held at the peak, and says so. */
    int opened_on_peak = view == MEMPROF_VIEW_LIVE && memprof__prefer_peak(p);
    if (opened_on_peak)
        view = MEMPROF_VIEW_PEAK;
    /* The stacks as people read them (sites.c); the whole-heap figures are p's. */
    struct memprof_profile *shown;
    bool native = memprof__present_native();
    if (memprof__profile_presented(p, native, &shown) != 0)
        return -ENOMEM;
    p = shown;
    uint32_t longest = 0;
    for (size_t i = 0; i < p->nstacks; i++)
        longest = p->stacks[i].nframes > longest ? p->stacks[i].nframes : longest;
    uint32_t *path = malloc(((size_t)longest + 1) * sizeof *path);
    struct html_data d;
    int rc = path ? data_build(p, &d, path) : -ENOMEM;
    if (rc == 0) {
        fputs(page_head, out);
        fputs("<script type=\"application/json\" id=\"memprof-data\">", out);
        write_data(p, &d, view, opened_on_peak, native, out);
        fputs("</script>\n", out);
        fputs(page_tail, out);
        rc = ferror(out) ? -EIO : 0;
    }
    if (path)
        data_free(&d);
    free(path);
    memprof__profile_presented_free(shown);
    return rc;
}
