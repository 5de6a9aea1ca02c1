# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Memprof: the Ruby binding of libmemprof, a sampling heap profiler. It tells which Ruby
# code holds how much live memory, cheaply enough to leave on: allocations are sampled on
# average once per `sampling_rate_kb` KiB allocated, each sample records its native stack
# with the Ruby frames (method, file, line) merged in place of the VM's eval loop, and a
# snapshot turns the samples that are still live into unbiased estimates.
#
#   require 'memprof'
#   Memprof.start(sampling_rate_kb: 512)      # no LD_PRELOAD needed
#   ... run the program ...
#   snap = Memprof.snapshot
#   snap.estimated_heap_bytes                  # Integer; _low/_high: 95 % interval
#   snap.top_allocators(5).each { |a| puts "#{a[:estimated_bytes]} #{a[:function]} #{a[:file]}:#{a[:line]}" }
#   snap.save('heap.pb.gz')                    # format from the extension, or format: :pprof
#   snap.peak.bytes; snap.series               # the peak, the heap over time
#   snap.sites(view: :peak).first(3)           # also :live, :alloc, :temporary, :leaks
#   Memprof.stop
#
#   snap = Memprof.profile(sampling_rate_kb: 64) { build_index }
#   snap.block.allocated_bytes; snap.block.live_bytes  # what the block allocated, and kept
#   snap.compare_to(older_snapshot).first(5)           # per-site changes (tracemalloc's)
#
# What a profile sees (Debian's Ruby 3.1):
# - Everything Ruby and its extensions allocate with malloc, calloc, realloc,
#   posix_memalign, ...: string and array buffers, hash tables, iseqs, extension data. The
#   library patches the allocator slots (GOT) of every loaded object at Memprof.start, and
#   of objects loaded later.
# - Ruby object slots (40 bytes each) only with `objects: true`: Ruby 3.1 takes its heap
#   pages from mmap, not malloc, so the hooks never see them; the option reports each
#   object through the VM's NEWOBJ/FREEOBJ events instead (an object stands for 40 bytes,
#   attributed to the Ruby code that created it). It makes every object allocation take the
#   VM's slower hooked path, so it is off by default (see bench/ruby_overhead.rb).
# - Not seen: the heap pages themselves and other mmap'ed memory (thread and fiber stacks,
#   large malloc blocks are seen since they go through malloc even when glibc maps them),
#   allocations made before Memprof.start (only their frees are looked up), and memory of the
#   dynamic loader.
# - Ruby frames come from the thread that allocates while it holds the GVL. Allocations
#   made without the GVL (inside blocking regions, by native threads) and by the GC itself
#   have native frames only. Blocks are shown under their method's name (rb_profile_frames
#   reports the method entry); C methods (String#*, Array#each) appear as Ruby frames
#   without a file.
#
# The sampling rate is fixed for the process by the first start (the C engine is
# initialized once); `sampling_rate_kb: nil` means "the default if not yet initialized,
# else the current rate", and an explicit different rate raises Memprof::StateError.
# Errors raise exceptions that include Memprof::Error (memprof/errors.rb).

require 'monitor'
require 'memprof/errors'
require 'memprof/memprof_ext'
require 'memprof/snapshot'
require 'memprof/block'

