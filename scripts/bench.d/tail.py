"""librdkafka (confluent-kafka) parts of scripts/bench's latency and idle-fetch cases.

    tail.py create-topic --bootstrap B --topic T [--partitions 6] [--brokers 3]
    tail.py produce  --bootstrap B --topic T --rate R --warmup-secs W --seconds S [--partitions 6]
    tail.py consume  --bootstrap B --topic T --group G --out FILE --timeout-secs S
                     [--partitions 6] [--idle --stop-file F]
    tail.py summarize --produced P.json --latencies FILE --client C --rate R --via V

create-topic creates T (RF 3) and waits until every partition has a leader and
the leaders cover every broker (fails otherwise).

produce sends R records/s (paced; linger.ms=0, acks=1, otherwise librdkafka
defaults) round-robin over the partitions for W + S seconds, then one end
marker per partition. Values are "PHASE SEQ SEND_NS": PHASE w during the
warm-up, m after it, e for the end markers; SEND_NS is time.time_ns() just
before produce(). Prints a JSON summary of what was delivered.

consume is a default-settings consumer (bootstrap.servers, group.id,
auto.offset.reset=latest only) subscribed to T. It prints "assigned N" once it
holds all N partitions; for each m record it writes "SEQ PARTITION LATENCY_NS"
(time.time_ns() at poll() return minus SEND_NS) to FILE; it exits 0 once every
partition brought an end marker. With --idle it expects no records and exits 0
when the stop file appears. Exits 1 on timeout.

summarize checks that FILE holds every measured record that was delivered and
prints one results.tsv row: latency, client, rate, via, p50 ms, p99 ms, max ms, n.
"""

import argparse
import json
import math
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def die(msg):
    print(f"tail.py: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def create_topic(args):
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    fut = admin.create_topics([NewTopic(args.topic, args.partitions, args.replication_factor)])[args.topic]
    try:
        fut.result(timeout=30)
    except Exception as e:  # noqa: BLE001 - reported as is
        die(f"creating {args.topic}: {e}")
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(args.topic, timeout=10).topics.get(args.topic)
        parts = md.partitions if md is not None and md.error is None else {}
        leaders = {p: parts[p].leader for p in parts}
        if len(leaders) == args.partitions and all(l >= 0 for l in leaders.values()):
            break
        if time.monotonic() > deadline:
            die(f"{args.topic}: partitions/leaders not known after 30 s: {leaders}")
        time.sleep(0.1)
    spread = sorted(set(leaders.values()))
    print(f"{args.topic}: leaders " + " ".join(f"p{p}={leaders[p]}" for p in sorted(leaders)))
    if len(spread) != args.brokers:
        die(f"{args.topic}: leaders {spread} do not cover all {args.brokers} brokers")


def produce(args):
    if args.rate <= 0 or args.seconds <= 0:
        die("--rate and --seconds must be > 0")
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 0, "acks": 1})
    md = producer.list_topics(args.topic, timeout=30).topics.get(args.topic)
    if md is None or md.error is not None or len(md.partitions) != args.partitions:
        die(f"producer does not see {args.partitions} partitions of {args.topic}: {md and md.error}")
    delivered = {"w": 0, "m": 0, "e": 0}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            delivered[msg.value()[:1].decode()] += 1

    warm = int(round(args.rate * args.warmup_secs))
    total = warm + int(round(args.rate * args.seconds))
    interval = 1.0 / args.rate
    t0 = time.monotonic()
    measure_start = None
    for i in range(total):
        delay = t0 + i * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing at --rate (load shaping)
        phase = "w" if i < warm else "m"
        if phase == "m" and measure_start is None:
            measure_start = time.monotonic()
        producer.produce(args.topic, value=f"{phase} {i} {time.time_ns()}".encode(),
                         partition=i % args.partitions, on_delivery=on_delivery)
        producer.poll(0)
    measure_secs = time.monotonic() - measure_start
    for p in range(args.partitions):
        producer.produce(args.topic, value=f"e -1 {time.time_ns()}".encode(), partition=p, on_delivery=on_delivery)
    left = producer.flush(30)
    summary = {"delivered": delivered, "sent_measured": total - warm, "measure_secs": round(measure_secs, 3),
               "errors": errors[:5], "error_count": len(errors), "undelivered": left}
    print(json.dumps(summary), flush=True)
    if errors or left:
        die(f"producer: {len(errors)} delivery errors, {left} undelivered: {errors[:5]}")


