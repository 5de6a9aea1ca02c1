# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# The views beyond "live now" through the Ruby binding (libmemprof 1.2): Snapshot#peak,
# #series, #sites(view: ...) and Memprof.temporary_threshold=, checked on programs whose
# truth is known, each in a fresh interpreter without LD_PRELOAD (the Ruby twins of
# tests/integration/views.c and tests/python/test_views.py):
#
# - peak: build_and_drop builds 64 MiB of 64 KiB strings and frees their buffers
#   (String#clear frees at once; garbage would wait for the GC), the program sleeps 0.2 s,
#   then hold keeps 8 MiB to the snapshot. The peak is 64 MiB (+-15 %), reached at least
#   0.2 s before the snapshot; the peak view's first site is build_and_drop's with 64 MiB
#   (+-15 %); the live view's first is hold's with 8 MiB (+-25 %), and build_and_drop holds
#   nothing live.
# - series: non-empty, times and allocated bytes never decrease, the highest point is within
#   15 % of the peak and lies before the drop, and the last point is the snapshot's own.
# - temporary: churn builds and clears 80 MiB of 4 KiB strings among keep_blocks' 4 MiB
#   that stay: the temporary view names churn first (80 MiB +-20 %, median lifetime under
#   the 1 ms threshold), and the kept strings are not temporary.
# - threshold: buffers that live 3 ms are not temporary under the default 1 ms threshold,
#   and are after Memprof.temporary_threshold = 0.1 (which applies to frees from then on).
# - leaks: over ~1.5 s a start-up cache, a steady leaker (64 KiB per ~11 ms) and strings
#   living ~5 ms: the leaks view ranks the leaker first, flagged a suspect with a rate no
#   more than 50 % above the one it leaked at; neither the cache nor the churn is a suspect.
#
# At 64 KiB a 64 KiB string is sampled with probability 0.63 and a 4 KiB one with 0.06: the
# tolerances are 4 standard deviations or more.

require_relative 'helper'
require 'json'

