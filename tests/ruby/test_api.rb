# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# The Ruby binding's API: the lifecycle (start, stop, snapshot, stats, shutdown, in a fresh
# interpreter), the block form Memprof.profile, Snapshot's figures (plain Integers with
# separate _low/_high), samples, sites and stacks as structs, top_allocators' hashes, and
# save in every format, by name and by extension. In-process tests all use Memprof.profile
# at its default rate, so they can run in any order.

require_relative 'helper'
require 'json'
require 'pathname'

class TestMemprofAPI < Minitest::Test
  include MemprofTestHelper

  def make_buffers(n, size)
    Array.new(n) { 'z' * size }
  end

  # 400 strings of 100,000 characters (~40 MB) kept by the profiled block. Earlier tests'
  # buffers are collected first; the exact figure is checked in a fresh interpreter
  # (test_acceptance.rb), since garbage not yet collected is live for a heap profiler.
  def profile_buffers
    GC.start
    kept = nil
    snap = Memprof.profile { kept = make_buffers(400, 100_000) }
    [snap, kept]
  end

  def test_lifecycle_in_a_fresh_interpreter
    out = ruby_script!(<<~'RUBY')
      states = [Memprof.state]
      Memprof.start(sampling_rate_kb: 128)
      states << Memprof.state << Memprof.active?
      keep = Array.new(100) { "a" * 100_000 }
      s = Memprof.stats
      Memprof.stop
      states << Memprof.state << Memprof.active?
      snap = Memprof.snapshot
      Memprof.start                       # restart keeps the rate
      states << Memprof.sampling_rate_kb
      Memprof.stop
      Memprof.shutdown
      Memprof.shutdown                    # harmless
      states << Memprof.state
      puts states.inspect, s[:sampling_rate], s[:sampling_rate_kb], s[:total_samples] > 0,
           snap.live_samples > 0, snap.estimated_heap_bytes > 5_000_000, snap.released?,
           keep.size
    RUBY
    lines = out.lines.map(&:chomp)
    assert_equal '[:uninitialized, :active, true, :stopped, false, 128, :shutdown]', lines[0]
    assert_equal %w[131072 128 true true true false 100], lines[1..]
  end

  def test_default_rate_is_512_kib
    out = ruby_script!('Memprof.start; p Memprof.sampling_rate_kb, Memprof.stats[:sampling_rate]')
    assert_equal "512\n524288\n", out
  end

  def test_profile_returns_a_snapshot_of_what_the_block_kept
    snap, kept = profile_buffers
    assert_instance_of Memprof::Snapshot, snap
    refute Memprof.active?, 'profile stops sampling'
    assert_equal 400, kept.size
    assert_equal 64, snap.sampling_rate_kb
    # At least the ~40 MB kept (the 95 % interval of ~600 samples is about +-8 %).
    assert_operator snap.estimated_heap_bytes, :>, 32_000_000
  end

  def test_profile_stops_when_the_block_raises
    assert_raises(ZeroDivisionError) { Memprof.profile { 1 / 0 } }
    refute Memprof.active?
  end

  def test_estimates_are_integers_with_an_interval
    snap, = profile_buffers
    %i[estimated_heap_bytes estimated_heap_bytes_low estimated_heap_bytes_high live_samples
       estimated_count estimated_count_low estimated_count_high sampling_rate
       timestamp_ns].each do |m|
      assert_kind_of Integer, snap.public_send(m), m
    end
    assert_operator snap.estimated_heap_bytes_low, :<=, snap.estimated_heap_bytes
    assert_operator snap.estimated_heap_bytes, :<=, snap.estimated_heap_bytes_high
    assert_operator snap.live_samples, :>=, 100
    refute snap.low_confidence?
    h = snap.to_h
    assert_equal snap.estimated_heap_bytes, h[:estimated_heap_bytes]
    assert_match(/live_samples=\d+ estimated_heap_bytes=\d+/, snap.inspect)
  end

  def test_samples_and_sites_carry_resolved_stacks
    snap, = profile_buffers
    samples = snap.samples
    assert_equal snap.live_samples, samples.size
    s = samples.find { |x| x.bytes == 100_001 }
    refute_nil s, 'a sample of one 100,000-character string buffer'
    assert_operator s.estimated_bytes, :>=, s.bytes
    assert_operator s.estimated_count, :>=, 1.0
    assert(s.stack.all?(Memprof::Frame))
    assert(s.stack.any? { |f| f.ruby? && f.function.end_with?('#make_buffers') && f.file == __FILE__ })
    assert_same s.stack, snap.stack(s.stack_id), 'stacks are resolved once per snapshot'

    sites = snap.sites
    assert_equal snap.site_count, sites.size
    assert_equal sites.map(&:estimated_bytes).sort.reverse, sites.map(&:estimated_bytes)
    top = sites.first
    assert_operator top.estimated_bytes_low, :<=, top.estimated_bytes
    assert_operator top.alloc_bytes, :>=, top.estimated_bytes
  end

  def test_frames_print_like_ruby_backtraces
    snap, = profile_buffers
    stack = snap.top_allocators(1).first[:stack]
    ruby = stack.find { |f| f.ruby? && f.file }
    assert_equal "#{ruby.file}:#{ruby.line}:in `#{ruby.function}'", ruby.to_s
    cmethod = stack.find { |f| f.ruby? && f.file.nil? }
    assert_equal 'String#* (C method)', cmethod.to_s
    native = stack.reject(&:ruby?)
    refute_empty native
    assert(native.all? { |f| f.module && f.address.positive? })
  end

  def test_top_allocators_names_the_method_file_and_line
    snap, = profile_buffers
    top = snap.top_allocators(3)
    assert_operator top.size, :<=, 3
    first = top.first
    assert_equal %i[function file line estimated_bytes estimated_count live_samples sites
                    stack].sort, first.keys.sort
    assert_equal 'TestMemprofAPI#make_buffers', first[:function]
    assert_equal __FILE__, first[:file]
    # The "'z' * size" line: the one after `def make_buffers`.
    assert_equal method(:make_buffers).source_location[1] + 1, first[:line]
    assert_kind_of Integer, first[:estimated_bytes]
    assert_equal top.map { |a| -a[:estimated_bytes] }.sort, top.map { |a| -a[:estimated_bytes] }
  end

  def test_save_in_every_format
    snap, = profile_buffers
    Dir.mktmpdir do |dir|
      checks = {
        pprof: ->(b) { assert_equal "\x1f\x8b".b, b[0, 2].b, 'gzip' },
        speedscope: ->(b) { assert JSON.parse(b).key?('profiles') },
        collapsed: ->(b) { assert_match(/^\S.*make_buffers.* \d+$/, b) },
        text: ->(b) { assert_match(/make_buffers/, b) },
        html: ->(b) { assert_match(/<html/i, b) }
      }
      checks.each do |format, check|
        path = File.join(dir, "by-name-#{format}")
        assert_equal path, snap.save(path, format: format)
        check.call(File.binread(path))
        path2 = File.join(dir, "by-string-#{format}")
        snap.save(Pathname.new(path2), format: format.to_s)
        assert_equal File.size(path), File.size(path2) unless format == :pprof
      end
      { 'p.pb.gz' => :pprof, 's.json' => :speedscope, 'c.folded' => :collapsed,
        'c.collapsed' => :collapsed, 't.txt' => :text, 'h.html' => :html }.each do |name, format|
        path = File.join(dir, name)
        snap.save(path)
        checks[format].call(File.binread(path))
      end
      assert_equal 0o600, File.stat(File.join(dir, 'p.pb.gz')).mode & 0o777
    end
  end

  def test_release_frees_the_snapshot
    snap, = profile_buffers
    snap.release
    assert snap.released?
    assert_equal '#<Memprof::Snapshot released>', snap.inspect
    snap.release # again: harmless
  end

  def test_stats_report_the_engine_and_the_frame_source
    profile_buffers
    s = Memprof.stats
    assert_includes %i[stopped active], s[:state]
    assert_equal 64, s[:sampling_rate_kb]
    assert_operator s[:total_samples], :>, 0
    assert_operator s[:ruby_frames_interned], :>, 0
    assert_operator s[:ruby_captures], :>, 0
    assert_kind_of String, s[:ruby_eval_loop]
    assert_equal false, s[:ruby_objects]
  end

  def test_version
    assert_match(/\A\d+\.\d+\.\d+/, Memprof::VERSION)
  end
end