def consume(args):
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "auto.offset.reset": "latest"})
    assigned = set()
    ready = [False]

    def on_assign(c, parts):
        assigned.update(p.partition for p in parts)
        if not ready[0] and len(assigned) == args.partitions:
            ready[0] = True
            print(f"assigned {args.partitions}", flush=True)

    def on_revoke(c, parts):
        assigned.difference_update(p.partition for p in parts)

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    deadline = time.monotonic() + args.timeout_secs
    ended = set()
    measured = 0
    errors = 0
    with open(args.out, "w") as out:
        while True:
            if time.monotonic() > deadline:
                die(f"consumer timed out: assigned={len(assigned)}/{args.partitions} measured={measured} "
                    f"end markers={len(ended)}/{args.partitions} errors={errors}")
            msg = consumer.poll(0.1)
            if msg is not None:
                now = time.time_ns()
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        errors += 1
                        print(f"tail.py: consumer error: {msg.error()}", file=sys.stderr, flush=True)
                        if msg.error().fatal():
                            die("fatal consumer error")
                elif args.idle:
                    die(f"idle topic {args.topic} got a record at partition {msg.partition()}")
                else:
                    phase, seq, sent = msg.value().decode().split(" ")
                    if phase == "e":
                        ended.add(msg.partition())
                    elif phase == "m":
                        out.write(f"{seq} {msg.partition()} {now - int(sent)}\n")
                        measured += 1
            if args.idle:
                if os.path.exists(args.stop_file):
                    break
            elif len(ended) == args.partitions:
                break
    consumer.close()
    print(f"done measured={measured} errors={errors}", flush=True)


def percentile(sorted_values, q):
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def summarize(args):
    produced = json.load(open(args.produced))
    lat = {}
    for line in open(args.latencies):
        seq, _part, ns = line.split()
        lat.setdefault(int(seq), int(ns))  # a redelivered record counts once, first time seen
    want = produced["delivered"]["m"]
    if len(lat) != want:
        die(f"{args.client} via {args.via} at {args.rate}/s: received {len(lat)} of the {want} measured records")
    values = sorted(v / 1e6 for v in lat.values())
    print("\t".join(["latency", args.client, str(args.rate), args.via,
                     f"{percentile(values, 0.50):.3f}", f"{percentile(values, 0.99):.3f}",
                     f"{values[-1]:.3f}", str(len(values))]))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("create-topic")
    c.add_argument("--bootstrap", required=True)
    c.add_argument("--topic", required=True)
    c.add_argument("--partitions", type=int, default=6)
    c.add_argument("--replication-factor", type=int, default=3)
    c.add_argument("--brokers", type=int, default=3)
    p = sub.add_parser("produce")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--warmup-secs", type=float, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--partitions", type=int, default=6)
    k = sub.add_parser("consume")
    k.add_argument("--bootstrap", required=True)
    k.add_argument("--topic", required=True)
    k.add_argument("--group", required=True)
    k.add_argument("--out", required=True)
    k.add_argument("--timeout-secs", type=float, required=True)
    k.add_argument("--partitions", type=int, default=6)
    k.add_argument("--idle", action="store_true")
    k.add_argument("--stop-file")
    s = sub.add_parser("summarize")
    s.add_argument("--produced", required=True)
    s.add_argument("--latencies", required=True)
    s.add_argument("--client", required=True)
    s.add_argument("--rate", required=True)
    s.add_argument("--via", required=True)
    args = ap.parse_args()
    if args.cmd == "consume" and args.idle and not args.stop_file:
        ap.error("--idle needs --stop-file")
    {"create-topic": create_topic, "produce": produce, "consume": consume, "summarize": summarize}[args.cmd](args)


if __name__ == "__main__":
    main()
