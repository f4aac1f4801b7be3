"""What a scripts/soak run delivered: lost, stuck, unexpected WARN lines.

Reads the run's directory (see scripts/soak):
  run.json            times: both nodes listening, clients started and stopped, the end
  faults.jsonl        {"t", "ev": "start"|"end", "kind": "hung"|"killed", "broker"}
  txn.jsonl, tail.jsonl, admin.jsonl   the clients of scripts/soak.d/clients.py
  idem.out, idem.err  VerifiableProducer's JSON events and its WARN/ERROR log
  etl.jsonl           {"ev": "round", "n", "start", "end", "rc"}; etl-N.out its output
  sluice-N.log        Sluice's JSON log lines
  metrics-N.txt       Sluice's /metrics at the end

  report.py caught-up --dir D     exit 0 once every committed record was consumed
  report.py report --dir D --stuck-secs N --grace-secs G [--title T]
      prints a Markdown table and "soak: 1 passed, 0 failed" (or 0/1);
      exit 1 when a record was lost, a client was stuck for more than N s,
      an ETL chain failed (other than by a member fenced during a fault), more transactions failed through Sluice than
      directly, or Sluice logged an unexpected WARN/ERROR line.

WARN lines that these faults are expected to cause, each only while a fault
lasts and for G seconds after it ends (a killed broker's end is when it
serves again; its partitions move back and clients reconnect after that):
EXPECTED below, with the reason for each.
"""

import argparse
import collections
import json
import re
import sys
from pathlib import Path

# (pattern of the WARN message, faults that explain it, why)
EXPECTED = [
    (
        r"^sluice peer is down, clients stop seeing it: Connection refused",
        {"startup"},
        "the two nodes start at once and each checks the other before it listens",
    ),
    (
        r"^a broker has not answered a request within its wait, nor since",
        {"hung", "killed"},
        "the hung broker answers nothing; a killed one's last requests stay unanswered until its "
        "connections end. The stall check asks for metadata, finds the broker quiet twice past the "
        "request's legitimate wait and warns once per broker per 10 s (sink/stalled.rs)",
    ),
    (
        r"^broker request failed, answering it with a retriable error",
        {"hung", "killed"},
        "a request routed to the broker that is down (refused connect, connection ended, or the hung "
        "broker left the metadata) is answered with a retriable error; one WARN per broker per 10 s "
        "(sink/failures.rs)",
    ),
    (
        r"^broker connection failed, failing its requests",
        {"killed"},
        "the killed broker's connections die with requests on them (reset or EOF)",
    ),
    (
        r"^broker failed a request any broker can serve, retrying it on another broker",
        {"hung", "killed"},
        "a Metadata or admin request that went to the broker that is down is sent once more to "
        "another broker (sink/finish.rs)",
    ),
    (
        r"^metadata refresh failed",
        {"hung", "killed"},
        "the refresh went out on a connection to the broker that is down; the next refresh picks "
        "another broker",
    ),
    (
        r"^coordinator lookup failed",
        {"hung", "killed"},
        "the lookup went out on a connection to the broker that is down; the client's retry looks up "
        "again",
    ),
]


def jsonl(path):
    try:
        text = Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def txn_outcomes(d, name="txn"):
    """committed, aborted, in-doubt sequence numbers, and commit times by seq."""
    committed, aborted, doubt, at = set(), set(), set(), {}
    events = jsonl(d / f"{name}.jsonl")
    for e in events:
        if e["ev"] not in ("commit", "abort", "in-doubt"):
            continue
        seqs = range(e["first"], e["last"] + 1)
        {"commit": committed, "abort": aborted, "in-doubt": doubt}[e["ev"]].update(seqs)
        if e["ev"] == "commit":
            for s in seqs:
                at[s] = e["t"]
    return committed, aborted, doubt, at, events


