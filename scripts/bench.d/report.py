"""Prints scripts/bench's table from its results.tsv (one row per measurement).

    report.py RESULTS IDLE_RSS_KB PEAK_RSS_KB RECORDS RECORD_SIZE TAIL_SECS WARMUP_SECS IDLE_SECS NODES CPUSTAT REREAD_RECORDS

NODES: how many Sluice nodes the process served (BENCH_SLUICE_NODES).
CPUSTAT: cpustat.py's samples of the machine's CPU time ("EPOCH_MS BUSY IDLE STEAL").

Rows of RESULTS (tab-separated):
  produce  VIA  <ProducerPerformance's last line>    (VIA: direct, sluice or relay)
  consume  VIA  <ConsumerPerformance's last line>
  reread   VIA  <ConsumerPerformance's last line>     (the re-reads of one topic, in passes)
  cpu      produce|consume|reread  CPU_SECONDS  BYTES (Sluice's utime+stime over one run through it)
  cpu      reread-relay  CPU_SECONDS  BYTES       (the bare relay's, over one re-read through it)
  cpu      produce-relay|consume-relay  CPU_SECONDS  BYTES  (the bare relay's, over one run through it)
  cpu      KIND-baseline  CPU_SECONDS  BYTES      (the baseline Sluice's, BENCH_BASELINE_BIN)
  cpu      KIND-shotover  CPU_SECONDS  BYTES      (shotover-proxy's, BENCH_SHOTOVER_BIN)
  shotover VERSION  CLIENTS                       (shotover-proxy ran, this version; its clients' Kafka version)
VIA: direct, sluice, relay, baseline (the baseline Sluice) or shotover (shotover-proxy).
  latency  CLIENT  RATE  VIA  P50_MS  P99_MS  MAX_MS  N  (one row per round, rounds in order)
  idle     CLIENT  VIA  FETCHES  SECONDS
  baseline FETCHES  SECONDS                           (no consumer running)
  memory   VIA  CONNECTIONS  RSS_KB                   (idle connections held; 0: at rest;
                                                       direct: broker 1's JVM)
  pipeline PEAK_RSS_KB  SECONDS  WRITE_TIMEOUT_SECS  SMALLEST_PARTITION_BYTES  CLOSED_IN_WINDOW
  share    VIA  RECORDS  SECONDS  BYTES               (a share consumer reading a filled topic)
  sharelat VIA  RATE  P50_MS  P99_MS  MAX_MS  N       (share consumer end-to-end latency, per round)
  cpu      share  CPU_SECONDS  BYTES                  (Sluice's, over one share consumer run)
  (the scaling phases' rows: see scale_report.py)
Every throughput and CPU row with a relay run beside it also shows the
bare relay's figure and Sluice's ratio to it. Targets are printed for
comparison only; nothing is asserted.
"""

import os
import re
import statistics
import sys
from datetime import datetime

import scale_report

path, idle_kb, peak_kb, records, size, tail_secs, warmup_secs, idle_secs, nodes, cpustat_path, reread_records = sys.argv[1:]
CLK_TCK = os.sysconf("SC_CLK_TCK")
cpustat = [tuple(int(x) for x in line.split()) for line in open(cpustat_path) if len(line.split()) == 4]


def machine(c):
    """The machine's CPU over a ConsumerPerformance run's fetch window (it ends
    at end.time, c[1], and lasts fetch.time.ms, c[7]): (busy CPU-s, busy share
    of the CPU time the guest had, steal share), or None without samples."""
    end = datetime.strptime(c[1], "%Y-%m-%d %H:%M:%S:%f").timestamp() * 1000
    start = end - float(c[7])
    inside = [s for s in cpustat if start <= s[0] <= end]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    a, b = inside[0], inside[-1]
    busy, idle, steal = (b[i] - a[i] for i in (1, 2, 3))
    if busy + idle <= 0:
        return None
    scale = (end - start) / (b[0] - a[0])
    return busy / CLK_TCK * scale, busy / (busy + idle), steal / (busy + idle + steal)


