#!/bin/sh
# Prints the first Python >= 3.11 that every user can run (it and its standard library lie
# under directories others may enter), for the venv `make venv` creates: the readers of a run
# directory (report, analyze, ...) need no root, so a non-root user must be able to start the
# venv's interpreter, and a Python under a 0700 home (/root/.pyenv) cannot be. With none such,
# prints python3 and says so on stderr.
check='
import os, stat, sys
if sys.version_info < (3, 11):
    sys.exit(1)
for path in (os.path.realpath(sys.executable), os.path.realpath(os.path.join(sys.base_prefix, "lib"))):
    while True:
        mode = os.stat(path).st_mode
        need = stat.S_IXOTH | (stat.S_IROTH if not stat.S_ISDIR(mode) or path.endswith("/lib") else 0)
        if mode & need != need:
            sys.exit(1)
        if path == "/":
            break
        path = os.path.dirname(path)
'
for candidate in python3 /usr/bin/python3 /usr/local/bin/python3 python3.13 python3.12 python3.11; do
  exe=$(command -v "$candidate" 2>/dev/null) || continue
  if "$exe" -c "$check" 2>/dev/null; then
    "$exe" -c 'import os, sys; print(os.path.realpath(sys.executable))'
    exit 0
  fi
done
echo "mk/readable-python.sh: no Python >= 3.11 that other users can run; the venv's will be root's only" >&2
echo python3