def consumed(d):
    """When each sequence number (soak-txn) and each (partition, offset) of
    soak-idem was first read, and how often each sequence number was read."""
    first_at, counts, idem_at = {}, collections.Counter(), {}
    for e in jsonl(d / "tail.jsonl"):
        if e["ev"] != "got":
            continue
        for s in e["seqs"]:
            counts[s] += 1
            first_at.setdefault(s, e["t"])
        for p, o in e.get("at", []):
            idem_at.setdefault((p, o), e["t"])
    return first_at, counts, idem_at


def idem_acked(d):
    """VerifiableProducer: acknowledged (partition, offset) -> ack time, failed sends by exception."""
    acked, errors = {}, collections.Counter()
    for e in jsonl(d / "idem.out"):
        if e.get("name") == "producer_send_success":
            acked[(e["partition"], e["offset"])] = e.get("timestamp", 0) / 1000
        elif e.get("name") == "producer_send_error":
            errors[e.get("exception", "?").rsplit(".", 1)[-1]] += 1
    return acked, errors


def caught_up(d):
    committed, *_ = txn_outcomes(d)
    first_at, _, idem_at = consumed(d)
    acked, _ = idem_acked(d)
    return committed.issubset(first_at.keys()) and acked.keys() <= idem_at.keys()


def largest_gap(times, start, end):
    """The longest time without an event in [start, end]."""
    points = [start] + sorted(t for t in times if start <= t <= end) + [end]
    return max((b - a for a, b in zip(points, points[1:])), default=0.0)


def fenced(detail, round_, windows):
    """Whether a chain failed because its group coordinator no longer knew a
    member (UNKNOWN_MEMBER_ID) in a round that overlapped a fault: a
    coordinator that moves to another broker after a fault loads the group
    as last written, and a member that joined since is unknown there. An
    application would rejoin; franz-go-etl stops the chain, since a rejoin
    can process records twice and exactly once could no longer be checked.
    The brokers do this to clients directly as well (the control rounds)."""
    overlaps = any(s <= round_["end"] and round_["start"] <= e for k, s, e in windows if k != "startup")
    return "UNKNOWN_MEMBER_ID" in detail and overlaps


def etl_outcomes(d, name, start, end, windows):
    """Rows, failures and fenced chains (see fenced()) of the ETL rounds
    logged as NAME.jsonl / NAME-N.out."""
    rows, failures, fenced_chains = [], [], []
    etl = [e for e in jsonl(d / f"{name}.jsonl") if e["ev"] == "round"]
    chains = collections.Counter()
    for e in etl:
        out = d / f"{name}-{e['n']}.out"
        text = out.read_text(errors="replace") if out.exists() else ""
        e["fails"], e["fenced"] = 0, 0
        for m in re.finditer(r"^RESULT (\S+) (PASS|FAIL)(.*)$", text, re.M):
            if m.group(2) == "PASS":
                chains["PASS"] += 1
                continue
            line = f"ETL round {e['n']}: {m.group(1)} failed:{m.group(3)[:200]}"
            if fenced(m.group(3), e, windows):
                chains["FENCED"] += 1
                e["fenced"] += 1
                fenced_chains.append(line)
            else:
                chains["FAIL"] += 1
                e["fails"] += 1
                failures.append(line)
    # A round that exited non-zero failed, unless only fenced chains failed in it.
    etl_failed = [e for e in etl if e["rc"] != 0 and (e["fails"] or not e["fenced"])]
    etl_gap = largest_gap([e["end"] for e in etl], start, end)
    rows += [
        ("ETL rounds passed / failed", f"{len(etl) - len(etl_failed)} / {len(etl_failed)}"),
        ("ETL chains exactly once / failed", f"{chains['PASS']} / {chains['FAIL']}"),
        ("ETL chains ended by a member fenced during a fault (UNKNOWN_MEMBER_ID: reported, not failed)",
         chains["FENCED"]),
        ("longest ETL round (s)", f"{max((e['end'] - e['start'] for e in etl), default=0):.1f}"),
        ("longest time without an ETL round ending (s)", f"{etl_gap:.1f}"),
    ]
    for e in etl_failed:
        if not any(f"ETL round {e['n']}:" in f for f in failures):
            failures.append(f"ETL round {e['n']} exited {e['rc']}")
    return rows, failures, fenced_chains


