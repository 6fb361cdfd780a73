"""Shared by the benchmark scripts: the machine's description, PASS/FAIL, and BENCHMARKS.md sections."""
import datetime
import os
import platform

PATH = "BENCHMARKS.md"
HEADER = "# Benchmarks\n\nEvery figure here was printed by a script in `scripts/`; the command is given with it.\n"


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    memory = next((int(l.split()[1]) // 1024 // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    return {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "cpu": cpu, "memory_gib": memory,
            "summary": f"{os.cpu_count()} cores, {cpu}, {memory} GiB, {platform.system()} {platform.release()}"}


def verdict(passed):
    return "PASS" if passed else "FAIL"


def replace_section(name, body, position="end"):
    """Replaces (or adds) the block between <!-- NAME:begin --> and <!-- NAME:end --> in BENCHMARKS.md."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    section = f"{begin}\n{body.strip()}\n{end}"
    text = open(PATH).read() if os.path.exists(PATH) else HEADER
    if begin in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    elif position == "top":
        head, _, rest = text.partition("\n\n")
        text = head + "\n\n" + section + "\n\n" + rest
    elif "\n## Why the hand-tuned" in text:
        at = text.index("\n## Why the hand-tuned") + 1
        text = text[:at] + section + "\n\n" + text[at:]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    open(PATH, "w").write(text)
