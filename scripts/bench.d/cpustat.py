"""Samples the machine's CPU time for scripts/bench until it is stopped.

    cpustat.py OUT

Every 50 ms appends "EPOCH_MS BUSY IDLE STEAL" to OUT: the totals of /proc/stat's
aggregate "cpu" line, in clock ticks, where BUSY is user+nice+system+irq+softirq,
IDLE is idle+iowait and STEAL is what the hypervisor gave to others. report.py
takes the difference over each ConsumerPerformance fetch window, to tell
whether the machine was saturated while it ran (then every CPU-second Sluice
spends is one the consumer and brokers do not get).
"""

import sys
import time


def sample():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu "):
                v = [int(x) for x in line.split()[1:]]
                # user nice system idle iowait irq softirq steal ...
                return v[0] + v[1] + v[2] + v[5] + v[6], v[3] + v[4], v[7]
    sys.exit("cpustat: no aggregate cpu line in /proc/stat")


with open(sys.argv[1], "a") as out:
    while True:
        busy, idle, steal = sample()
        out.write(f"{time.time_ns() // 1_000_000} {busy} {idle} {steal}\n")
        out.flush()
        time.sleep(0.05)