def fault_windows(d, grace):
    windows, open_ = [], {}
    for e in jsonl(d / "faults.jsonl"):
        key = (e["kind"], e["broker"])
        if e["ev"] == "start":
            open_[key] = e["t"]
        elif key in open_:
            windows.append((e["kind"], open_.pop(key), e["t"] + grace))
    windows += [(k[0], t, float("inf")) for k, t in open_.items()]
    # Until both nodes listen.
    return windows + [("startup", 0.0, json.loads((d / "run.json").read_text())["listening"])]


def sluice_lines(d):
    """(node, time, level, message) of every WARN/ERROR line of Sluice's logs."""
    from datetime import datetime

    out = []
    for path in sorted(d.glob("sluice-*.log")):
        node = path.stem.split("-", 1)[1]
        for e in jsonl(path):
            level = e.get("level", "")
            if level not in ("WARN", "ERROR"):
                continue
            ts = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
            msg = e.get("fields", {}).get("message", "")
            out.append((node, ts, level, msg, e.get("fields", {})))
    return out


def classify(lines, windows):
    expected, unexpected = collections.Counter(), []
    for node, ts, level, msg, fields in lines:
        kinds = {k for k, a, b in windows if a <= ts <= b}
        hit = None
        if level == "WARN":
            for i, (pat, faults, _) in enumerate(EXPECTED):
                if re.search(pat, msg) and kinds & faults:
                    hit = i
                    break
        if hit is None:
            unexpected.append((node, ts, level, msg, fields))
        else:
            expected[hit] += 1
    return expected, unexpected


