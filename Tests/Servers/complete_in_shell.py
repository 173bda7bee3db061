#!/usr/bin/env python3
"""Types a command line and a TAB into an interactive zsh or fish in a pseudo-terminal, after
loading ferryctl's completion script, and waits until the shell shows the expected completed line.

    complete_in_shell.py zsh|fish 'ferryctl --socket S pause o' 'ferryctl --socket S pause other'

ferryctl must be on the PATH. Exits 0 once the expected text appears, 1 if it has not within 15 s
(then prints what the terminal showed). zsh and fish complete only inside their line editors, which
need a terminal: `complete -C` in a non-interactive fish 3 gives ferryctl no cursor position.
"""
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time

shell, line, expected = sys.argv[1], sys.argv[2], sys.argv[3]
commands = {
    "zsh": (["zsh", "-f", "-i"], ["autoload -U compinit && compinit -u", "source <(ferryctl --generate-completion-script zsh)"]),
    "fish": (["fish", "--no-config", "-i"], ["ferryctl --generate-completion-script fish | source"]),
}
argv, setup = commands[shell]
env = dict(os.environ, TERM="dumb")
pid, fd = pty.fork()
if pid == 0:
    os.execvpe(argv[0], argv, env)
# A wide terminal, so that the shells never scroll a long command line sideways.
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 2000, 0, 0))
for command in setup:
    os.write(fd, command.encode() + b"\r")
os.write(fd, line.encode() + b"\t")
seen = b""
deadline = time.monotonic() + 15
found = False
while time.monotonic() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.1)
    if ready:
        try:
            seen += os.read(fd, 65536)
        except OSError:
            break
        # The shell redraws the line: the expected text appears once completion inserted it.
        if expected.encode() in seen.replace(b"\x1b[K", b""):
            found = True
            break
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
if not found:
    print(repr(seen.decode(errors="replace")))
sys.exit(0 if found else 1)
