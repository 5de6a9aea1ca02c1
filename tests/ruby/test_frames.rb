# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Ruby frames in the Ruby binding's stacks: method, file and line from rb_profile_frames,
# merged in place of the VM's eval loop ("trim and sandwich"), one group of Ruby frames per
# eval-loop invocation when a C method calls back into Ruby; threads; GC.compact (the frame
# table pins what it holds, so names stay right); fork; and the exit-time dump of the
# LD_PRELOAD plugin (the frames are resolved by the binding's exit finalizer, before the VM
# is torn down).

require_relative 'helper'

# Allocating methods with known names and lines.
module FrameFixtures
  def self.inner
    'y' * 300_000 # INNER
  end

  def self.outer
    [1].map { inner }.first # OUTER
  end

  LINES = File.readlines(__FILE__).each_with_index.to_h do |l, i|
    [l[/# (INNER|OUTER)$/, 1], i + 1]
  end.freeze
end

class TestMemprofFrames < Minitest::Test
  include MemprofTestHelper

  # The stack of the largest site whose innermost Ruby frame is FrameFixtures.inner.
  def inner_stack(snap)
    site = snap.sites.find do |s|
      f = s.stack.find { |fr| fr.ruby? && fr.file }
      f && f.function == 'FrameFixtures.inner'
    end
    refute_nil site, 'a site allocated by FrameFixtures.inner'
    site.stack
  end

  def names(stack)
    stack.map { |f| f.function || '?' }
  end

  def setup
    GC.start # earlier tests' buffers are garbage: keep them out of this test's snapshot
  end

  def test_ruby_frames_replace_the_eval_loop
    kept = nil
    snap = Memprof.profile { kept = Array.new(10) { FrameFixtures.outer } }
    stack = inner_stack(snap)
    n = names(stack)
    i_times = n.index('String#*')
    i_inner = n.index('FrameFixtures.inner')
    i_block = n.index('FrameFixtures.outer')
    i_map = n.index('Array#map')
    i_outer = n.rindex('FrameFixtures.outer')
    msg = stack.map(&:to_s).join("\n")
    # Leaf first: String#* called by inner, called by the block in outer (run by its own eval
    # loop, which Array#map's C code started), Array#map called by outer.
    order = [i_times, i_inner, i_block, i_map, i_outer]
    assert_equal order.sort, order, msg
    assert_equal i_times + 1, i_inner, msg
    assert_equal i_inner + 1, i_block, msg
    assert_operator i_block, :<, i_outer, msg
    assert_equal FrameFixtures::LINES['INNER'], stack[i_inner].line
    assert_equal FrameFixtures::LINES['OUTER'], stack[i_block].line
    assert_equal __FILE__, stack[i_inner].file
    # The C code between the two eval loops stays, between their groups of Ruby frames.
    between = n[(i_block + 1)...i_map]
    assert_includes between, 'rb_yield', msg
    assert_equal 'callee of rb_vm_exec', Memprof.stats[:ruby_eval_loop]
    # On Debian's libruby the eval loop (vm_exec_core) has no symbol; what replaced it was
    # called by rb_vm_exec, which follows each group.
    assert_equal 'rb_vm_exec', n[i_block + 1], msg
    # The outermost Ruby frame is the script's <main>.
    assert(stack.any? { |f| f.ruby? && f.function == '<main>' }, msg)
    assert_equal kept.size, 10
  end

  def test_threads_have_their_own_ruby_stacks
    kept = nil
    snap = Memprof.profile { kept = Thread.new { Array.new(5) { FrameFixtures.outer } }.value }
    # Blocks carry their method's label, so the thread's block shows as this test method.
    label = "#{self.class}##{name}"
    stacks = snap.sites.map(&:stack).select do |st|
      n = names(st)
      n.include?('FrameFixtures.inner') && n.include?(label)
    end
    refute_empty stacks
    stacks.each do |st|
      # The thread's Ruby stack ends with its block: the main thread's frames (the block is
      # created under Memprof.profile) are not in it.
      refute_includes names(st), 'Memprof.profile', st.map(&:to_s).join("\n")
      assert_equal label, st.select(&:ruby?).last.function
    end
    assert_equal 5, kept.size
  end

  def test_names_survive_gc_compact
    skip 'GC.compact not available' unless GC.respond_to?(:compact)
    kept = nil
    snap1 = Memprof.profile { kept = Array.new(5) { FrameFixtures.outer } }
    GC.compact
    GC.compact
    snap2 = Memprof.profile { kept += Array.new(5) { FrameFixtures.outer } }
    [snap1, snap2].each do |snap|
      n = names(inner_stack(snap))
      assert_includes n, 'FrameFixtures.inner'
      assert_includes n, 'Array#map'
    end
    assert_equal 10, kept.size
  end

  def test_fork_child_profiles
    skip 'no fork' unless Process.respond_to?(:fork)
    Memprof.profile { nil } # initialize in the parent
    rd, wr = IO.pipe
    pid = fork do
      rd.close
      kept = nil
      snap = Memprof.profile { kept = Array.new(5) { FrameFixtures.outer } }
      wr.puts names(inner_stack(snap)).include?('FrameFixtures.outer'), kept.size
      wr.close
      exit!(0)
    end
    wr.close
    out = rd.read
    Process.wait(pid)
    assert $?.success?
    assert_equal "true\n5\n", out
  end

  def test_exit_time_dump_of_the_preload_plugin_has_ruby_frames
    preload = ENV['MEMPROF_TEST_PRELOAD']
    skip 'MEMPROF_TEST_PRELOAD not set (run through meson test)' unless preload && File.exist?(preload)
    Dir.mktmpdir do |dir|
      out = File.join(dir, 'exit.collapsed')
      script = File.join(dir, 'exit_script.rb')
      File.write(script, <<~RUBY)
        def build_strings = Array.new(100) { 'x' * 70_000 }
        $keep = build_strings
        at_exit { $late = Array.new(20) { 'late' * 20_000 } } # allocates after loading
      RUBY
      _, err, status = ruby_script(path: script,
                                   env: { 'LD_PRELOAD' => preload, 'MEMPROF_RATE' => '65536',
                                          'MEMPROF_OUTPUT' => out })
      assert status.success?, err
      text = File.read(out)
      # The line ends at the site, the innermost Ruby frame (doc/guide.md, "Site names").
      assert_match(/;Object#build_strings;String#\* \d+$/, text)
    end
  end
end
