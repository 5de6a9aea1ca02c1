# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# The Ruby binding's errors: every failure raises an exception that includes Memprof::Error
# and is also the standard exception of its kind (Memprof::ArgumentError < ::ArgumentError,
# Memprof::IOError < ::IOError), with a message that names the call, says what was wrong
# and ends with the library's description and errno name; #errno is the library's return
# code. Lifecycle cases run in fresh interpreters (the engine's state is per process).

require_relative 'helper'

class TestMemprofErrors < Minitest::Test
  include MemprofTestHelper

  # Runs `code` in a fresh interpreter; it must raise. Returns [class name, message, errno,
  # is_a?(Memprof::Error)].
  def raised_in_fresh_ruby(code)
    out = ruby_script!(<<~RUBY)
      begin
        #{code}
        puts 'no exception'
      rescue Exception => e
        puts e.class.name, e.message, (e.respond_to?(:errno) ? e.errno.inspect : '-'),
             e.is_a?(Memprof::Error)
      end
    RUBY
    out.lines.map(&:chomp)
  end

  def assert_raised(code, klass, message, errno)
    name, msg, err, tagged = raised_in_fresh_ruby(code)
    assert_equal klass.name, name, "#{code}: #{msg}"
    assert_match message, msg
    assert_equal errno.inspect, err, msg
    assert_equal 'true', tagged
  end

  EBUSY = -Errno::EBUSY::Errno
  ENOTCONN = -Errno::ENOTCONN::Errno
  ESHUTDOWN = -Errno::ESHUTDOWN::Errno
  EALREADY = -Errno::EALREADY::Errno

  def test_stop_before_start
    assert_raised('Memprof.stop', Memprof::StateError,
                  /\AMemprof\.stop: profiling was never started \(libmemprof: .*, ENOTCONN\)\z/, ENOTCONN)
  end

  def test_snapshot_before_start
    assert_raised('Memprof.snapshot', Memprof::StateError,
                  /\AMemprof\.snapshot: the profiler was never started \(call Memprof\.start first\)/,
                  ENOTCONN)
  end

  def test_start_while_active
    assert_raised('Memprof.start; Memprof.start', Memprof::StateError,
                  /\AMemprof\.start: profiling is already active \(call Memprof\.stop first\) \(libmemprof: .*, EBUSY\)\z/,
                  EBUSY)
  end

  def test_stop_while_stopped
    assert_raised('Memprof.start; Memprof.stop; Memprof.stop', Memprof::StateError,
                  /\AMemprof\.stop: profiling is not active \(libmemprof: /, EBUSY)
  end

  def test_a_second_rate
    assert_raised('Memprof.start(sampling_rate_kb: 64); Memprof.stop; ' \
                  'Memprof.start(sampling_rate_kb: 128)', Memprof::StateError,
                  /it is 64 KiB, 128 KiB was asked for/, EALREADY)
    # The same rate, or none, is fine; so is a block with none after a start.
    out = ruby_script!('Memprof.start(sampling_rate_kb: 64); Memprof.stop; ' \
                       'Memprof.start(sampling_rate_kb: 64); Memprof.stop; ' \
                       'p Memprof.profile { }.sampling_rate_kb')
    assert_equal "64\n", out
  end

  def test_profile_while_active_nests_and_leaves_profiling_on
    out = ruby_script!('Memprof.start; s = Memprof.profile { }; p s.block.class, Memprof.state')
    assert_equal "Memprof::Block\n:active\n", out
  end

  def test_everything_after_shutdown
    %w[Memprof.start Memprof.snapshot Memprof.stop].each do |call|
      assert_raised("Memprof.start; Memprof.shutdown; #{call}", Memprof::StateError,
                    /\A#{Regexp.escape(call)}: .*shut down/, ESHUTDOWN)
    end
    assert_raised('Memprof.shutdown; Memprof.profile { }', Memprof::StateError, /shut down/,
                  ESHUTDOWN)
    out = ruby_script!('Memprof.start; s = Memprof.snapshot; Memprof.shutdown; ' \
                       'p Memprof.state, s.live_samples >= 0')
    assert_equal ":shutdown\ntrue\n", out, 'snapshots outlive shutdown'
  end

  def test_bad_rates_are_argument_errors
    [0, -1, 2**31, 'fast', nil.to_a, Float::NAN, Float::INFINITY, 1e-9, Complex(1, 1)].each do |rate|
      e = assert_raises(Memprof::ArgumentError, rate.inspect) do
        Memprof.start(sampling_rate_kb: rate)
      end
      assert_kind_of ::ArgumentError, e
      assert_kind_of Memprof::Error, e
      assert_nil e.errno
      assert_match(/\AMemprof\.start: sampling_rate_kb must be a number of KiB above 0/, e.message)
    end
    refute Memprof.active?
  end

  def test_profile_needs_a_block
    e = assert_raises(Memprof::ArgumentError) { Memprof.profile }
    assert_equal 'Memprof.profile: a block is required', e.message
  end

  def snapshot
    Memprof.profile { 'x' * 1_000_000 }
  end

  def test_save_errors
    snap = snapshot
    e = assert_raises(Memprof::ArgumentError) { snap.save('/tmp/x.out', format: :svg) }
    assert_match(/unknown format :svg \(expected one of :pprof, :speedscope, :collapsed, :text, :html/,
                 e.message)
    assert_raises(Memprof::ArgumentError) { snap.save('/tmp/x.out', format: 3) }
    assert_raises(Memprof::ArgumentError) { snap.save('') }
    assert_raises(Memprof::ArgumentError) { snap.save(nil) }

    e = assert_raises(Memprof::IOError) { snap.save('/nonexistent-dir/p.pb.gz') }
    assert_kind_of ::IOError, e
    assert_kind_of Memprof::Error, e
    assert_equal(-Errno::ENOENT::Errno, e.errno)
    assert_match(%r{\AMemprof::Snapshot#save\("/nonexistent-dir/p\.pb\.gz"\): cannot write \(libmemprof: .*, ENOENT\)\z},
                 e.message)
    Dir.mktmpdir do |dir|
      assert_raises(Memprof::IOError) { snap.save(dir) } # a directory
    end
  end

  def test_released_snapshots
    snap = snapshot
    snap.release
    e = assert_raises(Memprof::StateError) { snap.estimated_heap_bytes }
    assert_equal 'Memprof::Snapshot: this snapshot was released (Snapshot#release)', e.message
    assert_nil e.errno
    assert_raises(Memprof::StateError) { snap.top_allocators }
    assert_raises(Memprof::StateError) { snap.save('/tmp/never-written') }
    refute File.exist?('/tmp/never-written')
  end

  def test_top_allocators_needs_a_positive_count
    snap = snapshot
    [0, -3, 1.5, 'x'].each do |n|
      assert_raises(Memprof::ArgumentError) { snap.top_allocators(n) }
    end
  end

  def test_snapshots_cannot_be_made_directly
    assert_raises(NoMethodError, TypeError) { Memprof::Snapshot.new }
  end
end