class TestMemprofViews < Minitest::Test
  include MemprofTestHelper

  MIB = 1 << 20

  # Loaded by every workload: a view's sites as plain data, and the peak as a Hash.
  PRELUDE = <<~'RUBY'
    require 'json'

    def ruby_functions(site)
      site.stack.select(&:ruby?).map(&:function)
    end

    def view(snap, name)
      snap.sites(view: name).map do |s|
        { function: s.function, file: s.file, line: s.line, functions: ruby_functions(s),
          bytes: s.bytes, low: s.bytes_low, high: s.bytes_high, count: s.count,
          samples: s.samples, p50: s.lifetime_p50, p90: s.lifetime_p90,
          leak_rate: s.leak_rate, low_information: s.low_information?,
          leak_suspect: s.leak_suspect?, view: s.view, frozen: s.frozen? }
      end
    end

    def peak_hash(snap)
      pk = snap.peak
      { bytes: pk.bytes, low: pk.bytes_low, high: pk.bytes_high, count: pk.count,
        samples: pk.samples, time: pk.time_seconds, duration: pk.duration_seconds,
        allocated: pk.allocated_bytes, threshold: pk.temporary_threshold_seconds }
    end
  RUBY

  PEAK = <<~'RUBY'
    BLOCK = 64 << 10

    def build_and_drop
      blocks = Array.new(1024) { 'x' * BLOCK }
      blocks.each(&:clear)
      nil
    end

    def hold
      Array.new(128) { 'y' * BLOCK }
    end

    Memprof.start(sampling_rate_kb: 64)
    build_and_drop
    dropped_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    sleep 0.2
    held = hold
    snapshot_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    snap = Memprof.snapshot
    errors = [:bogus, 'LIVE', 2, Object.new].map do |bad|
      snap.sites(view: bad)
      nil
    rescue Memprof::ArgumentError => e
      e.message
    end
    series = snap.series
    puts JSON.generate(
      peak: peak_hash(snap), since_drop: snapshot_at - dropped_at,
      estimate: snap.estimated_heap_bytes, held: held.sum(&:bytesize),
      peak_view: view(snap, :peak), live_view: view(snap, 'live'), alloc_view: view(snap, :alloc),
      series: series.map(&:to_a), series_frozen: series.frozen? && series.all?(&:frozen?),
      peak_frozen: snap.peak.frozen?, same_object: snap.sites(view: :peak).equal?(snap.sites(view: 'peak')),
      legacy_sites: snap.sites.all? { |s| s.is_a?(Memprof::Site) }, errors: errors
    )
  RUBY

  def run_views(code)
    out = ruby_script!(PRELUDE + code)
    JSON.parse(out.lines.last, symbolize_names: true)
  end

  # The PEAK workload's result, run once for the tests that read it.
  def peak_run
    self.class.instance_variable_get(:@peak_run) ||
      self.class.instance_variable_set(:@peak_run, run_views(PEAK))
  end

  def bytes_of(sites, function)
    sites.select { |s| s[:functions].include?(function) }.sum { |s| s[:bytes] }
  end

  def rank_of(sites, function)
    sites.index { |s| s[:functions].include?(function) }
  end

  def assert_within(want, got, tol, msg = nil)
    assert_in_delta want, got, want * tol, msg
  end

  def test_peak
    r = peak_run
    pk = r[:peak]
    msg = JSON.pretty_generate(pk)
    assert_within 64 * MIB, pk[:bytes], 0.15, msg
    assert_operator pk[:low], :<=, pk[:bytes], msg
    assert_operator pk[:high], :>=, pk[:bytes], msg
    assert_operator pk[:high] - pk[:low], :<, 0.25 * pk[:bytes], msg
    assert_includes 500..800, pk[:samples], msg # 1024 blocks sampled with p = 0.63
    assert_operator pk[:count], :>=, 0.85 * 1024, msg
    # Seconds, not nanoseconds: the peak came before the 0.2 s sleep, inside the run.
    assert_operator pk[:time], :>, 0, msg
    assert_operator pk[:duration], :<, 60, msg
    assert_operator pk[:duration] - pk[:time], :>=, r[:since_drop], msg
    assert_operator r[:since_drop], :>=, 0.2
    assert_operator pk[:allocated], :>=, 0.85 * 72 * MIB, msg
    assert_in_delta 0.001, pk[:threshold], 1e-9, msg # the default
    assert r[:peak_frozen]
  end

  def test_peak_view_names_the_method_that_peaked
    sites = peak_run[:peak_view]
    top = sites.first
    msg = JSON.pretty_generate(sites.first(3))
    assert_equal 'Object#build_and_drop', top[:function], msg
    assert_equal 'peak', top[:view]
    assert_equal '-e', top[:file], msg
    assert_within 64 * MIB, bytes_of(sites, 'Object#build_and_drop'), 0.15, msg
    assert_operator bytes_of(sites, 'Object#hold'), :<, MIB / 2, msg
    assert(sites.all? { |s| s[:low] <= s[:bytes] && s[:bytes] <= s[:high] }, msg)
    assert_equal sites.map { |s| s[:bytes] }.sort.reverse, sites.map { |s| s[:bytes] }
    # The buffers were freed after tens of ms: lifetimes are known, in seconds.
    refute_nil top[:p50], msg
    assert_operator top[:p50], :>, 0, msg
    assert_operator top[:p50], :<=, 4.0, msg
    assert_operator top[:p90], :>=, top[:p50], msg
    refute top[:low_information], msg
    refute top[:leak_suspect], msg
    assert_equal 0.0, top[:leak_rate]
    assert top[:frozen]
    assert peak_run[:same_object], 'a view is read once per snapshot'
  end

  def test_live_view_names_the_method_that_holds
    r = peak_run
    sites = r[:live_view]
    msg = JSON.pretty_generate(sites.first(3))
    assert_equal 'Object#hold', sites.first[:function], msg
    assert_equal 'live', sites.first[:view]
    assert_equal 128 * (64 << 10), r[:held]
    assert_within 8 * MIB, bytes_of(sites, 'Object#hold'), 0.25, msg
    assert_operator bytes_of(sites, 'Object#build_and_drop'), :<, MIB / 2, msg
    assert_nil sites.first[:p50], msg # nothing of it was freed
    alloc = r[:alloc_view]
    assert_equal 'Object#build_and_drop', alloc.first[:function]
    assert_within 64 * MIB, bytes_of(alloc, 'Object#build_and_drop'), 0.15
    assert_within 8 * MIB, bytes_of(alloc, 'Object#hold'), 0.25
    assert r[:legacy_sites], 'sites without view: still lists Memprof::Site'
  end

  def test_series
    r = peak_run
    series = r[:series]
    pk = r[:peak]
    assert r[:series_frozen]
    assert_includes 2..1025, series.size
    times = series.map { |t, _, _| t }
    allocated = series.map { |_, _, a| a }
    assert_equal times.sort, times
    assert_equal allocated.sort, allocated
    top = series.map { |_, live, _| live }.max
    assert_within pk[:bytes], top, 0.15, "highest point #{top}, peak #{pk[:bytes]}"
    t_top = series.find { |_, live, _| live == top }[0]
    assert_operator pk[:duration] - t_top, :>=, r[:since_drop]
    # The last point is the snapshot's own.
    assert_in_delta pk[:duration], series.last[0], 1e-9
    assert_equal r[:estimate], series.last[1]
    assert_equal pk[:allocated], series.last[2]
    assert_within 8 * MIB, series.last[1], 0.25
  end

  def test_unknown_view_is_an_argument_error
    errors = peak_run[:errors]
    assert_equal 4, errors.compact.size, errors.inspect
    errors.each do |msg|
      %w[:live :alloc :peak :temporary :leaks].each { |name| assert_includes msg, name }
    end
  end

  TEMPORARY = <<~'RUBY'
    def keep_blocks
      Array.new(1024) { 'k' * 4096 }
    end

    def churn
      20_480.times do
        s = 'c' * 4096
        s.clear
      end
    end

    Memprof.start(sampling_rate_kb: 64)
    kept = keep_blocks
    churn
    snap = Memprof.snapshot
    puts JSON.generate(peak: peak_hash(snap), temporary: view(snap, :temporary),
                       live: view(snap, :live), kept: kept.size)
  RUBY

  def test_temporary_view_names_the_churn
    r = run_views(TEMPORARY)
    sites = r[:temporary]
    top = sites.first
    msg = JSON.pretty_generate(sites.first(3))
    assert_equal 'Object#churn', top[:function], msg
    assert_equal 'temporary', top[:view]
    assert_within 80 * MIB, bytes_of(sites, 'Object#churn'), 0.2, msg
    assert_operator top[:count], :>=, 0.8 * 20_480, msg
    refute_nil top[:p50], msg
    assert_operator top[:p50], :>, 0, msg
    assert_operator top[:p50], :<=, r[:peak][:threshold], msg
    # The kept strings are live, not temporary.
    assert_operator bytes_of(sites, 'Object#keep_blocks'), :<, MIB / 4, msg
    assert_within 4 * MIB, bytes_of(r[:live], 'Object#keep_blocks'), 0.35
    assert_operator bytes_of(r[:live], 'Object#churn'), :<, MIB / 4
  end

  THRESHOLD = <<~'RUBY'
    def blocks_of_3ms(n)
      n.times do
        s = 'b' * (64 << 10)
        sleep 0.003
        s.clear
      end
    end

    def under_default_threshold
      blocks_of_3ms(100)
    end

    def under_raised_threshold
      blocks_of_3ms(100)
    end

    Memprof.start(sampling_rate_kb: 64)
    under_default_threshold
    Memprof.temporary_threshold = 0.1
    under_raised_threshold
    snap = Memprof.snapshot
    errors = [-1, Float::NAN, Float::INFINITY, '1ms', true, 1e12, Complex(1, 1)].map do |bad|
      Memprof.temporary_threshold = bad
      nil
    rescue Memprof::ArgumentError => e
      e.message
    end
    Memprof.temporary_threshold = nil
    after_reset = Memprof.snapshot.peak.temporary_threshold_seconds
    Memprof.temporary_threshold = Rational(1, 4)
    quarter = Memprof.snapshot.peak.temporary_threshold_seconds
    puts JSON.generate(peak: peak_hash(snap), temporary: view(snap, :temporary),
                       errors: errors, after_reset: after_reset, quarter: quarter)
  RUBY

  def test_temporary_threshold
    r = run_views(THRESHOLD)
    sites = r[:temporary]
    msg = JSON.pretty_generate(sites.first(3))
    assert_in_delta 0.1, r[:peak][:threshold], 1e-9
    refute_empty sites
    assert_includes sites.first[:functions], 'Object#under_raised_threshold', msg
    # 100 strings of 64 KiB + 1 byte.
    assert_within 6.25 * MIB, bytes_of(sites, 'Object#under_raised_threshold'), 0.3, msg
    p50 = sites.first[:p50]
    refute_nil p50, msg
    assert_operator p50, :>=, 0.003, msg
    assert_operator p50, :<=, 0.1, msg
    # Freed after 3 ms under the 1 ms default: not temporary.
    assert_operator bytes_of(sites, 'Object#under_default_threshold'), :<, MIB / 10, msg
    assert_equal 7, r[:errors].compact.size, r[:errors].inspect
    assert_in_delta 0.001, r[:after_reset], 1e-9
    assert_in_delta 0.25, r[:quarter], 1e-9
  end

  LEAKS = <<~'RUBY'
    STORE = []

    def startup_cache
      128.times { STORE << 'c' * (64 << 10) }
    end

    def leak_a_block
      STORE << 'l' * (64 << 10)
    end

    def short_lived
      2.times do
        s = 's' * 4096
        sleep 0.005
        s.clear
      end
    end

    Memprof.start(sampling_rate_kb: 64)
    startup_cache
    began = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    150.times do
      leak_a_block
      short_lived
    end
    leaking = Process.clock_gettime(Process::CLOCK_MONOTONIC) - began
    snap = Memprof.snapshot
    puts JSON.generate(leaks: view(snap, :leaks), leaking: leaking)
  RUBY

  def test_leaks_view_ranks_the_leaker
    r = run_views(LEAKS)
    sites = r[:leaks]
    msg = JSON.pretty_generate(sites.first(3))
    refute_empty sites, 'no leak suspects'
    top = sites.first
    assert_equal 'Object#leak_a_block', top[:function], msg
    assert top[:leak_suspect], msg
    assert_equal 'leaks', top[:view]
    assert(sites.all? { |s| s[:leak_suspect] && s[:leak_rate].positive? }, msg)
    # Each stack is judged on its own samples: the first site carries most of the rate.
    rate = sites.select { |s| s[:functions].include?('Object#leak_a_block') }
                .sum { |s| s[:leak_rate] }
    truth = 150 * ((64 << 10) + 1) / r[:leaking]
    assert_operator top[:leak_rate], :>=, 0.2 * truth, msg
    assert_operator rate, :<=, 1.5 * truth, msg
    assert_nil rank_of(sites, 'Object#startup_cache'), msg
    assert_nil rank_of(sites, 'Object#short_lived'), msg
  end
end
