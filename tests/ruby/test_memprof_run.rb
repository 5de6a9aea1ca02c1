# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# `memprof run -- ruby app.rb` with no change to the script (issue 20, item 2): memprof run
# sees a Ruby interpreter and adds its bootstrap to RUBYOPT, which loads the binding from the
# build tree and joins the plugin's profile, so sites carry Ruby methods. The script holds
# 100 MB of strings (100,000 of 1,000 characters) in one method: the site holding them, read
# from the exit summary, is within 12 % of that and names the method with its file and line.
# Also: a script calling Memprof.start joins (one message), --no-runtime leaves Ruby
# alone, and a Ruby the binding is not built for is said in one line. No -I paths nor
# LD_LIBRARY_PATH here: only the bootstrap can find the binding.

require_relative 'helper'

class TestMemprofRun < Minitest::Test
  include MemprofTestHelper

  MEMPROF = ENV.fetch('MEMPROF_TEST_COMMAND', '')

  APP = <<~'RUBY'
    def hold_strings
      a = []
      100_000.times { a << ('x' * 1000) } # LINE_HOLD
      a
    end
    $keep = hold_strings
  RUBY

  def setup
    skip 'the memprof command was not built' unless File.executable?(MEMPROF)
  end

  def memprof_run(dir, script, *options)
    env = clean_env.merge('LD_LIBRARY_PATH' => nil, 'RUBYLIB' => nil, 'RUBYOPT' => nil)
    out, err, status = Open3.capture3(env, MEMPROF, 'run', '-r', '64K', '-o',
                                      File.join(dir, 'out.pb.gz'), *options, '--', RUBY,
                                      script, chdir: dir)
    assert status.success?, "memprof run failed (#{status.inspect}):\n#{err}"
    [out, err]
  end

  # The text of the sites the summary lists first, in order.
  def sites(summary)
    first = summary.split(/^Top sites by [^\n]*\n/)[1]
    refute_nil first, summary
    first.scan(/^ *\d+\. .*?(?=^ *\d+\. |\z)/m)
  end

  def in_tmp(code)
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'app.rb')
      File.write(path, code)
      yield dir, path
    end
  end

  def test_strings_are_estimated_and_named_by_the_ruby_method
    in_tmp(APP) do |dir, path|
      _, err = memprof_run(dir, path)
      refute_match(/no Ruby binding/, err)
      top = sites(err).first
      line = APP.lines.index { |l| l.include?('LINE_HOLD') } + 1
      assert_includes top, 'Object#hold_strings', top
      assert_includes top, "app.rb:#{line}", top
      m = top.match(/^ *1\. ([\d.]+) MiB/)
      refute_nil m, top
      assert_in_delta 100_100_000, m[1].to_f * (1 << 20), 0.12 * 100_100_000, top
    end
  end

  def test_no_runtime_leaves_ruby_alone
    in_tmp(APP) do |dir, path|
      _, err = memprof_run(dir, path, '--no-runtime')
      refute_includes err, 'Object#hold_strings', err
    end
  end

  def test_a_script_calling_memprof_start_joins
    code = "require 'memprof'\nMemprof.start(sampling_rate_kb: 16)\n" \
           "x = Array.new(100) { 'y' * 100_000 }\nMemprof.stop\nputs Memprof.state\n"
    in_tmp(code) do |dir, path|
      out, err = memprof_run(dir, path)
      assert_equal "active\n", out
      assert_equal 1, err.scan('joined the running profile').size, err
    end
  end

  def test_a_ruby_the_binding_is_not_built_for_is_said_in_one_line
    # The build tree's bootstrap, told the binding is for another Ruby.
    bootstrap = File.join(File.dirname(MEMPROF), '..', 'bindings', 'ruby', 'bootstrap',
                          'memprof_bootstrap.rb')
    in_tmp(APP) do |dir, path|
      fake = File.join(dir, 'bootstrap.rb')
      File.write(fake, File.read(bootstrap).sub(/BUILT_FOR = '[^']*'/, "BUILT_FOR = '0.0.0'"))
      env = clean_env.merge('LD_LIBRARY_PATH' => nil, 'RUBYLIB' => nil, 'RUBYOPT' => "-r#{fake}",
                            'LD_PRELOAD' => ENV.fetch('MEMPROF_TEST_PRELOAD'),
                            'MEMPROF_START' => '1',
                            'MEMPROF_OUTPUT' => File.join(dir, 'p.pb.gz'))
      _, err, status = Open3.capture3(env, RUBY, path, chdir: dir)
      assert status.success?, err
      lines = err.lines.grep(/binding/)
      assert_equal 1, lines.size, err
      assert_match(/\Amemprof: no Ruby binding for ruby #{Regexp.escape(RUBY_VERSION)} .*built for 0\.0\.0/,
                   lines.first)
    end
  end
end
