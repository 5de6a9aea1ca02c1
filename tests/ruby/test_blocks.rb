# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Memprof.profile blocks report what the block itself did (Memprof::Block: allocated and
# left live, a difference against the heap at entry), and Snapshot#compare_to compares two
# snapshots per site as tracemalloc's compare_to does. Each check runs in a fresh interpreter
# at 64 KiB, with tolerances of several standard deviations (a 10 MB estimate from ~160
# samples has a relative standard deviation under 8 %).

require_relative 'helper'
require 'json'

class TestMemprofBlocks < Minitest::Test
  include MemprofTestHelper

  SCRIPT = <<~'RUBY'
    def first_block; Array.new(300) { 'a' * 100_000 }; end # 30 MB, kept
    def second_block
      Array.new(100) { 'b' * 100_000 }                      # 10 MB, garbage
      Array.new(200) { 'c' * 50_000 }                       # 10 MB, kept
    end
    kept1 = kept2 = nil
    a = Memprof.profile { kept1 = first_block }
    b = Memprof.profile { kept2 = second_block }
    top = b.block.top_allocators(1).first
    diff = b.compare_to(a)
    puts JSON.generate(
      a_alloc: a.block.allocated_bytes, a_live: a.block.live_bytes,
      b_alloc: b.block.allocated_bytes, b_live: b.block.live_bytes,
      b_low: b.block.live_bytes_low, b_high: b.block.live_bytes_high,
      b_top: [top.function, top.line], whole: b.estimated_heap_bytes,
      diff_first: [diff.first.function, diff.first.size_diff],
      diff_first_block: diff.find { |d| d.function == 'Object#first_block' }&.size_diff,
      kept: kept1.size + kept2.size
    )
  RUBY

  def result
    @result ||= JSON.parse(ruby_script!(SCRIPT + "\n", env: { 'RUBYOPT' => '-rjson' })
                           .lines.last)
  end

  def test_a_block_reports_its_own_allocations_not_the_earlier_blocks
    assert_in_delta 30e6, result['a_alloc'], 6e6
    assert_in_delta 30e6, result['a_live'], 6e6
    # The second block allocated ~20 MB; the whole heap holds the first block's 30 MB too.
    assert_in_delta 20e6, result['b_alloc'], 5e6
    assert_operator result['whole'], :>, 45e6
  end

  def test_a_block_reports_what_it_left_live
    # 10 MB kept, plus whatever of the 10 MB of garbage the GC has not collected yet.
    assert_operator result['b_live'], :>=, 7e6
    assert_operator result['b_live'], :<=, 23e6
    assert_operator result['b_low'], :<=, result['b_live']
    assert_operator result['b_high'], :>=, result['b_live']
    assert_equal 'Object#second_block', result['b_top'][0]
  end

  def test_compare_to_puts_the_site_that_grew_first
    assert_equal 'Object#second_block', result['diff_first'][0]
    assert_operator result['diff_first'][1], :>, 4e6
    # The first block's site did not change between the two snapshots.
    assert_in_delta 0, result['diff_first_block'], 3e6
    assert_equal 500, result['kept']
  end
end