thr, cpu, lat, idle, baseline, memory, pipeline = {}, {}, {}, {}, [], {}, None
share, sharelat = {}, {}  # VIA -> MB/s of each round; VIA -> (rate, p50, p99, max, n) of each round
reread = {}  # VIA -> fetch MB/s of each re-read, in order
reread_machine = {}  # VIA -> machine(c) of each re-read, in order
reread_cpu_s = []  # Sluice's CPU-s over each re-read through it, in order
rounds = 0
shotover = None  # shotover-proxy's version, when it ran
for line in open(path):
    f = line.rstrip("\n").split("\t")
    kind = f[0]
    if kind == "produce":
        rounds += f[1] == "direct"
        # "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, ..."
        m = re.search(r"([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency.*?([\d.]+) ms 99th", f[2])
        if not m:
            sys.exit(f"cannot read ProducerPerformance output: {f[2]}")
        vals = {"produce MB/s": float(m[2]), "produce avg latency ms": float(m[3]),
                "produce p99 latency ms": float(m[4])}
    elif kind in ("consume", "reread"):
        # start, end, MB, MB.sec, nMsg, nMsg.sec, rebalance ms, fetch ms, fetch MB.sec, fetch nMsg.sec
        c = [x.strip() for x in f[2].split(",")]
        if len(c) < 10:
            sys.exit(f"cannot read ConsumerPerformance output: {f[2]}")
        want = reread_records if kind == "reread" else records
        if int(float(c[4])) != int(want):
            sys.exit(f"ConsumerPerformance read {c[4]} records, not {want}: {f[2]}")
        if kind == "reread":
            reread.setdefault(f[1], []).append(float(c[8]))
            reread_machine.setdefault(f[1], []).append(machine(c))
            continue
        vals = {"consume MB/s (fetch time)": float(c[8]), "consumed records": float(c[4])}
    elif kind == "cpu":
        cpu.setdefault(f[1], []).append(float(f[2]) / (float(f[3]) / 1e9))
        if f[1] == "reread":
            reread_cpu_s.append(float(f[2]))
        continue
    elif kind == "latency":
        lat.setdefault((f[1], int(f[2]), f[3]), []).append((float(f[4]), float(f[5]), float(f[6]), int(f[7])))
        continue
    elif kind == "idle":
        idle[(f[1], f[2])] = int(f[3]) / float(f[4])
        continue
    elif kind == "baseline":
        baseline.append(int(f[1]) / float(f[2]))
        continue
    elif kind == "shotover":
        shotover = f"shotover {f[1]} (Kafka {f[2]} clients)"
        continue
    elif kind == "memory":
        memory.setdefault(f[1], {})[int(f[2])] = int(f[3])
        continue
    elif kind == "pipeline":
        pipeline = (int(f[1]), int(f[2]), int(f[3]), int(f[4]), f[5])
        continue
    elif kind == "share":
        share.setdefault(f[1], []).append(float(f[4]) / 1e6 / float(f[3]))
        continue
    elif kind == "sharelat":
        sharelat.setdefault(f[1], []).append((int(f[2]), float(f[3]), float(f[4]), float(f[5]), int(f[6])))
        continue
    elif scale_report.read(f):
        continue
    else:
        sys.exit(f"unknown results row: {line!r}")
    for k, v in vals.items():
        thr.setdefault(k, {}).setdefault(f[1], []).append(v)

HEAD = ("metric", "direct", "relay", "sluice", "sluice vs direct", "sluice vs relay", "target")
table = []  # rows of 7 cells, or a section title (str)


def row(metric, direct, sluice, cmp="-", target="-", relay=None, vs_relay=None):
    """One row; relay: the bare relay's figure (a number, or text), and
    vs_relay the comparison (by default sluice / relay when both are numbers)."""
    if relay is None:
        relay_cell = "-"
    elif isinstance(relay, str):
        relay_cell = relay
    else:
        # As many decimals as the sluice cell shows.
        shown = sluice.split(" ")[0]
        relay_cell = f"{relay:.{len(shown.split('.')[1]) if '.' in shown else 1}f}"
    if vs_relay is None:
        try:
            vs_relay = ratio(float(relay), float(sluice.split(" ")[0]))
        except (TypeError, ValueError):
            vs_relay = "-"
    table.append((metric, direct, relay_cell, sluice, cmp, vs_relay, target))


