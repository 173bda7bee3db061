#!/usr/bin/env python3
"""Types a command line and a TAB into an interactive zsh or fish in a pseudo-terminal, after
loading ferryctl's completion script, and waits until the shell shows the expected completed line.

    complete_in_shell.py zsh|fish 'ferryctl --socket S pause o' 'ferryctl --socket S pause other'

ferryctl must be on the PATH. Exits 0 once the shell's line is the expected text, 1 if it has not
become that within 15 s (then prints what the terminal showed). The line is read from the shell
itself: a key bound to a widget that writes the line editor's buffer to a file, pressed after the
TAB and again until the deadline. The terminal's output is not enough: a line editor redraws only
what changed, so a character that happens to be on screen already is skipped. zsh and fish
complete only inside their line editors, which need a terminal: `complete -C` in a non-interactive
fish 3 gives ferryctl no cursor position.
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
dump = os.path.join(os.environ.get("HOME", "/tmp"), f"buffer-{os.getpid()}")
DUMP_KEY = b"\x18\x04"   # Ctrl-X Ctrl-D
commands = {
    "zsh": (["zsh", "-f", "-i"], [
        "autoload -U compinit && compinit -u", "source <(ferryctl --generate-completion-script zsh)",
        f"dump-buffer() {{ print -rn -- \"$BUFFER\" > '{dump}' }}; zle -N dump-buffer; bindkey '^X^D' dump-buffer"]),
    "fish": (["fish", "--no-config", "-i"], [
        "ferryctl --generate-completion-script fish | source", f"bind \\cx\\cd 'commandline > {dump}'"]),
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
os.write(fd, DUMP_KEY)


def buffer():
    try:
        with open(dump) as f:
            return f.read().rstrip()   # a completed word ends with a space
    except OSError:
        return None


seen = b""
deadline = time.monotonic() + 15
next_dump = time.monotonic() + 0.5
found = False
while time.monotonic() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.1)
    if ready:
        try:
            seen += os.read(fd, 65536)
        except OSError:
            break
    if buffer() == expected:
        found = True
        break
    if time.monotonic() >= next_dump:   # not yet: ask again (the shell may still have been starting)
        os.write(fd, DUMP_KEY)
        next_dump = time.monotonic() + 0.5
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
if not found:
    print(f"the shell's line: {buffer()!r}; the terminal showed: {seen.decode(errors='replace')!r}")
if os.path.exists(dump):
    os.remove(dump)
sys.exit(0 if found else 1)
