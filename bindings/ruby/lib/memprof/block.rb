# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Memprof::Block: what a Memprof.profile block did, as a difference against the heap at its
# entry rather than everything since profiling began (a second block does not report the
# first one's data). Two facts of a snapshot make that exact for the estimator: every site
# (distinct stack) keeps its allocation counters for the life of the process, so what the
# block allocated at a site is the counter at exit minus the counter at entry; and every live
# sample carries its allocation time (CLOCK_MONOTONIC), so what the block left live is the
# live samples allocated after entry. Snapshot#compare_to (snapshot.rb) compares any two
# snapshots in tracemalloc's shape.

module Memprof
  # A site of a block (Block#top_allocators): the frame it is attributed to (as in
  # Snapshot#top_allocators), the bytes the block allocated there that were live at its end
  # with their 95 % interval, their allocations and samples, and what it allocated there in
  # all, freed or not.
  BlockSite = Struct.new(:function, :file, :line, :estimated_bytes, :estimated_bytes_low,
                         :estimated_bytes_high, :estimated_count, :live_samples,
                         :allocated_bytes, :allocated_count, :stack, keyword_init: true)

  # What one Memprof.profile block did (Snapshot#block of the snapshot it returns).
  class Block
    # The snapshot taken when the block ended (the whole heap).
    attr_reader :snapshot

    # `entry_counters`: { stack_id => [alloc_samples, alloc_bytes, alloc_count] } at entry;
    # `entry_ns`: CLOCK_MONOTONIC nanoseconds from which a live sample is the block's.
    def initialize(snapshot, entry_counters, entry_ns)
      @snapshot = snapshot
      @entry = entry_counters
      @entry_ns = entry_ns
    end

    # The live samples the block allocated, as Samples.
    def samples
      @samples ||= @snapshot.samples.select { |s| s.timestamp_ns >= @entry_ns }.freeze
    end

    # Estimated bytes the block allocated that were still live when it ended (Integer).
    def live_bytes
      samples.sum(&:estimated_bytes)
    end

    # 95 % interval of live_bytes: each sample's weight w = bytes / p has variance
    # w * (w - bytes) (Horvitz-Thompson).
    def live_bytes_low
      interval(samples)[0]
    end

    def live_bytes_high
      interval(samples)[1]
    end

    # Estimated allocations the block made that were still live when it ended.
    def live_count
      samples.sum(&:estimated_count).round
    end

    # Estimated bytes the block allocated, freed or not.
    def allocated_bytes
      @snapshot.sites.sum { |s| delta(s)[1] }
    end

    # Estimated allocations the block made, freed or not.
    def allocated_count
      @snapshot.sites.sum { |s| delta(s)[2] }
    end

    # The block's `n` top sites by bytes left live (by: :live) or allocated (by: :allocated),
    # as BlockSites, largest first.
    def top_allocators(n = 10, by: :live)
      unless n.is_a?(Integer) && n.positive?
        raise Memprof::ArgumentError,
              "Memprof::Block#top_allocators: n must be a positive Integer (got #{n.inspect})"
      end
      unless %i[live allocated].include?(by)
        raise Memprof::ArgumentError,
              "Memprof::Block#top_allocators: by: must be :live or :allocated (got #{by.inspect})"
      end

      groups = {}
      @snapshot.sites.each do |site|
        _, bytes, count = delta(site)
        next unless bytes.positive?

        g = group(groups, site.stack)
        g[:allocated_bytes] += bytes
        g[:allocated_count] += count
      end
      samples.each do |s|
        g = group(groups, s.stack)
        g[:estimated_bytes] += s.estimated_bytes
        g[:variance] += s.estimated_bytes * (s.estimated_bytes - s.bytes)
        g[:estimated_count] += s.estimated_count
        g[:live_samples] += 1
      end
      key = by == :live ? :estimated_bytes : :allocated_bytes
      groups.values.select { |g| g[key].positive? }.sort_by { |g| -g[key] }.first(n).map do |g|
        half = 1.959964 * Math.sqrt(g[:variance])
        BlockSite.new(function: g[:function], file: g[:file], line: g[:line],
                      estimated_bytes: g[:estimated_bytes],
                      estimated_bytes_low: [g[:estimated_bytes] - half, 0].max.round,
                      estimated_bytes_high: (g[:estimated_bytes] + half).round,
                      estimated_count: g[:estimated_count].round,
                      live_samples: g[:live_samples], allocated_bytes: g[:allocated_bytes],
                      allocated_count: g[:allocated_count], stack: g[:stack]).freeze
      end
    end

    def inspect
      "#<Memprof::Block allocated_bytes=#{allocated_bytes} live_bytes=#{live_bytes}>"
    end

    private

    # [samples, bytes, count] a site allocated during the block.
    def delta(site)
      before = @entry[site.stack_id] || [0, 0, 0]
      [site.alloc_samples - before[0], site.alloc_bytes - before[1],
       site.alloc_count - before[2]]
    end

    def group(groups, stack)
      frame = @snapshot.send(:allocator_frame, stack)
      key = frame ? [frame.function, frame.file, frame.line] : [nil, nil, 0]
      groups[key] ||= { function: key[0], file: key[1], line: key[2], estimated_bytes: 0,
                        variance: 0, estimated_count: 0.0, live_samples: 0,
                        allocated_bytes: 0, allocated_count: 0, stack: stack }
    end

    def interval(samples)
      est = samples.sum(&:estimated_bytes)
      half = 1.959964 * Math.sqrt(samples.sum { |s| s.estimated_bytes * (s.estimated_bytes - s.bytes) })
      [[est - half, 0].max.round, (est + half).round]
    end
  end
end
