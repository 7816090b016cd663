"""What every CPU benchmark result in bench/results/ records about its run,
and how it is written.

The benchmark scripts (scripts/bench, bench/*.sh) import this from their
inline Python: the date, the machine, the commit measured (with -dirty when
tracked files differ from it) and the load average, since the build machine
is shared and wall times under load exceed an idle machine's.
"""
import datetime
import json
import os
import platform
import subprocess


def run_metadata(root):
    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True).stdout.strip()

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {
        "date": datetime.date.today().isoformat(),
        "machine": f"{os.cpu_count()}-core CPU build machine: {cpu}, {mem_gib:.0f} GiB, "
                   f"{platform.system()} {platform.release()}",
        "git_commit": git("rev-parse", "HEAD") + ("-dirty" if dirty else ""),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def write_result(out, result):
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