def section(title):
    table.append(title)


def ratio(d, s):
    return f"{s / d:.2f}x" if d else "-"


shown = f"sluice: {nodes} node{'s' if nodes != '1' else ''} in one process"
section(f"throughput: {records} x {size} B, median of {rounds} rounds; {shown}" if thr else shown)
BASELINE = "sluice (baseline)"
for k, by in thr.items():
    d, s = statistics.median(by.get("direct", [0])), statistics.median(by.get("sluice", [0]))
    r = statistics.median(by["relay"]) if "relay" in by else None
    target = {"consume MB/s (fetch time)": ">= 0.98x; >= 1.0x relay", "produce MB/s": ">= 1.0x relay"}.get(k, "-")
    row(k, f"{d:.1f}", f"{s:.1f}", ratio(d, s), target, relay=r)
    if "baseline" in by:
        b = statistics.median(by["baseline"])
        row(f"{k}: {BASELINE}", f"{d:.1f}", f"{b:.1f}", ratio(d, b), target, relay=r)
    if "shotover" in by:
        o = statistics.median(by["shotover"])
        row(f"{k}: {shotover}", f"{d:.1f}", f"{o:.1f}", ratio(d, o), relay=r)
for phase, target in (("consume", "<= 0.6"), ("produce", "<= 0.8; <= 1.3x relay")):
    relay_cpu = statistics.median(cpu[f"{phase}-relay"]) if f"{phase}-relay" in cpu else None
    if phase in cpu:
        row(f"CPU-s per GB {phase}d", "-", f"{statistics.median(cpu[phase]):.2f}", "-", target,
            relay=relay_cpu)
    if f"{phase}-baseline" in cpu:
        row(f"{BASELINE} CPU-s per GB {phase}d", "-", f"{statistics.median(cpu[phase + '-baseline']):.2f}", "-",
            target, relay=relay_cpu)
    if f"{phase}-shotover" in cpu:
        row(f"{shotover} CPU-s per GB {phase}d", "-", f"{statistics.median(cpu[phase + '-shotover']):.2f}",
            relay=relay_cpu)
row("sluice RSS idle / peak MiB", "-", f"{int(idle_kb) / 1024:.1f} / {int(peak_kb) / 1024:.1f}")

