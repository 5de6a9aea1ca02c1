# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Shared set-up of the Ruby binding's tests (tests/ruby/test_*.rb, suite 'ruby'). Meson runs
# each file as `ruby -I <source>/bindings/ruby/lib -I <build>/bindings/ruby/ext FILE` with
# LD_LIBRARY_PATH=<build>/src, so the binding is tested in place, unchanged by any install.
# Exits 77 (Meson's "skipped") when minitest (Debian: ruby-minitest) is missing. The engine
# is one per process and its sampling rate is fixed by the first start, so tests that need a
# particular state or rate run a fresh interpreter through #ruby_script, with the same load
# path and without LD_PRELOAD or MEMPROF_* variables.

begin
  require 'minitest/autorun'
rescue LoadError
  warn 'minitest not installed: skipping (apt-get install ruby-minitest)'
  exit 77
end

require 'open3'
require 'rbconfig'
require 'tmpdir'
require 'memprof'

module MemprofTestHelper
  RUBY = RbConfig.ruby

  # The -I options this process was started with (the binding in place).
  def load_path_args
    $LOAD_PATH.select { |d| File.exist?(File.join(d, 'memprof.rb')) ||
                            File.exist?(File.join(d, 'memprof', "memprof_ext.#{RbConfig::CONFIG['DLEXT']}")) }
              .flat_map { |d| ['-I', d] }
  end

  # The environment of a child interpreter: no preloaded profiler, no MEMPROF_* settings.
  def clean_env
    env = ENV.keys.grep(/\AMEMPROF_/).to_h { |k| [k, nil] }
    env['LD_PRELOAD'] = nil
    env
  end

  # Runs `code` (or the file `path`) in a fresh interpreter with the binding loaded.
  # Returns [stdout, stderr, Process::Status].
  def ruby_script(code = nil, path: nil, args: [], env: {})
    argv = [RUBY, *load_path_args, '-rmemprof']
    argv += path ? [path, *args] : ['-e', code, *args]
    Open3.capture3(clean_env.merge(env), *argv)
  end

  # As ruby_script, and fails the test unless the child exits with status 0.
  def ruby_script!(code = nil, **kw)
    out, err, status = ruby_script(code, **kw)
    assert status.success?, "child ruby failed (#{status.inspect}):\n#{out}\n#{err}"
    out
  end
end
