"""The scaling phases' part of scripts/bench's table (see report.py).

Rows of results.tsv read here (tab-separated):
  metadata      VIA  REQUESTS  P50_MS  P99_MS  MAX_MS  ANSWER_BYTES  PARTITIONS  CPU_TICKS
                (full Metadata requests; CPU_TICKS: the proxy's over them, 0 for direct)
  many-produce  VIA  PARTITIONS  RECORDS  BYTES  MS   (one producer over PARTITIONS partitions)
  many-consume  VIA  PARTITIONS  RECORDS  BYTES  MS   (one consumer over them)
  clients-rest  RSS_KB                                (the clients phase's Sluice at rest)
  clients       VIA  TOTAL  ACTIVE  REQUESTS  P50_MS  P99_MS  MAX_MS  CPU_TICKS  RSS_OPEN_KB  RSS_END_KB  SECONDS
  nodes-produce VIA  CLIENTS  <ProducerPerformance's last line>   (VIA: direct, relay, sluice-K)
  nodes-consume VIA  CLIENTS  <ConsumerPerformance's last line>
and, in report.py's cpu rows, the proxies' CPU-s per GB: many-produce[-relay],
many-consume[-relay], nodes-produce-VIA, nodes-consume-VIA.
VIA is direct, relay or sluice unless said otherwise.
"""

import os
import re
import statistics

CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024

metadata = {}  # VIA -> [(requests, p50, p99, max, bytes, partitions, ticks) of each pass]
many = {}  # (MODE, VIA) -> (partitions, records, bytes, ms)
clients = {}  # VIA -> the row's numbers
clients_rest = []
nodes = {}  # (KIND, VIA) -> [MB/s of each client]
nodes_clients = [0]


def read(f):
    """Takes one results row (its fields) if it is one of the scaling
    phases'; returns whether it was."""
    kind = f[0]
    if kind == "metadata":
        metadata.setdefault(f[1], []).append(tuple(float(x) for x in f[2:9]))
    elif kind in ("many-produce", "many-consume"):
        many[(kind[5:], f[1])] = tuple(float(x) for x in f[2:6])
    elif kind == "clients-rest":
        clients_rest.append(int(f[1]))
    elif kind == "clients":
        clients[f[1]] = [float(x) for x in f[2:12]]
    elif kind == "nodes-produce":
        m = re.search(r"records/sec \(([\d.]+) MB/sec\)", f[3])
        if not m:
            raise SystemExit(f"cannot read ProducerPerformance output: {f[3]}")
        nodes.setdefault(("produce", f[1]), []).append(float(m[1]))
        nodes_clients[0] = int(f[2])
    elif kind == "nodes-consume":
        c = [x.strip() for x in f[3].split(",")]
        if len(c) < 10:
            raise SystemExit(f"cannot read ConsumerPerformance output: {f[3]}")
        nodes.setdefault(("consume", f[1]), []).append(float(c[8]))
    else:
        return False
    return True


def report(row, section, ratio, cpu):
    """Appends the scaling phases' sections to the table through report.py's
    row(metric, direct, sluice, cmp, target, relay=..., vs_relay=...) and
    section(title); cpu: report.py's CPU-s per GB by kind."""

    def cpu_of(kind):
        return statistics.median(cpu[kind]) if kind in cpu else None

    def diff(a, b):
        return f"{b - a:+.1f} ms"

    if metadata or many:
        passes = next(iter(metadata.values()), None)
        title = "partitions: one cluster of many topics (RF 1)"
        if passes:
            some = passes[0]
            title = (f"partitions: {int(some[5])} partitions (RF 1); full Metadata (all topics),"
                     f" {len(passes)} passes of {int(some[0])} requests one at a time after 10 uncounted,"
                     " median of the passes; the proxies' CPU over them")
        section(title)
    if metadata:
        _metadata(row, diff)
    if many:
        _many(row, ratio, cpu_of)
    if clients:
        _clients(row, section, diff)
    if nodes:
        _nodes(row, section, ratio, cpu_of)


def _merged(passes):
    """One tuple for a path's passes: the median of each percentile, the
    largest max, and the requests and CPU ticks summed."""
    if not passes:
        return None
    med = [statistics.median(p[i] for p in passes) for i in range(7)]
    med[0] = sum(p[0] for p in passes)
    med[3] = max(p[3] for p in passes)
    med[6] = sum(p[6] for p in passes)
    return tuple(med)