pairs = list(zip(reread.get("direct", []), reread.get("sluice", [])))
if pairs:
    section(f"consumer re-reads of one topic ({reread_records} x {size} B): {len(pairs)} passes, direct and sluice"
            " back to back, and a bare relay; median (each pass's ratio in brackets)")
    each = "/".join(f"{s / d:.2f}" for d, s in pairs)
    med = statistics.median(s / d for d, s in pairs)
    relayed_med = statistics.median(reread["relay"]) if reread.get("relay") else None
    row("consume MB/s (fetch time)", f"{statistics.median(d for d, _ in pairs):.1f}",
        f"{statistics.median(s for _, s in pairs):.1f}", f"{med:.2f}x ({each})", ">= 0.98x; >= 1.0x relay",
        relay=relayed_med)
    if "reread" in cpu:
        row("CPU-s per GB consumed", "-", f"{statistics.median(cpu['reread']):.2f}", "-",
            "<= 0.6", relay=statistics.median(cpu["reread-relay"]) if "reread-relay" in cpu else None)
    based = list(zip(reread.get("direct", []), reread.get("baseline", [])))
    if based:
        each = "/".join(f"{b / d:.2f}" for d, b in based)
        row(f"consume MB/s (fetch time): {BASELINE}", f"{statistics.median(d for d, _ in based):.1f}",
            f"{statistics.median(b for _, b in based):.1f}",
            f"{statistics.median(b / d for d, b in based):.2f}x ({each})", ">= 0.98x", relay=relayed_med)
    if "reread-baseline" in cpu:
        row(f"{BASELINE} CPU-s per GB consumed", "-", f"{statistics.median(cpu['reread-baseline']):.2f}", "-",
            "<= 0.6", relay=statistics.median(cpu["reread-relay"]) if "reread-relay" in cpu else None)
    other = list(zip(reread.get("direct", []), reread.get("shotover", [])))
    if other:
        each = "/".join(f"{o / d:.2f}" for d, o in other)
        row(f"consume MB/s (fetch time): {shotover}", f"{statistics.median(d for d, _ in other):.1f}",
            f"{statistics.median(o for _, o in other):.1f}",
            f"{statistics.median(o / d for d, o in other):.2f}x ({each})", relay=relayed_med)
    if "reread-shotover" in cpu:
        row(f"{shotover} CPU-s per GB consumed", "-", f"{statistics.median(cpu['reread-shotover']):.2f}",
            relay=statistics.median(cpu["reread-relay"]) if "reread-relay" in cpu else None)
    windows = {via: [m for m in reread_machine.get(via, []) if m] for via in ("direct", "sluice")}
    if windows["direct"] and windows["sluice"]:

        def busy(via):
            ms = windows[via]
            return (f"{100 * statistics.median(m[1] for m in ms):.0f}%"
                    f" ({100 * statistics.median(m[2] for m in ms):.0f}%)")

        row("machine busy in the fetch windows (steal)", busy("direct"), busy("sluice"))
        caps = [m[0] / (m[0] + s) for m, s in zip(reread_machine.get("direct", []), reread_cpu_s) if m]
        if caps:
            row("ceiling if saturated: C/(C+S)", "-", "-",
                f"{statistics.median(caps):.2f}x ({'/'.join(f'{c:.2f}' for c in caps)})")
    relayed = list(zip(reread.get("direct", []), reread.get("relay", [])))
    if relayed:
        each = "/".join(f"{r / d:.2f}" for d, r in relayed)
        row("bare splice relay instead of sluice: consume MB/s", f"{statistics.median(d for d, _ in relayed):.1f}",
            f"{statistics.median(r for _, r in relayed):.1f}",
            f"{statistics.median(r / d for d, r in relayed):.2f}x ({each})")
    if "reread-relay" in cpu:
        row("bare splice relay CPU-s per GB consumed", "-", f"{statistics.median(cpu['reread-relay']):.2f}")

if lat:
    tail_rounds = max(len(v) for v in lat.values())
    section(f"tail latency ms: {tail_secs} s after a {warmup_secs} s warm-up, median of {tail_rounds} rounds"
            " (each round's sluice - direct in brackets)")
    for client in ("librdkafka", "java"):
        for rate in sorted({k[1] for k in lat}):
            d, s = lat.get((client, rate, "direct")), lat.get((client, rate, "sluice"))
            if not d or not s:
                continue
            n_d, n_s = sum(r[3] for r in d), sum(r[3] for r in s)
            for i, (name, target) in enumerate((("p50", "<= +2 ms"), ("p99", "<= +10 ms"))):
                md, ms = statistics.median(r[i] for r in d), statistics.median(r[i] for r in s)
                each = "/".join(f"{b[i] - a[i]:+.1f}" for a, b in zip(d, s))
                row(f"{client} {rate}/s {name} (n={n_d}/{n_s})", f"{md:.1f}", f"{ms:.1f}",
                    f"{round(ms - md, 1) + 0.0:+.1f} ms ({each})" if len(d) > 1 else f"{round(ms - md, 1) + 0.0:+.1f} ms",
                    target)
                b = lat.get((client, rate, "baseline"))
                if b:
                    mb = statistics.median(r[i] for r in b)
                    each = "/".join(f"{y[i] - x[i]:+.1f}" for x, y in zip(d, b))
                    row(f"{BASELINE} {client} {rate}/s {name} (n={sum(r[3] for r in b)})", "-", f"{mb:.1f}",
                        f"{round(mb - md, 1) + 0.0:+.1f} ms ({each})" if len(d) > 1 else f"{round(mb - md, 1) + 0.0:+.1f} ms",
                        "-")

