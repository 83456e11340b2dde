"""The exit statuses of `cputrace`, so that a script can tell why a command stopped.

Light on purpose: `main` needs them before anything else is imported.
"""

OK = 0
BAD_INPUT = 1  # the input (or a file system operation) failed; the message names the file
USAGE = 2  # bad options or arguments (click's UsageError status), or bad SQL
DIFFERENT = 3  # `diff --exit-code`: the traces differ
INTERNAL = 70  # a bug in cputrace (EX_SOFTWARE in sysexits.h): never mistaken for bad input
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as a shell reports it)
BROKEN_PIPE = 141  # the reader of stdout went away (128 + SIGPIPE, as for other Unix tools)
