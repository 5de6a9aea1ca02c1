# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Memprof::Snapshot's Ruby half, and the values it hands out: Frame, Sample, Site, and for
# the views of libmemprof 1.2 Peak, HeapPoint and ViewSite. The C extension defines the class
# and the scalar readers (live_samples, estimated_heap_bytes with _low/_high,
# estimated_count with _low/_high, sampling_rate, timestamp_ns, low_confidence?, site_count,
# release, released?); this file adds stacks as Frame structs (resolved once per stack and
# cached), samples, sites (per view), peak, series, top_allocators and save.
#
# Estimates are plain Integers; the 95 % interval lives in separate _low/_high readers.
# A snapshot is an immutable copy: it does not change when the program allocates, and its
# memory (mapped by the library, outside Ruby's heap) is returned when it is garbage
# collected or at once by #release.

module Memprof
  # One frame of a stack, leaf first. `ruby?` frames come from the Ruby VM (method, file,
  # line; C methods have no file); the others are native (function, and file:line when the
  # object has debug information; `module` is the loaded object's path).
  Frame = Struct.new(:function, :file, :line, :module, :address, :flags, keyword_init: true) do
    def ruby?
      flags.anybits?(Native::FRAME_RUNTIME)
    end

    def inlined?
      flags.anybits?(Native::FRAME_INLINED)
    end

    def unresolved?
      flags.anybits?(Native::FRAME_UNRESOLVED)
    end

    # The stack was cut after this frame (it hit the maximum depth).
    def truncated?
      flags.anybits?(Native::FRAME_TRUNCATED)
    end

    # "file:line:in `method'" for Ruby frames, as in Ruby's backtraces; "function
    # (file:line) [object]" for native ones.
    def to_s
      if ruby?
        file ? "#{file}:#{line}:in `#{function}'" : "#{function} (C method)"
      else
        name = function || format('0x%x', address)
        where = file ? " (#{file}:#{line})" : ''
        obj = self.module ? " [#{File.basename(self.module)}]" : ''
        "#{name}#{where}#{obj}"
      end
    end
  end

  # One live sampled allocation: its exact size, what it stands for (bytes / p(bytes) and
  # 1 / p(bytes)), when it was made (CLOCK_MONOTONIC ns) and its stack.
  Sample = Struct.new(:bytes, :estimated_bytes, :estimated_count, :timestamp_ns, :stack_id,
                      :stack, keyword_init: true)

  # A call site (one distinct stack): estimated live bytes with their interval, live
  # allocations, and what it allocated in total while sampling was active.
  Site = Struct.new(:stack_id, :stack, :live_samples, :estimated_bytes, :estimated_bytes_low,
                    :estimated_bytes_high, :estimated_count, :alloc_samples, :alloc_bytes,
                    :alloc_count, keyword_init: true)

  # A call site as one view sees it (Snapshot#sites(view: ...)): one distinct stack, with the
  # view's estimated bytes and their 95 % interval, allocations (0 in the leaks view), the
  # samples behind them, the lifetimes of its freed samples in seconds (the upper edge of
  # their power-of-4 bucket; nil when none was freed), the leak rate in bytes per second
  # (leaks view; 0.0 otherwise) and two flags. :function, :file and :line name the frame the
  # site is attributed to, as in top_allocators (the innermost Ruby frame with a file).
  ViewSite = Struct.new(:view, :stack_id, :stack, :function, :file, :line, :bytes, :bytes_low,
                        :bytes_high, :count, :samples, :lifetime_p50, :lifetime_p90, :leak_rate,
                        :low_information, :leak_suspect, keyword_init: true) do
    # The estimate rests on little information (a few samples of small blocks): read it as
    # an order of magnitude.
    def low_information?
      low_information
    end

    # Its live samples were allocated at a steady rate through the run.
    def leak_suspect?
      leak_suspect
    end

    # Site's names, so code written for Site reads a ViewSite too.
    def estimated_bytes
      bytes
    end

    def estimated_bytes_low
      bytes_low
    end

    def estimated_bytes_high
      bytes_high
    end
  end

  # The peak of the estimated live heap since sampling first started (Snapshot#peak): bytes
  # with their 95 % interval, allocations and samples live then, when (seconds since the
  # first start), how long the run was up to the snapshot, the bytes allocated in all, and
  # the temporary threshold the temporary view used (seconds).
  Peak = Struct.new(:bytes, :bytes_low, :bytes_high, :count, :samples, :time_seconds,
                    :duration_seconds, :allocated_bytes, :temporary_threshold_seconds,
                    keyword_init: true)

  # One point of the heap over time (Snapshot#series): seconds since the first start, the
  # estimated live bytes then and the estimated bytes allocated up to then. `to_a` gives
  # [time_seconds, live_bytes, allocated_bytes].
  HeapPoint = Struct.new(:time_seconds, :live_bytes, :allocated_bytes, keyword_init: true)

  # One entry of Snapshot#compare_to, in the shape of tracemalloc's StatisticDiff: the site
  # (or file, or stack, by the key), this snapshot's estimated live bytes and allocations
  # there (:size, :count), their change since the older snapshot (:size_diff, :count_diff;
  # estimates both, so a change within a site's interval is noise), and what was allocated
  # there between the two, freed since or not (:allocated_bytes, :allocated_count).
  SiteDiff = Struct.new(:function, :file, :line, :size, :size_diff, :count, :count_diff,
                        :allocated_bytes, :allocated_count, :stack, keyword_init: true)

  class Snapshot
    # The Memprof::Block of the Memprof.profile block this snapshot ended (what the block
    # allocated and left live); nil for other snapshots.
    attr_accessor :block

    # The views #sites ranks call sites by: live now, allocated since sampling began, live
    # at the peak, allocated and freed within the temporary threshold
    # (Memprof.temporary_threshold=), and the survivors of leak suspects.
    VIEWS = {
      live: Native::VIEW_LIVE,
      alloc: Native::VIEW_ALLOC,
      peak: Native::VIEW_PEAK,
      temporary: Native::VIEW_TEMPORARY,
      leaks: Native::VIEW_LEAKS
    }.freeze

    # Output formats of #save, by name: the library's own table (memprof_format_name()).
    FORMATS = Native::FORMATS

    # The sampling rate the samples were taken at, in KiB.
    def sampling_rate_kb
      rate = sampling_rate
      (rate % 1024).zero? ? rate / 1024 : rate / 1024.0
    end

    # The frames of a stack (from a Sample or Site), leaf first, as a frozen Array of Frame.
    def stack(stack_id)
      @stacks ||= {}
      @stacks[stack_id] ||= stack_raw(stack_id).map do |function, file, line, flags, mod, address, _|
        Frame.new(function: function, file: file, line: line, module: mod, address: address,
                  flags: flags).freeze
      end.freeze
    end

    # Every live sample, as an Array of Sample (in no particular order).
    def samples
      Array.new(live_samples) do |i|
        bytes, est_bytes, est_count, ts, stack_id = sample_raw(i)
        Sample.new(bytes: bytes, estimated_bytes: est_bytes, estimated_count: est_count,
                   timestamp_ns: ts, stack_id: stack_id, stack: stack(stack_id))
      end
    end

    # Without `view:`, every call site, largest estimated live bytes first, as an Array of
    # Site; sites with nothing live are included (they show what was allocated and freed).
    #
    # With `view:` (:live, :alloc, :peak, :temporary or :leaks, or the same as Strings; see
    # VIEWS), the sites that view ranks, largest first, as an Array of ViewSite: only those
    # with a non-zero value in it (for :leaks, the leak suspects). Raises
    # Memprof::ArgumentError for an unknown view.
    def sites(view: nil)
      return view_sites(view) unless view.nil?

      @sites ||= Array.new(site_count) do |i|
        id, live, bytes, low, high, count, alloc_samples, alloc_bytes, alloc_count = site_raw(i)
        Site.new(stack_id: id, stack: stack(id), live_samples: live, estimated_bytes: bytes,
                 estimated_bytes_low: low, estimated_bytes_high: high, estimated_count: count,
                 alloc_samples: alloc_samples, alloc_bytes: alloc_bytes,
                 alloc_count: alloc_count).freeze
      end.freeze
    end

    # The peak of the estimated live heap since sampling first started, a frozen Peak. The
    # engine records the per-site picture whenever the estimate climbs more than 1/64 above
    # the last recorded peak, so `bytes` is within about 1.6 % of the highest estimate.
    def peak
      @peak ||= begin
        bytes, low, high, count, samples, time_ns, duration_ns, allocated, threshold_ns = peak_raw
        Peak.new(bytes: bytes, bytes_low: low, bytes_high: high, count: count, samples: samples,
                 time_seconds: time_ns / 1e9, duration_seconds: duration_ns / 1e9,
                 allocated_bytes: allocated,
                 temporary_threshold_seconds: threshold_ns / 1e9).freeze
      end
    end

    # The heap over time: a frozen Array of HeapPoint, oldest first, the last one the
    # snapshot's own. At most about 1,000 points however long the run (neighbours are merged
    # as it grows, keeping the higher one, so the peak stays).
    def series
      @series ||= series_raw.map do |time_ns, live, allocated|
        HeapPoint.new(time_seconds: time_ns / 1e9, live_bytes: live,
                      allocated_bytes: allocated).freeze
      end.freeze
    end

    # The `n` code locations holding the most estimated live bytes, largest first, as
    # Hashes: :function, :file, :line (the innermost Ruby frame with a file; else the
    # innermost Ruby C-method frame; else the first native frame past the allocator),
    # :estimated_bytes (Integer), :estimated_count, :live_samples, :sites (distinct
    # stacks merged into this location) and :stack (the Frames of its largest site).
    def top_allocators(n = 10)
      unless n.is_a?(Integer) && n.positive?
        raise Memprof::ArgumentError,
              "Memprof::Snapshot#top_allocators: n must be a positive Integer (got #{n.inspect})"
      end

      groups = {}
      sites.each do |site|
        next if site.live_samples.zero?

        frame = allocator_frame(site.stack)
        key = frame ? [frame.function, frame.file, frame.line] : [nil, nil, 0]
        g = groups[key] ||= { function: key[0], file: key[1], line: key[2], estimated_bytes: 0,
                              estimated_count: 0, live_samples: 0, sites: 0, stack: site.stack }
        g[:estimated_bytes] += site.estimated_bytes
        g[:estimated_count] += site.estimated_count
        g[:live_samples] += site.live_samples
        g[:sites] += 1 # sites come largest first: :stack is the largest one's
      end
      groups.values.sort_by { |g| -g[:estimated_bytes] }.first(n)
    end

    # What changed since `old`, an earlier snapshot of this process, as SiteDiffs: the
    # counterpart of tracemalloc's Snapshot#compare_to(old, key_type). `key:` groups stacks
    # as tracemalloc does: :lineno by the frame a stack is attributed to (function, file,
    # line; as top_allocators), :filename by its file, :traceback not at all (one entry per
    # distinct stack). Sorted as tracemalloc sorts: by the absolute size change, then size,
    # the absolute count change and count, largest first; unchanged entries with nothing
    # live are left out. Raises Memprof::ArgumentError for an unknown key or an `old` that
    # is not an older Snapshot.
    def compare_to(old, key: :lineno)
      unless %i[lineno filename traceback].include?(key)
        raise Memprof::ArgumentError, 'Memprof::Snapshot#compare_to: key: must be :lineno, ' \
                                      ":filename or :traceback (got #{key.inspect})"
      end
      unless old.is_a?(Snapshot) && old.timestamp_ns <= timestamp_ns
        raise Memprof::ArgumentError, 'Memprof::Snapshot#compare_to: expected an older ' \
                                      "Memprof::Snapshot of this process (got #{old.inspect})"
      end

      before = old.sites.to_h { |s| [s.stack_id, s] }
      groups = {}
      sites.each do |s|
        o = before[s.stack_id]
        g = diff_group(groups, key, s.stack)
        g[:size] += s.estimated_bytes
        g[:count] += s.estimated_count
        g[:size_diff] += s.estimated_bytes - (o ? o.estimated_bytes : 0)
        g[:count_diff] += s.estimated_count - (o ? o.estimated_count : 0)
        g[:allocated_bytes] += s.alloc_bytes - (o ? o.alloc_bytes : 0)
        g[:allocated_count] += s.alloc_count - (o ? o.alloc_count : 0)
      end
      groups.values
            .reject { |g| g[:size].zero? && g[:size_diff].zero? && g[:count_diff].zero? && g[:allocated_bytes].zero? }
            .map { |g| SiteDiff.new(**g).freeze }
            .sort_by { |d| [-d.size_diff.abs, -d.size, -d.count_diff.abs, -d.count] }
    end

    # Writes the snapshot to `path` (String or Pathname). `format:` is :pprof, :speedscope,
    # :collapsed, :text or :html (or the same as Strings); nil chooses by the extension
    # (.pb.gz, .json, .folded/.collapsed, .txt, .html; text otherwise). The file is written
    # to a temporary name and renamed (mode 0600). Returns path. Raises Memprof::IOError when
    # the file cannot be written, Memprof::ArgumentError for an unknown format.
    def save(path, format: nil)
      path = path.to_path if path.respond_to?(:to_path)
      unless path.is_a?(String) && !path.empty?
        raise Memprof::ArgumentError,
              "Memprof::Snapshot#save: path must be a non-empty String (got #{path.inspect})"
      end
      fmt = format_code(format)
      rc = write_raw(path, fmt)
      return path if rc >= 0

      context = "Memprof::Snapshot#save(#{path.inspect})"
      case -rc
      when Errno::EINVAL::Errno, Errno::ENOMEM::Errno, Errno::EOPNOTSUPP::Errno,
           Errno::ESHUTDOWN::Errno
        Memprof.send(:raise_error, rc, context)
      else
        raise Memprof::IOError.new(Memprof.send(:error_message, rc, context, 'cannot write'),
                                   errno: rc)
      end
    end

    # The whole-heap figures as a Hash.
    def to_h
      { live_samples: live_samples, estimated_heap_bytes: estimated_heap_bytes,
        estimated_heap_bytes_low: estimated_heap_bytes_low,
        estimated_heap_bytes_high: estimated_heap_bytes_high,
        estimated_count: estimated_count, estimated_count_low: estimated_count_low,
        estimated_count_high: estimated_count_high, sampling_rate_kb: sampling_rate_kb,
        timestamp_ns: timestamp_ns, low_confidence: low_confidence? }
    end

    def inspect
      return "#<#{self.class} released>" if released?

      "#<#{self.class} live_samples=#{live_samples} estimated_heap_bytes=" \
        "#{estimated_heap_bytes} (#{estimated_heap_bytes_low}..#{estimated_heap_bytes_high}) " \
        "sampling_rate_kb=#{sampling_rate_kb}>"
    end

    private

    def view_sites(view)
      key = view.to_sym if view.is_a?(Symbol) || view.is_a?(String)
      code = VIEWS[key] if key
      unless code
        raise Memprof::ArgumentError,
              "Memprof::Snapshot#sites: unknown view #{view.inspect} (expected one of " \
              "#{VIEWS.keys.map(&:inspect).join(', ')})"
      end

      @view_sites ||= {}
      @view_sites[key] ||= Array.new(view_site_count(code)) do |i|
        id, flags, bytes, low, high, count, samples, p50, p90, rate = view_site_raw(code, i)
        stack = stack(id)
        frame = allocator_frame(stack)
        ViewSite.new(view: key, stack_id: id, stack: stack, function: frame&.function,
                     file: frame&.file, line: frame&.line, bytes: bytes, bytes_low: low,
                     bytes_high: high, count: count, samples: samples,
                     lifetime_p50: p50.zero? ? nil : p50 / 1e9,
                     lifetime_p90: p90.zero? ? nil : p90 / 1e9, leak_rate: rate,
                     low_information: flags.anybits?(Native::SITE_LOW_INFORMATION),
                     leak_suspect: flags.anybits?(Native::SITE_LEAK_SUSPECT)).freeze
      end.freeze
    end

    def format_code(format)
      return Native::FORMAT_AUTO if format.nil?

      code = FORMATS[format.to_sym] if format.is_a?(Symbol) || format.is_a?(String)
      return code if code

      raise Memprof::ArgumentError,
            "Memprof::Snapshot#save: unknown format #{format.inspect} (expected one of " \
            "#{FORMATS.keys.map(&:inspect).join(', ')}, or nil to choose by the extension)"
    end

    def diff_group(groups, key, stack)
      frame = allocator_frame(stack)
      k = frame ? [frame.function, frame.file, frame.line] : [nil, nil, 0]
      k = [nil, k[1], 0] if key == :filename
      k += [stack] if key == :traceback
      groups[k] ||= { function: k[0], file: k[1], line: k[2], size: 0, size_diff: 0, count: 0,
                      count_diff: 0, allocated_bytes: 0, allocated_count: 0, stack: stack }
    end

    def allocator_frame(stack)
      stack.find { |f| f.ruby? && f.file } ||
        stack.find(&:ruby?) ||
        # Allocators and their wrappers never name a site: the library's list.
        stack.find { |f| f.function && !Native.allocator_function?(f.function) } ||
        stack.first
    end
  end
end