if share or sharelat:
    share_rounds = max(len(v) for v in list(share.values()) + list(sharelat.values()))
    section(f"share consumers (KIP-932): one KafkaShareConsumer, median of {share_rounds} rounds"
            " (each round's ratio or sluice - direct in brackets)")
    d, s = share.get("direct", []), share.get("sluice", [])
    if d and s:
        each = "/".join(f"{b / a:.2f}" for a, b in zip(d, s))
        md, ms = statistics.median(d), statistics.median(s)
        row("share consume MB/s (first to last record)", f"{md:.1f}", f"{ms:.1f}", f"{ms / md:.2f}x ({each})")
    if "share" in cpu:
        row("CPU-s per GB share-consumed", "-", f"{statistics.median(cpu['share']):.2f}")
    d, s = sharelat.get("direct"), sharelat.get("sluice")
    if d and s:
        rate = d[0][0]
        for i, name in enumerate(("p50", "p99", "max"), start=1):
            md, ms = statistics.median(r[i] for r in d), statistics.median(r[i] for r in s)
            each = "/".join(f"{b[i] - a[i]:+.1f}" for a, b in zip(d, s))
            row(f"share {rate}/s end-to-end {name} ms (n={sum(r[4] for r in d)}/{sum(r[4] for r in s)})",
                f"{md:.1f}", f"{ms:.1f}", f"{round(ms - md, 1) + 0.0:+.1f} ms ({each})")

if idle:
    section(f"idle consumer: broker Fetch requests/s over {idle_secs} s")
    for client in ("librdkafka", "java"):
        d, s = idle.get((client, "direct")), idle.get((client, "sluice"))
        if d is None or s is None:
            continue
        row(f"{client} fetches/s (6 partitions)", f"{d:.2f}", f"{s:.2f}", ratio(d, s), "<= 1.2x")
    if baseline:
        row("no consumer (check, expect 0)", f"{max(baseline):.2f}", "-")

if memory:
    section("memory: RSS (VmRSS) holding idle connections (one ApiVersions each); direct: broker 1's JVM")
    sl, dr = memory.get("sluice", {}), memory.get("direct", {})

    def mib(by, n):
        return f"{by[n] / 1024:.1f}" if n in by else "n/a"

    counts = sorted(set(sl) | set(dr))
    for n in counts:
        name = "RSS at rest MiB" if n == 0 else f"RSS, {n} idle connections MiB"
        row(name, mib(dr, n), mib(sl, n), "-", "<= 24 MiB" if n == 1000 else "-")
    for a, b in zip(counts, counts[1:]):

        def per(by):
            if a not in by or b not in by:
                return "n/a"
            return f"{(by[b] - by[a]) / (b - a):.1f}"

        row(f"KiB per idle connection, {a} -> {b}", per(dr), per(sl))
if pipeline:
    peak, secs, write_timeout, smallest, closed = pipeline
    section(f"memory: 40 pipelined Fetch (max_bytes 50 MiB) never read; 6 partitions of >= {smallest / 1048576:.1f} MiB")
    row(f"peak RSS MiB over {secs} s", "n/a", f"{peak / 1024:.1f}")
    row(f"closed at the write deadline (write_timeout_secs {write_timeout}) within the {secs} s", "-", closed)

scale_report.report(row, section, ratio, cpu)

widths = [max(len(r[i]) for r in [HEAD] + [r for r in table if not isinstance(r, str)]) for i in range(len(HEAD))]
widths[0] = max([widths[0]] + [len(r) + 4 for r in table if isinstance(r, str)])


def line(cells):
    print("| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |")


print("\nSluice vs direct-to-Kafka, one run. Targets are for comparison only, never asserted.\n")
line(HEAD)
print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
for r in table:
    line((f"**{r}**",) + ("",) * (len(HEAD) - 1) if isinstance(r, str) else r)
