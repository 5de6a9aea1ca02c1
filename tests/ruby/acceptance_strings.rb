# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# The Ruby binding's acceptance workload (issue 8), run by test_acceptance.rb in a fresh
# Debian ruby without LD_PRELOAD: sample at 64 KiB, build 2000 strings of 50,000 characters
# in a named method, and report what the profiler saw as one line of JSON (the estimate with
# its interval, the top allocator's method, file and line, and the frame source's counters).
# With a file name argument the snapshot is also saved there (format from the extension).

require 'json'
require 'memprof'

def build_strings(count, size)
  Array.new(count) { 'x' * size } # <- the allocating line
end

Memprof.start(sampling_rate_kb: 64)
kept = build_strings(2000, 50_000)
snap = Memprof.snapshot
Memprof.stop
top = snap.top_allocators(1).first
snap.save(ARGV[0]) if ARGV[0]
stats = Memprof.stats
puts JSON.generate(
  kept_bytes: kept.sum(&:bytesize),
  estimated_heap_bytes: snap.estimated_heap_bytes,
  estimated_heap_bytes_low: snap.estimated_heap_bytes_low,
  estimated_heap_bytes_high: snap.estimated_heap_bytes_high,
  live_samples: snap.live_samples,
  function: top[:function], file: top[:file], line: top[:line],
  top_estimated_bytes: top[:estimated_bytes],
  stack: top[:stack].map(&:to_s),
  ld_preload: ENV['LD_PRELOAD'],
  ruby_eval_loop: stats[:ruby_eval_loop],
  ruby_frames_interned: stats[:ruby_frames_interned]
)
