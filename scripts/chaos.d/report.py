"""What a scripts/chaos run delivered, from its clients' output.

VerifiableProducer prints one JSON event per acknowledged send
(producer_send_success: partition, offset) and per failed one
(producer_send_error: exception); VerifiableConsumer prints what each poll
returned (records_consumed: per partition minOffset..maxOffset) and each
commit (offsets_committed: success, error). Both log to stderr with the
clients' NetworkClient at INFO, so each "Node N disconnected." is there.

  report.py caught-up --dir LOG_DIR --topic T
      exit 0 once every acknowledged (partition, offset) was consumed
  report.py report --dir LOG_DIR --topic T --faults kind=n,... [--crashed WHO] [--title TEXT]
      prints the table (Markdown) and a closing "chaos: N passed, N failed"
      line; exit 1 when an acknowledged record was lost or a client crashed
"""

import argparse
import collections
import json
import re
import sys
from pathlib import Path

# One log4j line of tools-log4j2.properties: "[date] LEVEL message (logger)".
LOG_LINE = re.compile(r"^\[[^\]]*\] (WARN|ERROR) (.*) \(([\w.$]+)\)$")
CLIENT_ID = re.compile(r"^\[(Producer|Consumer)[^\]]*\] ")
KINDS_SHOWN = 10


def events(path):
    """The JSON events of a client's stdout (other lines skipped)."""
    try:
        text = Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def acked(log_dir):
    """The acknowledged (partition, offset) pairs and the failed sends by exception."""
    pairs, errors = set(), collections.Counter()
    for e in events(log_dir / "producer.out"):
        if e.get("name") == "producer_send_success":
            pairs.add((e["partition"], e["offset"]))
        elif e.get("name") == "producer_send_error":
            errors[e.get("exception", "?").rsplit(".", 1)[-1]] += 1
    return pairs, errors


def consumed(log_dir, topic):
    """How often each (partition, offset) was consumed, and failed commits by error."""
    counts, commit_errors = collections.Counter(), collections.Counter()
    for e in events(log_dir / "consumer.out"):
        if e.get("name") == "records_consumed":
            for p in e.get("partitions", []):
                if p.get("topic") != topic:
                    continue
                for offset in range(p["minOffset"], p["maxOffset"] + 1):
                    counts[(p["partition"], offset)] += 1
        elif e.get("name") == "offsets_committed" and not e.get("success", True):
            commit_errors[str(e.get("error", "?"))[:80]] += 1
    return counts, commit_errors


def log_kinds(path):
    """WARN/ERROR lines of a client's stderr by kind, and its disconnects."""
    kinds, disconnects = collections.Counter(), 0
    try:
        text = Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return kinds, disconnects
    for line in text.splitlines():
        if "disconnected." in line and "NetworkClient" in line:
            disconnects += 1
        m = LOG_LINE.match(line)
        if not m:
            continue
        level, message, logger = m.groups()
        message = CLIENT_ID.sub("", message)
        error = re.search(r"Error: (\w+)", message)
        if error:
            message = error.group(1)
        message = re.sub(r"\d+", "N", message)
        message = re.sub(r"\s+", " ", message)[:70]
        kinds[f"{level} {logger.rsplit('.', 1)[-1]}: {message}"] += 1
    return kinds, disconnects


def rows_of(counter, indent="  "):
    rows = [(f"{indent}{k}", n) for k, n in counter.most_common(KINDS_SHOWN)]
    rest = sum(n for _, n in counter.most_common()[KINDS_SHOWN:])
    if rest:
        rows.append((f"{indent}(other kinds)", rest))
    return rows


def report(args):
    log_dir = Path(args.dir)
    pairs, send_errors = acked(log_dir)
    counts, commit_errors = consumed(log_dir, args.topic)
    lost = sorted(p for p in pairs if p not in counts)
    duplicated = sum(1 for n in counts.values() if n > 1)
    producer_logs, producer_disconnects = log_kinds(log_dir / "producer.err")
    consumer_logs, consumer_disconnects = log_kinds(log_dir / "consumer.err")
    faults = [f.split("=", 1) for f in args.faults.split(",") if f]
    crashed = args.crashed.split()

    rows = [
        ("acked", len(pairs)),
        ("consumed (distinct offsets)", len(counts)),
        ("**lost** (acked, never consumed)", len(lost)),
        ("duplicated (offsets consumed more than once)", duplicated),
        ("producer send errors", sum(send_errors.values())),
        *rows_of(send_errors),
        ("producer WARN/ERROR log lines", sum(producer_logs.values())),
        *rows_of(producer_logs),
        ("consumer failed offset commits", sum(commit_errors.values())),
        *rows_of(commit_errors),
        ("consumer WARN/ERROR log lines", sum(consumer_logs.values())),
        *rows_of(consumer_logs),
        ("client disconnects (producer + consumer)",
         f"{producer_disconnects + consumer_disconnects} "
         f"({producer_disconnects} + {consumer_disconnects})"),
        ("faults injected", sum(int(n) for _, n in faults)),
        *[(f"  {kind}", n) for kind, n in faults],
        ("client processes that exited on their own", " ".join(crashed) or "none"),
    ]
    print(f"chaos: {args.title}")
    print()
    print("| what | count |")
    print("| --- | --- |")
    for what, n in rows:
        print(f"| {what.replace('|', '/')} | {n} |")
    print()
    if lost:
        print(f"chaos: LOST {len(lost)} acknowledged records, e.g. {lost[:10]}")
    failed = bool(lost) or bool(crashed) or not pairs
    if not pairs:
        print("chaos: the producer got no acknowledgement at all")
    print(f"chaos: {0 if failed else 1} passed, {1 if failed else 0} failed")
    return 1 if failed else 0


def caught_up(args):
    log_dir = Path(args.dir)
    pairs, _ = acked(log_dir)
    counts, _ = consumed(log_dir, args.topic)
    return 0 if all(p in counts for p in pairs) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("caught-up", "report"):
        p = sub.add_parser(name)
        p.add_argument("--dir", required=True)
        p.add_argument("--topic", required=True)
        if name == "report":
            p.add_argument("--faults", default="")
            p.add_argument("--crashed", default="")
            p.add_argument("--title", default="")
    args = parser.parse_args()
    return caught_up(args) if args.command == "caught-up" else report(args)


if __name__ == "__main__":
    sys.exit(main())
