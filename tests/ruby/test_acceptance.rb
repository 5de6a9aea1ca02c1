# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Issue 8's acceptance check for the Ruby binding, with Debian's ruby and no LD_PRELOAD:
# Memprof.start(sampling_rate_kb: 64), then 2000 strings of 50,000 characters built in a
# named method (acceptance_strings.rb). The whole-heap estimate must be within +-12 % of
# 100 MB (the sampling error is about 2 % here), top_allocators must name the method with
# the script's file and the allocating line, and the saved pprof file must be readable by
# `go tool pprof` (skipped when Go is not installed; run offline with HOME and GOCACHE in a
# temporary directory).

require_relative 'helper'
require 'json'

class TestMemprofAcceptance < Minitest::Test
  include MemprofTestHelper

  SCRIPT = File.expand_path('acceptance_strings.rb', __dir__)
  LINE = File.readlines(SCRIPT).index { |l| l.include?('# <- the allocating line') } + 1

  def run_workload(pprof_path = nil)
    out = ruby_script!(path: SCRIPT, args: [pprof_path].compact)
    JSON.parse(out.lines.last, symbolize_names: true)
  end

  def test_estimate_and_top_allocator
    r = run_workload
    msg = JSON.pretty_generate(r)
    assert_nil r[:ld_preload], 'the workload runs without LD_PRELOAD'
    assert_equal 2000 * 50_000, r[:kept_bytes]
    assert_in_delta 100_000_000, r[:estimated_heap_bytes], 12_000_000, msg
    assert_operator r[:estimated_heap_bytes_low], :<=, r[:estimated_heap_bytes]
    assert_operator r[:estimated_heap_bytes_high], :>=, r[:estimated_heap_bytes]
    assert_equal 'Object#build_strings', r[:function], msg
    assert_equal SCRIPT, r[:file], msg
    assert_equal LINE, r[:line], msg
    assert_in_delta 100_000_000, r[:top_estimated_bytes], 12_000_000, msg
    # The Ruby frames sit where the VM's eval loop was, below the C method String#*.
    stack = r[:stack]
    at = stack.index("#{SCRIPT}:#{LINE}:in `Object#build_strings'")
    refute_nil at, msg
    assert_equal 'String#* (C method)', stack[at - 1], msg
  end

  def test_go_tool_pprof_reads_the_profile
    go = ENV.fetch('PATH', '').split(File::PATH_SEPARATOR).map { |d| File.join(d, 'go') }
            .find { |f| File.executable?(f) }
    skip 'go not installed (apt-get install golang-go)' unless go
    Dir.mktmpdir do |tmp|
      path = File.join(tmp, 'strings.pb.gz')
      run_workload(path)
      env = { 'HOME' => tmp, 'GOCACHE' => File.join(tmp, 'cache'), 'GOPATH' => File.join(tmp, 'gopath'),
              'GOPROXY' => 'off', 'GOTOOLCHAIN' => 'local', 'GOFLAGS' => nil,
              'PPROF_TMPDIR' => tmp, 'PPROF_BINARY_PATH' => File.join(tmp, 'none') }
      out, status = Open3.capture2e(env, go, 'tool', 'pprof', '-symbolize=none', '-top',
                                    '-sample_index=inuse_space', path)
      assert status.success?, out
      assert_match(/Type: inuse_space/, out)
      assert_match(/Object#build_strings/, out)
      out, status = Open3.capture2e(env, go, 'tool', 'pprof', '-symbolize=none', '-traces',
                                    '-lines', path)
      assert status.success?, out
      assert_match(/Object#build_strings #{Regexp.escape(SCRIPT)}:#{LINE}/, out)
    end
  end
end