def _metadata(row, diff):
    merged = {v: _merged(metadata.get(v)) for v in ("direct", "relay", "sluice")}
    some = next(m for m in merged.values() if m)
    d, r, s = merged["direct"], merged["relay"], merged["sluice"]
    for i, name, target in ((1, "p50", "<= +2 ms"), (2, "p99", "-")):
        row(f"full Metadata {name} ms ({some[4] / 1024:.0f} KiB answer)",
            f"{d[i]:.2f}" if d else "-", f"{s[i]:.2f}" if s else "-",
            diff(d[i], s[i]) if d and s else "-", target,
            relay=f"{r[i]:.2f}" if r else None, vs_relay=diff(r[i], s[i]) if r and s else "-")

    def per_request_ms(v):
        return v[6] / CLK_TCK / v[0] * 1e3

    row("CPU-ms per full Metadata request", "-", f"{per_request_ms(s):.2f}" if s else "-", "-", "documented",
        relay=per_request_ms(r) if r else None)


def _many(row, ratio, cpu_of):
    for mode, verb in (("produce", "produced"), ("consume", "consumed")):
        d, r, s = (many.get((mode, v)) for v in ("direct", "relay", "sluice"))
        some = d or r or s
        if not some:
            continue

        def mbs(v):
            return v[2] / MIB / (v[3] / 1e3) if v and v[3] > 0 else 0.0

        who = "producer" if mode == "produce" else "consumer (no group, assigned)"
        row(f"{mode} MB/s, one {who} over {int(some[0])} partitions ({int(some[1])} records)",
            f"{mbs(d):.1f}" if d else "-", f"{mbs(s):.1f}" if s else "-",
            ratio(mbs(d), mbs(s)) if d and s else "-", ">= 1.0x relay", relay=mbs(r) if r else None)
        sl, rl = cpu_of(f"many-{mode}"), cpu_of(f"many-{mode}-relay")
        row(f"CPU-s per GB {verb}, {int(some[0])} partitions", "-", f"{sl:.2f}" if sl is not None else "-", "-",
            "-", relay=rl)


def _clients(row, section, diff):
    d, s = clients.get("direct"), clients.get("sluice")
    some = s or d
    total, active, secs = int(some[0]), int(some[1]), some[9]
    section(f"clients: {total} connections, {active} of them producing (one record per Produce, acks=1),"
            f" {secs:.0f} s counted; sluice: a one-node process of its own; relay: not measured")
    for i, name, target in ((3, "p50", "-"), (4, "p99", "<= +5 ms"), (5, "max", "-")):
        row(f"Produce {name} ms (n={int(d[2]) if d else 0}/{int(s[2]) if s else 0})",
            f"{d[i]:.2f}" if d else "-", f"{s[i]:.2f}" if s else "-", diff(d[i], s[i]) if d and s else "-", target)
    if s:
        rest = clients_rest[0] if clients_rest else 0
        row("sluice RSS MiB at rest / all open / end of window", "-",
            f"{rest / 1024:.1f} / {s[7] / 1024:.1f} / {s[8] / 1024:.1f}")
        row(f"sluice KiB per connection, all {total} open, idle", "-", f"{(s[7] - rest) / total:.1f}")
        row(f"sluice KiB per connection, end of window", "-", f"{(s[8] - rest) / total:.1f}", "-", "<= 12 KiB")
        row("sluice CPU-ms per Produce request", "-", f"{s[6] / CLK_TCK / s[2] * 1e3:.3f}" if s[2] else "-")


def _nodes(row, section, ratio, cpu_of):
    section(f"nodes: {nodes_clients[0]} producers at once, then {nodes_clients[0]} consumers reading what they"
            " wrote (a topic each; bootstraps spread over the nodes); sum of the clients' MB/s;"
            " sluice: one process per node")
    counts = sorted(int(v.split("-")[1]) for (k, v) in nodes if k == "produce" and v.startswith("sluice-"))
    for mode, verb in (("produce", "produced"), ("consume", "consumed")):
        d, r = nodes.get((mode, "direct")), nodes.get((mode, "relay"))
        for k in counts:
            s = nodes.get((mode, f"sluice-{k}"))
            d_sum, s_sum = sum(d) if d else 0.0, sum(s) if s else 0.0
            label = "produce MB/s" if mode == "produce" else "consume MB/s (fetch time)"
            row(f"{label}, {k} sluice node{'s' if k != 1 else ''}", f"{d_sum:.1f}" if d else "-",
                f"{s_sum:.1f}" if s else "-", ratio(d_sum, s_sum) if d and s else "-", "-",
                relay=sum(r) if r else None)
        for k in counts:
            sl = cpu_of(f"nodes-{mode}-sluice-{k}")
            row(f"CPU-s per GB {verb}, {k} sluice node{'s' if k != 1 else ''}", "-",
                f"{sl:.2f}" if sl is not None else "-", "-", "-", relay=cpu_of(f"nodes-{mode}-relay"))
