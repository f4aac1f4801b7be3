"""Creates the many topics of scripts/bench's partitions phase.

    topics.py --bootstrap B --prefix P --topics T --per-topic K --timeout-secs S

Creates topics P0 .. P(T-1), K partitions each, replication factor 1, in
batches of 100 (a topic that already exists with K partitions is kept), then
waits until the cluster lists all T topics with K partitions each, every one
with a leader. Prints "created T topics, T*K partitions" and exits 0; exits 1
on any error, a topic with another partition count, or when S seconds pass.
"""

import argparse
import sys
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

BATCH = 100


def die(msg):
    print(f"topics.py: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--topics", type=int, required=True)
    ap.add_argument("--per-topic", type=int, required=True)
    ap.add_argument("--timeout-secs", type=float, required=True)
    args = ap.parse_args()
    deadline = time.monotonic() + args.timeout_secs
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    names = [f"{args.prefix}{i}" for i in range(args.topics)]
    for start in range(0, len(names), BATCH):
        batch = [NewTopic(n, args.per_topic, 1) for n in names[start:start + BATCH]]
        left = max(1.0, deadline - time.monotonic())
        for name, fut in admin.create_topics(batch, request_timeout=min(left, 60)).items():
            try:
                fut.result(timeout=left)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    die(f"creating {name}: {e}")
        if time.monotonic() > deadline:
            die(f"creating {args.topics} topics took over {args.timeout_secs} s")
    want = set(names)
    while True:
        md = admin.list_topics(timeout=max(1.0, min(30, deadline - time.monotonic()))).topics
        ready, problems = 0, []
        for name in want:
            t = md.get(name)
            if t is None or t.error is not None:
                problems.append(f"{name}: {'not listed' if t is None else t.error}")
            elif len(t.partitions) != args.per_topic:
                die(f"{name} has {len(t.partitions)} partitions, not {args.per_topic}")
            elif any(p.leader < 0 for p in t.partitions.values()):
                problems.append(f"{name}: a partition without a leader")
            else:
                ready += 1
        if ready == len(want):
            break
        if time.monotonic() > deadline:
            die(f"{ready} of {len(want)} topics ready after {args.timeout_secs} s; e.g. {problems[:3]}")
        time.sleep(0.5)
    print(f"created {args.topics} topics, {args.topics * args.per_topic} partitions", flush=True)


main()
