# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Ruby object slots in the Ruby binding's profiles. Ruby 3.1 takes its heap pages from mmap,
# so by default a profile sees only the malloc'ed parts of objects; with
# Memprof.start(objects: true) every object is reported as a 40-byte allocation through the
# VM's NEWOBJ/FREEOBJ events and attributed to the Ruby code that created it. Frees are
# still tracked after stop. Each case runs in a fresh interpreter (the rate is per process).

require_relative 'helper'
require 'json'

class TestMemprofObjects < Minitest::Test
  include MemprofTestHelper

  WORKLOAD = <<~'RUBY'
    require 'json'
    def make_objects(n)
      Array.new(n) { Object.new } # objects: 40 bytes each, plus one 8-byte slot in the array
    end
    Memprof.start(sampling_rate_kb: 64, objects: ARGV[0] == 'objects')
    kept = make_objects(500_000)
    s1 = Memprof.snapshot
    top = s1.top_allocators(1).first
    objects_on = Memprof.stats[:ruby_objects]
    Memprof.stop
    objects_after_stop = Memprof.stats[:ruby_objects]
    kept = nil
    GC.start(full_mark: true, immediate_sweep: true)
    s2 = Memprof.snapshot
    site = ->(s) { s.top_allocators(50).find { |a| a[:line] == 3 && a[:function] == 'Object#make_objects' } }
    puts JSON.generate(top_function: top[:function], top_line: top[:line],
                       at_line: site[s1]&.fetch(:estimated_bytes), after_gc: site[s2]&.fetch(:estimated_bytes),
                       objects_on: objects_on, objects_after_stop: objects_after_stop)
  RUBY

  def run_workload(mode)
    JSON.parse(ruby_script!(WORKLOAD, args: [mode]).lines.last, symbolize_names: true)
  end

  def test_objects_are_reported_and_their_frees_tracked
    r = run_workload('objects')
    msg = r.inspect
    assert_equal 'Object#make_objects', r[:top_function], msg
    assert_equal 3, r[:top_line], msg
    # 500,000 x 40-byte slots + the 4 MB array: 24 MB (about 300 object samples: +-6 %).
    assert_in_delta 24_000_000, r[:at_line], 6_000_000, msg
    assert r[:objects_on]
    refute r[:objects_after_stop], 'stop stops reporting new objects'
    # Freed after stop: the objects and the array leave the live set.
    assert_operator r[:after_gc].to_i, :<, 2_400_000, msg
  end

  def test_without_the_option_only_malloc_is_seen
    r = run_workload('plain')
    msg = r.inspect
    refute r[:objects_on]
    # The array's 4 MB buffer comes from malloc; the 500,000 slots come from mmap'ed pages.
    assert_in_delta 4_000_000, r[:at_line], 1_000_000, msg
  end
end
