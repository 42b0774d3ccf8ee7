"""A person at codemode's terminal for the conformance suite: runs a command on a
pseudo-terminal, passes on what it writes, and answers each prompt as it appears: `y` to
"answer? [y/N]"; to a field's question, Enter where it has a default, else a value of its
type."""

import os
import pty
import sys


def main() -> int:
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(sys.argv[1], sys.argv[1:])
    seen = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        seen += chunk
        # Answer each prompt once, when its whole text has arrived.
        if seen.rstrip(b" ").endswith(b"[y/N]"):
            os.write(fd, b"y\n")
            seen = b""
        elif seen.rstrip(b" ").endswith(b"):"):
            field = seen.splitlines()[-1]
            if b"Enter for" in field:
                os.write(fd, b"\n")
            elif b"boolean" in field:
                os.write(fd, b"y\n")
            elif b"integer" in field or b"number" in field:
                os.write(fd, b"1\n")
            else:
                os.write(fd, b"x\n")
            seen = b""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
