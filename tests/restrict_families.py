#!/usr/bin/python3
"""Runs a command under the socket restriction of systemd's
RestrictAddressFamilies=, where systemd is absent: a seccomp filter
(libseccomp, Debian's python3-seccomp) that makes socket(2) fail with
EAFNOSUPPORT for every address family but those named, as systemd's own
filter does (families below the first allowed, above the last, and each
one between that is not allowed). socketpair(2) and sockets passed in are
left alone, as systemd leaves them.

    restrict_families.py AF_UNIX AF_INET AF_INET6 -- COMMAND [ARG...]

The filter is inherited across exec, by the command and its threads.
"""

import errno
import os
import socket
import sys

import seccomp


def main(argv):
    if "--" not in argv:
        sys.exit("usage: restrict_families.py AF_NAME... -- COMMAND [ARG...]")
    at = argv.index("--")
    names, command = argv[:at], argv[at + 1 :]
    if not names or not command:
        sys.exit("usage: restrict_families.py AF_NAME... -- COMMAND [ARG...]")
    allowed = set()
    for name in names:
        family = getattr(socket, name, None)
        if not name.startswith("AF_") or not isinstance(family, int):
            sys.exit(f"restrict_families.py: unknown address family {name}")
        allowed.add(int(family))
    first, last = min(allowed), max(allowed)
    refuse = seccomp.ERRNO(errno.EAFNOSUPPORT)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    rules.add_rule(refuse, "socket", seccomp.Arg(0, seccomp.LT, first))
    rules.add_rule(refuse, "socket", seccomp.Arg(0, seccomp.GT, last))
    for family in range(first + 1, last):
        if family not in allowed:
            rules.add_rule(refuse, "socket", seccomp.Arg(0, seccomp.EQ, family))
    rules.load()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
