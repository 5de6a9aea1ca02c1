# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# The exceptions of the Ruby binding. Every exception Memprof raises includes the module
# Memprof::Error, so `rescue Memprof::Error` catches all of them; each is also a subclass of
# the standard exception a Ruby programmer would expect for its kind, so a bad argument is
# still an ::ArgumentError and a failed write still an ::IOError. Messages name the call,
# say what was wrong in words, and end with the library's own description
# (memprof_strerror()) and errno name, e.g. "Memprof.stop: profiling is not active
# (libmemprof: Not allowed in the profiler's current state, EBUSY)"; #errno holds the
# library's negative errno return code (nil when the binding itself rejected the call).
#
#   Memprof::StateError        wrong lifecycle state: start while active, stop while not
#                              active, snapshot before any start, anything after shutdown,
#                              a second sampling rate (-EBUSY, -ENOTCONN, -ESHUTDOWN,
#                              -EALREADY)
#   Memprof::ArgumentError     a bad argument (-EINVAL): rate out of range, unknown format,
#                              missing block  (< ::ArgumentError)
#   Memprof::IOError           Snapshot#save could not write the file (-EACCES, -ENOENT,
#                              -ENOSPC, ...)  (< ::IOError)
#   Memprof::UnsupportedError  not available in this build or process (-ENOTSUP)
#   Memprof::LibraryError      anything else the library reports, e.g. -ENOMEM

module Memprof
  # Included by every exception the binding raises.
  module Error
    # The library's return code (a negative errno value), or nil.
    attr_reader :errno

    def initialize(message = nil, errno: nil)
      super(message)
      @errno = errno
    end
  end

  # The call is not allowed in the profiler's current state.
  class StateError < StandardError
    include Error
  end

  # An argument was rejected.
  class ArgumentError < ::ArgumentError
    include Error
  end

  # A profile could not be written.
  class IOError < ::IOError
    include Error
  end

  # The feature or format is not available in this build or process.
  class UnsupportedError < StandardError
    include Error
  end

  # Any other failure reported by libmemprof (out of memory, ...).
  class LibraryError < StandardError
    include Error
  end
end
