#!/usr/bin/env python3
"""One line for run_model_cuda.sh's ops stage run case by case: DIR holds cases.txt (the
--list names), exit.txt ("NAME STATUS" per finished process) and NAME.log per case. Prints the
cases passed / failed / skipped, the checks and failed checks, and by name every case that failed,
timed out (status 124) or never reported (a process that died without its last line)."""
import pathlib
import re
import sys


def summarize(folder: pathlib.Path) -> str:
    names = [n.strip() for n in (folder / "cases.txt").read_text().splitlines() if n.strip()]
    status = {}
    exit_file = folder / "exit.txt"
    if exit_file.exists():
        for line in exit_file.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                status[parts[0]] = int(parts[1])
    passed = skipped = checks = failed_checks = 0
    bad = []
    for name in names:
        log = folder / f"{name}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        last = re.search(r"(\d+) cases, (\d+) checks, (\d+) failed checks, (\d+) failed cases, "
                         r"(\d+) skipped", text)
        if last is None:
            code = status.get(name)
            bad.append(f"{name} ({'timed out' if code == 124 else f'no summary, exit {code}'})")
            continue
        checks += int(last.group(2))
        failed_checks += int(last.group(3))
        if int(last.group(4)) > 0 or status.get(name, 0) != 0:
            bad.append(f"{name} (exit {status.get(name)})")
        elif int(last.group(1)) == 0:
            skipped += 1
        else:
            passed += 1
    line = (f"{passed} cases passed, {len(bad)} failed or unfinished, {skipped} skipped; "
            f"{checks} checks, {failed_checks} failed")
    return line + (": " + ", ".join(bad) if bad else "")


if __name__ == "__main__":
    print(summarize(pathlib.Path(sys.argv[1])))