def metric(d, name):
    total = 0.0
    for path in d.glob("metrics-*.txt"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(name):
                try:
                    total += float(line.rsplit(" ", 1)[1])
                except ValueError:
                    pass
    return total


def report(args):
    d = Path(args.dir)
    rows, failures = [], []
    run = json.loads((d / "run.json").read_text())
    start, end = run["clients_started"], run["clients_stopped"]

    committed, aborted, doubt, commit_at, txn_events = txn_outcomes(d)
    first_at, counts, idem_at = consumed(d)
    lost = sorted(committed - first_at.keys())
    aborted_read = sorted(aborted & first_at.keys())
    doubt_read = len(doubt & first_at.keys())
    dups = sum(1 for c in counts.values() if c > 1)
    delays = [first_at[s] - commit_at[s] for s in committed if s in first_at]
    max_delay = max(delays, default=0.0)
    for s in lost:  # never consumed: waited until the end of the catch-up
        max_delay = max(max_delay, run["ended"] - commit_at[s])
    txn_gap = largest_gap([e["t"] for e in txn_events if e["ev"] in ("commit", "abort")], start, end)
    rows += [
        ("transactional producer: records committed / aborted / in doubt",
         f"{len(committed)} / {len(aborted)} / {len(doubt)}"),
        ("tailing consumer (read_committed): committed records read", len(committed) - len(lost)),
        ("**lost** (committed, never read)", len(lost)),
        ("aborted records read", len(aborted_read)),
        ("in-doubt records read (either is correct)", doubt_read),
        ("records read more than once (at-least-once group: reported, not failed)", dups),
        ("longest producer time without a transaction ended (s)", f"{txn_gap:.1f}"),
        ("longest commit-to-read delay (s)", f"{max_delay:.1f}"),
    ]
    if lost:
        failures.append(f"{len(lost)} committed records never read (first: {lost[:5]})")
    if aborted_read:
        failures.append(f"{len(aborted_read)} aborted records read (first: {aborted_read[:5]})")
    if txn_gap > args.stuck_secs:
        failures.append(f"the transactional producer ended no transaction for {txn_gap:.0f} s")
    if max_delay > args.stuck_secs:
        failures.append(f"a committed record waited {max_delay:.0f} s to be read")
    rows += txn_error_rows(d, "txn", "transactional producer")
    c_committed, c_aborted, c_doubt, _, _ = txn_outcomes(d, "control")
    rows.append(("control (the same producer directly at the brokers): committed / aborted / in doubt",
                 f"{len(c_committed)} / {len(c_aborted)} / {len(c_doubt)}"))
    rows += txn_error_rows(d, "control", "control producer")
    # The faults can fail a transaction directly too; through Sluice no more
    # may fail than directly, in the same run.
    failed_txn = sum(txn_failures(d, "txn").values())
    failed_control = sum(txn_failures(d, "control").values())
    if failed_txn > failed_control:
        failures.append(
            f"{failed_txn} transactions failed through Sluice, {failed_control} directly"
        )

    acked, send_errors = idem_acked(d)
    idem_lost = sorted(acked.keys() - idem_at.keys())
    idem_gap = largest_gap(acked.values(), start, end)
    idem_delay = max((idem_at[k] - t for k, t in acked.items() if k in idem_at), default=0.0)
    for k in idem_lost:
        idem_delay = max(idem_delay, run["ended"] - acked[k])
    try:
        idem_log = (d / "idem.err").read_text(errors="replace")
    except FileNotFoundError:
        idem_log = ""
    oosn = idem_log.count("OUT_OF_ORDER_SEQUENCE_NUMBER")
    rows += [
        ("idempotent producer (VerifiableProducer): records acknowledged", len(acked)),
        ("**idempotent producer: sends failed**", sum(send_errors.values())),
    ]
    rows += [(f"  {k}", n) for k, n in send_errors.most_common(5)]
    rows += [
        ("**lost** (acknowledged by the idempotent producer, never read)", len(idem_lost)),
        ("idempotent producer: OUT_OF_ORDER_SEQUENCE_NUMBER log lines", oosn),
        ("longest idempotent producer time without an acknowledgement (s)", f"{idem_gap:.1f}"),
        ("longest acknowledgement-to-read delay (s)", f"{idem_delay:.1f}"),
    ]
    if send_errors:
        failures.append(f"the idempotent producer failed {sum(send_errors.values())} sends: {dict(send_errors)}")
    if idem_lost:
        failures.append(f"{len(idem_lost)} acknowledged records never read (first: {idem_lost[:5]})")
    if idem_gap > args.stuck_secs:
        failures.append(f"the idempotent producer had no acknowledgement for {idem_gap:.0f} s")
    if idem_delay > args.stuck_secs:
        failures.append(f"an acknowledged record waited {idem_delay:.0f} s to be read")

    admin = jsonl(d / "admin.jsonl")
    admin_rounds = [e["t"] for e in admin if e["ev"] == "round"]
    admin_gap = largest_gap(admin_rounds, start, end)
    fails = collections.Counter(f"{e['op']}: {short(e['error'])}" for e in admin if e["ev"] == "fail")
    rows += [
        ("admin rounds (create, describe topic, describe groups, delete) passed", len(admin_rounds)),
        ("longest admin time without a round passed (s)", f"{admin_gap:.1f}"),
    ]
    rows += counted("admin steps failed", fails)
    if admin_gap > args.stuck_secs:
        failures.append(f"no admin round passed for {admin_gap:.0f} s")

    windows = fault_windows(d, args.grace_secs)
    etl_rows, etl_failures, etl_fenced = etl_outcomes(d, "etl", start, end, windows)
    rows += etl_rows
    rows += [(f"  {f}", "") for f in etl_fenced]
    failures += etl_failures
    if not jsonl(d / "etl.jsonl"):
        failures.append("no ETL round finished")
    if (d / "etl-control.jsonl").exists():
        control_rows, control_failures, control_fenced = etl_outcomes(
            d, "etl-control", start, end, windows
        )
        rows += [(f"control ETL (directly at the brokers): {k}", v) for k, v in control_rows]
        rows += [(f"  control: {f}", "") for f in control_failures + control_fenced]

    expected, unexpected = classify(sluice_lines(d), windows)
    faults = collections.Counter(k for k, _, _ in windows if k != "startup")
    rows += [
        ("faults: broker hung (SIGSTOP) / killed (kill -9, restarted)", f"{faults['hung']} / {faults['killed']}"),
        ("Sluice WARN lines expected for the faults", sum(expected.values())),
    ]
    for i, n in sorted(expected.items()):
        rows.append((f"  {EXPECTED[i][0].lstrip('^')}", n))
    rows.append(("**unexpected** Sluice WARN/ERROR lines", len(unexpected)))
    for node, ts, level, msg, fields in unexpected[:20]:
        about = " ".join(str(fields[k]) for k in ("broker", "address", "api") if k in fields)
        rows.append((f"  node {node} {level} {msg[:140]} ({about})", f"at {ts - start:+.0f}s"))
    if unexpected:
        failures.append(f"{len(unexpected)} unexpected Sluice WARN/ERROR lines")
    closed = metric(d, "sluice_client_connections_closed_on_error_total")
    rows.append(("client connections Sluice closed on error", int(closed)))
    if closed:
        failures.append(f"Sluice closed {int(closed)} client connections on error")
    if run.get("crashed"):
        failures.append(f"exited on their own: {run['crashed']}")
    rows.append(("clients that exited on their own", run.get("crashed") or "none"))

    print(f"### soak: {args.title}\n")
    print("| what | count |\n| --- | --- |")
    for what, n in rows:
        print(f"| {what} | {n} |")
    print()
    if failures:
        print("Failures:")
        for f in failures:
            print(f"- {f}")
        print()
    print("Expected WARN lines (only during a fault and its grace period):")
    for pat, kinds, why in EXPECTED:
        print(f"- `{pat.lstrip('^')}` ({'/'.join(sorted(kinds))}): {why}")
    print()
    ok = not failures
    print(f"soak: {int(ok)} passed, {int(not ok)} failed")
    return 0 if ok else 1


# librdkafka: "%3|<time>|TXNERR|<client>| [thrd:...]: Current transaction failed in state S: REASON"
TXNERR = re.compile(r"\|TXNERR\|[^|]*\| \[[^]]*\]: (?:Current transaction failed in state \w+: )?(.*)$")


def txn_failures(d, name):
    """Transactions that failed: librdkafka's TXNERR lines, by reason."""
    reasons = collections.Counter()
    try:
        for line in (d / f"{name}.err").read_text(errors="replace").splitlines():
            m = TXNERR.search(line)
            if m:
                reasons[short(re.sub(r" \(broker .*?\)", "", m.group(1)))] += 1
    except FileNotFoundError:
        pass
    return reasons


def txn_error_rows(d, name, who):
    """Transactions that failed (by reason) and other client errors."""
    reasons = txn_failures(d, name)
    others = collections.Counter(
        short(e["error"]) for e in jsonl(d / f"{name}.jsonl") if e["ev"] in ("error", "in-doubt")
    )
    return counted(f"{who}: transactions failed (librdkafka TXNERR)", reasons) + counted(
        f"{who}: other client errors", others
    )


def short(text):
    return re.sub(r"\d+", "N", text)[:120]


def counted(title, counter):
    rows = [(title, sum(counter.values()))]
    rows += [(f"  {k}", n) for k, n in counter.most_common(8)]
    return rows


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("caught-up")
    s.add_argument("--dir", required=True)
    s = sub.add_parser("report")
    s.add_argument("--dir", required=True)
    s.add_argument("--stuck-secs", type=float, required=True)
    s.add_argument("--grace-secs", type=float, required=True)
    s.add_argument("--title", default="")
    args = ap.parse_args()
    if args.cmd == "caught-up":
        sys.exit(0 if caught_up(Path(args.dir)) else 1)
    sys.exit(report(args))


if __name__ == "__main__":
    main()