module Memprof
  # libmemprof's version (the loaded library's).
  VERSION = Native.library_version

  # Memprof.start's default rate, in KiB (the library's default, 512 KiB).
  DEFAULT_SAMPLING_RATE_KB = Native::DEFAULT_SAMPLING_RATE / 1024

  # Memprof.profile's default rate, in KiB: a block is usually short, so sample more.
  DEFAULT_PROFILE_SAMPLING_RATE_KB = 64

  # Largest rate the library accepts (2**40 bytes), in KiB.
  MAX_SAMPLING_RATE_KB = 2**30

  @lock = Monitor.new

  class << self
    # Starts sampling allocations. The first call initializes the engine at
    # `sampling_rate_kb` (KiB, Integer or Float; nil = 512); later calls (after stop) keep
    # that rate. `objects: true` also reports Ruby object slots (see the file comment).
    # Returns nil. Raises Memprof::StateError if already active, after shutdown, or for a
    # rate different from the one in force; Memprof::ArgumentError for a bad rate. Under
    # `memprof run` or `memprof attach` it joins their profile instead (see join).
    def start(sampling_rate_kb: nil, objects: false)
      @lock.synchronize do
        return nil if join(sampling_rate_kb, objects, 'Memprof.start')

        initialize_engine(sampling_rate_kb, DEFAULT_SAMPLING_RATE_KB, 'Memprof.start')
        check(Native.start, 'Memprof.start',
              -Errno::EBUSY::Errno => 'profiling is already active (call Memprof.stop first)')
        Native.objects_enable(object_slot_size) if objects
        nil
      end
    end

    # Joins the profile that `memprof run` (the preload plugin) or `memprof attach` runs in
    # this process, silently: called by memprof run's Ruby bootstrap. Returns true if it
    # joined, false if there is no such profile.
    def join_running_profile
      @lock.synchronize { Native.state == :active && Native.start == Native::JOINED }
    end

    # Stops sampling new allocations. Frees keep being tracked, so a later snapshot shows
    # what is still live. Returns nil; raises Memprof::StateError when not active.
    def stop
      @lock.synchronize do
        check(Native.stop, 'Memprof.stop',
              -Errno::EBUSY::Errno => 'profiling is not active',
              -Errno::ENOTCONN::Errno => 'profiling was never started')
        Native.objects_pause
        nil
      end
    end

    # A Memprof::Snapshot of the samples live now (while active or after stop).
    def snapshot
      Native.snapshot
    end

    # The engine's statistics as a Hash with Symbol keys (state: :uninitialized,
    # :initialized, :active, :stopped or :shutdown; sampling_rate in bytes and
    # sampling_rate_kb; sample, stack and table counters; ruby_* counters of the Ruby frame
    # source). Works in every state.
    def stats
      h = Native.stats
      h[:sampling_rate_kb] = kib(h[:sampling_rate])
      h
    end

    # Sets the lifetime under which a freed allocation counts as temporary (the :temporary
    # view of Snapshot#sites), in seconds (Integer or Float); 0 or nil restores the default,
    # 1 ms. It applies to frees from then on, in any state, for the whole process; a
    # snapshot's peak.temporary_threshold_seconds says which threshold was in force. Raises
    # Memprof::ArgumentError unless it is a finite number from 0 up to about 584 years
    # (2**64 ns).
    def temporary_threshold=(seconds)
      ns = seconds.nil? ? 0 : threshold_ns(seconds)
      check(Native.set_temporary_threshold(ns), 'Memprof.temporary_threshold=')
    end

    # The engine state as a Symbol (see stats).
    def state
      Native.state
    end

    # Whether allocations are being sampled.
    def active?
      Native.state == :active
    end

    # The sampling rate in force, in KiB, or nil before the first start.
    def sampling_rate_kb
      rate = Native.stats[:sampling_rate]
      rate.zero? ? nil : kib(rate)
    end

    # Ends profiling for the life of the process (one-way; later calls raise
    # Memprof::StateError). Snapshots already taken stay usable. Calling it again is
    # harmless. Returns nil.
    def shutdown
      @lock.synchronize { Native.shutdown }
      nil
    end

    # Profiles a block: starts sampling (rate as for start, nil = 64 KiB when the engine is
    # fresh) unless it is already active (an outer block, Memprof.start, or memprof run,
    # which it joins), notes the heap at entry, runs the block, takes a snapshot when it
    # returns, stops sampling if it started it, and returns the snapshot. The snapshot's
    # #block (a Memprof::Block) tells what the block itself allocated and left live, a
    # difference against its entry: allocated_bytes, live_bytes, top_allocators. The
    # block's own value is discarded. Sampling is stopped even if the block raises (the
    # exception propagates).
    def profile(sampling_rate_kb: nil, objects: false)
      unless block_given?
        raise Memprof::ArgumentError, 'Memprof.profile: a block is required'
      end

      started = false
      @lock.synchronize do
        if Native.state == :active
          unless join(sampling_rate_kb, objects, 'Memprof.profile')
            initialize_engine(sampling_rate_kb, DEFAULT_PROFILE_SAMPLING_RATE_KB,
                              'Memprof.profile')
            Native.objects_enable(object_slot_size) if objects
          end
        else
          initialize_engine(sampling_rate_kb, DEFAULT_PROFILE_SAMPLING_RATE_KB,
                            'Memprof.profile')
          start(objects: objects)
          started = true
        end
      end
      begin
        entry = entry_counters
        entry_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
        yield
        snap = snapshot
        snap.block = Block.new(snap, entry, entry_ns)
        snap
      ensure
        if started
          @lock.synchronize do
            if Native.state == :active
              Native.stop
              Native.objects_pause
            end
          end
        end
      end
    end

    private

    # Every site's allocation counters now: { stack_id => [samples, bytes, count] }, read
    # without resolving any stack.
    def entry_counters
      snap = Native.snapshot
      counters = {}
      snap.site_count.times do |i|
        id, _, _, _, _, _, samples, bytes, count = snap.send(:site_raw, i)
        counters[id] = [samples, bytes, count]
      end
      snap.release
      counters
    end

    # Under memprof run (the preload plugin) or memprof attach, Memprof.start and
    # Memprof.profile join that profile: its rate holds (said once, on standard error), and
    # it is written by whoever started it. Returns true if it joined.
    def join(rate_kb, objects, context)
      return false unless Native.state == :active && Native.start == Native::JOINED

      rate_bytes(rate_kb, context) unless rate_kb.nil?
      unless @joined_said
        @joined_said = true
        warn "#{context}: joined the running profile (memprof run, the preload plugin or " \
             "memprof attach) at its sampling rate, #{kib(Native.stats[:sampling_rate])} KiB; " \
             'it is written by whoever started it'
      end
      Native.objects_enable(object_slot_size) if objects
      true
    end

    # Initializes the engine if needed and checks an explicit rate against the one in force.
    def initialize_engine(rate_kb, default_kb, context)
      bytes = rate_kb.nil? ? nil : rate_bytes(rate_kb, context)
      case Native.state
      when :uninitialized
        rc = Native.init(bytes || default_kb * 1024)
        check(rc, context) unless rc == -Errno::EALREADY::Errno # lost a race: fine
      when :shutdown
        raise StateError.new("#{context}: the profiler was shut down (Memprof.shutdown " \
                             'is final for the process)', errno: -Errno::ESHUTDOWN::Errno)
      end
      return if bytes.nil?

      current = Native.stats[:sampling_rate]
      return if current == bytes

      raise StateError.new("#{context}: the sampling rate is fixed once the profiler is " \
                           "initialized: it is #{kib(current)} KiB, #{rate_kb} KiB was " \
                           'asked for (pass sampling_rate_kb: nil to keep it)',
                           errno: -Errno::EALREADY::Errno)
    end

    def rate_bytes(rate_kb, context)
      unless rate_kb.is_a?(Numeric) && rate_kb.real? && rate_kb.positive? &&
             rate_kb <= MAX_SAMPLING_RATE_KB && (rate_kb * 1024).round >= 1
        raise Memprof::ArgumentError, "#{context}: sampling_rate_kb must be a number of KiB " \
                                      "above 0 and up to #{MAX_SAMPLING_RATE_KB} " \
                                      "(got #{rate_kb.inspect})"
      end
      (rate_kb * 1024).round
    end

    def threshold_ns(seconds)
      unless seconds.is_a?(Numeric) && seconds.real? && seconds >= 0 &&
             seconds < 2**64 / 1e9 # also refuses NaN
        raise Memprof::ArgumentError, 'Memprof.temporary_threshold=: seconds must be a ' \
                                      "number from 0 to #{2**64 / 1e9} or nil " \
                                      "(got #{seconds.inspect})"
      end
      ns = [(seconds * 1_000_000_000).round, 2**64 - 1].min
      # A positive threshold under 1 ns must not mean "the default".
      ns.zero? && seconds.positive? ? 1 : ns
    end

    def kib(bytes)
      (bytes % 1024).zero? ? bytes / 1024 : bytes / 1024.0
    end

    def object_slot_size
      GC::INTERNAL_CONSTANTS.fetch(:RVALUE_SIZE, 40)
    rescue NameError
      40
    end

    # Raises for a negative library return code, with an optional hint per errno value.
    def check(rc, context, hints = {})
      return rc if rc >= 0

      raise_error(rc, context, hints[rc])
    end

    # Maps a library return code to an exception; also called by the C extension.
    def raise_error(rc, context, hint = nil)
      errno = -rc
      klass = case errno
              when Errno::EBUSY::Errno, Errno::ENOTCONN::Errno, Errno::ESHUTDOWN::Errno,
                   Errno::EALREADY::Errno
                StateError
              when Errno::EINVAL::Errno then Memprof::ArgumentError
              when Errno::EOPNOTSUPP::Errno then UnsupportedError
              else LibraryError
              end
      hint ||= case errno
               when Errno::ENOTCONN::Errno
                 'the profiler was never started (call Memprof.start first)'
               when Errno::ESHUTDOWN::Errno
                 'the profiler was shut down'
               end
      raise klass.new(error_message(rc, context, hint), errno: rc)
    end

    def error_message(rc, context, hint)
      name = Errno.constants.find { |c| Errno.const_get(c)::Errno == -rc rescue false }
      detail = "libmemprof: #{Native.strerror(rc)}#{name ? ", #{name}" : ''}"
      "#{context}: #{hint || 'failed'} (#{detail})"
    end
  end
end
