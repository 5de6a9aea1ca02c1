# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Overhead of the Ruby binding on an allocation-heavy Ruby workload: the same workload in
# fresh interpreters, alternately without the binding and with Memprof.start at the default
# rate (512 KiB), in pairs; each run times only the workload (after a warm-up, excluding
# start-up) in process CPU time (CLOCK_PROCESS_CPUTIME_ID: the profiler's cost is CPU work,
# and CPU time is far less disturbed than wall time by other jobs on a shared machine),
# each pair gives a ratio profiled / plain, and the median ratio is printed (target:
# <= 1.03). Alternating pairs cancel slow drifts; the median discards the pairs a neighbour
# disturbed anyway (cache and frequency effects). The ratio of the fastest runs of each kind
# is printed too: on a busy machine the least disturbed runs are the best estimate of the
# true cost. A benchmark, not a test: nothing is asserted.
#
#   LD_LIBRARY_PATH=build/src ruby -I bindings/ruby/lib -I build/bindings/ruby/ext \
#       bench/ruby_overhead.rb [--pairs N] [--rate KB] [--objects] [--iterations N]
#
# --objects also measures Memprof.start(objects: true) (Ruby object slots reported through
# the VM's NEWOBJ/FREEOBJ hooks), as a third run in each round.
#
# --instructions counts instructions instead, under valgrind's cachegrind (no cache
# simulation; about 40x slower, and deterministic to 0.01 % run to run): each mode runs the
# warm-up alone and the warm-up plus the workload, and the ratio of the differences is the
# instruction overhead of the workload. It misses cache effects, but not the noise of a
# shared machine, where the timed ratios can swing by +-10 % from pair to pair.

require 'optparse'
require 'rbconfig'

# The workload: strings, arrays and hashes of mixed sizes, built, transformed and dropped,
# with a working set that stays around ~30 MB (the kind of churn a web request or a batch
# job makes).
def workload(scale)
  keep = []
  scale.times do |round|
    words = Array.new(20_000) { |i| "w#{i}-#{round}" * (1 + (i % 7)) }
    counts = Hash.new(0)
    words.each { |w| counts[w[0, 6]] += w.size }
    text = words.join(' ')
    parts = text.split(' ').map!(&:upcase)
    parts.sort!
    rows = parts.each_slice(8).map { |s| { key: s.first, values: s, size: s.sum(&:size) } }
    big = 'x' * (100_000 + (round % 10) * 50_000)
    keep << [rows.last(500), big, counts.size]
    keep.shift if keep.size > 20
  end
  keep.size
end

def child(mode, iterations)
  if mode != 'plain'
    require 'memprof'
    Memprof.start(objects: mode == 'objects')
  end
  workload(5) # warm-up: heap grown, methods cached
  t0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  workload(iterations)
  t1 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  puts t1 - t0
end

opts = { pairs: 11, objects: false, iterations: 60, instructions: false }
OptionParser.new do |o|
  o.on('--pairs N', Integer, 'rounds of alternating runs (default 11)') { |v| opts[:pairs] = v }
  o.on('--iterations N', Integer, 'workload rounds per run (default 60)') { |v| opts[:iterations] = v }
  o.on('--objects', 'also measure objects: true') { opts[:objects] = true }
  o.on('--instructions', 'count instructions with valgrind (deterministic)') { opts[:instructions] = true }
  o.on('--child MODE', %w[plain memprof objects]) { |v| opts[:child] = v }
end.parse!

if opts[:child]
  child(opts[:child], opts[:iterations])
  exit
end

# The binding is found where this interpreter found it (-I options or RUBYLIB).
includes = $LOAD_PATH.select { |d| File.exist?(File.join(d, 'memprof.rb')) || Dir.exist?(File.join(d, 'memprof')) }
                     .flat_map { |d| ['-I', d] }
env = { 'LD_PRELOAD' => nil, 'MEMPROF_START' => nil, 'MALLOC_PERTURB_' => nil }

run = lambda do |mode|
  out = IO.popen(env, [RbConfig.ruby, *includes, __FILE__, '--child', mode,
                       '--iterations', opts[:iterations].to_s], &:read)
  raise "child #{mode} failed" unless $?.success?

  Float(out.lines.last)
end

begin
  run.call('memprof') # fail early if the binding cannot be loaded
rescue StandardError => e
  abort "ruby_overhead: #{e.message} (is the binding on the load path, libmemprof on LD_LIBRARY_PATH?)"
end

modes = opts[:objects] ? %w[plain memprof objects] : %w[plain memprof]

if opts[:instructions]
  iterations = [opts[:iterations], 20].min
  irefs = lambda do |mode, n|
    out = IO.popen(env, ['valgrind', '--tool=cachegrind', '--cache-sim=no',
                         '--cachegrind-out-file=/dev/null', RbConfig.ruby, *includes, __FILE__,
                         '--child', mode, '--iterations', n.to_s], err: %i[child out], &:read)
    count = out[/I\s+refs:\s+([\d,]+)/, 1] or abort "ruby_overhead: valgrind failed:\n#{out}"
    count.delete(',').to_i
  end
  work = modes.to_h { |m| [m, irefs.call(m, iterations) - irefs.call(m, 0)] }
  modes.drop(1).each do |m|
    puts format('ruby_overhead: instructions %s/plain = %.4f (%d workload rounds: %d vs %d)',
                m, work[m].fdiv(work['plain']), iterations, work[m], work['plain'])
  end
  exit
end

times = modes.to_h { |m| [m, []] }
opts[:pairs].times do |i|
  order = i.even? ? modes : modes.reverse # alternate which runs first
  order.each { |m| times[m] << run.call(m) }
  line = modes.map { |m| format('%s %.3fs', m, times[m].last) }.join('  ')
  warn format('round %2d: %s  ratio %.4f', i + 1, line, times['memprof'].last / times['plain'].last)
end

median = ->(a) { s = a.sort; s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0 }
ratio = ->(m) { median.call(times[m].zip(times['plain']).map { |x, b| x / b }) }
best = ->(m) { times[m].min / times['plain'].min }
puts format('ruby_overhead: median ratio memprof/plain = %.4f over %d pairs, fastest runs %.4f ' \
            '(default rate 512 KiB; median CPU times plain %.3fs, memprof %.3fs)',
            ratio.call('memprof'), opts[:pairs], best.call('memprof'),
            median.call(times['plain']), median.call(times['memprof']))
if opts[:objects]
  puts format('ruby_overhead: median ratio objects/plain = %.4f, fastest runs %.4f ' \
              '(Memprof.start(objects: true))', ratio.call('objects'), best.call('objects'))
end
