"""Seek around a topic with librdkafka and check every record it gets back.

Used by Sluice's integration tests (tests/clients/java/SeekCheck.java does the
same with the Java consumer). The consumer is assigned every partition of
`--topic` from offset 0 (no group membership) and, for `--seconds`, consumes
while seeking at random every few hundred milliseconds: one partition or all
of them, backwards or forwards, never past what it knows exists. It checks
that, per partition, each record has exactly the offset that follows the
previous one, or, first after a seek, exactly the offset sought (a gap is a
skipped record, a repeat a duplicate or stale data), and that a record read
twice has the same value both times. The last `--settle-seconds` seek no
more, so that the run ends reading the live end of the topic.

It prints one JSON line, `{seeks, records, after_seek, errors, error_count,
seed}`, and exits non-zero when a record was wrong or nothing was read.

    seek_check.py --bootstrap HOST:PORT --topic T [--seconds 30] [--seed N] [-X key=value ...]
"""

import argparse
import json
import random
import sys
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--settle-seconds", type=float, default=3)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "-X", dest="extra", action="append", default=[], help="librdkafka property key=value"
    )
    return parser.parse_args()


class Checker:
    """What the consumer must get next, per partition, and what it got."""

    def __init__(self, ends):
        self.expected = {p: 0 for p in ends}
        self.known_end = dict(ends)
        self.sought = {p: None for p in ends}
        self.values = {}
        self.records = 0
        self.after_seek = 0
        self.errors = []

    def error(self, text):
        self.errors.append(text)

    def record(self, partition, offset, value):
        want = self.expected[partition]
        if offset != want:
            how = "gap" if offset > want else "repeat"
            since = self.sought[partition]
            self.error(
                f"partition {partition}: offset {offset} where {want} was due ({how}; "
                f"{'sought ' + str(since) if since is not None else 'no seek pending'})"
            )
        if self.sought[partition] is not None:
            self.after_seek += 1
            self.sought[partition] = None
        seen = self.values.setdefault((partition, offset), value)
        if seen != value:
            self.error(f"partition {partition} offset {offset}: {value!r}, earlier {seen!r}")
        self.expected[partition] = offset + 1
        self.known_end[partition] = max(self.known_end[partition], offset + 1)
        self.records += 1

    def targets(self, rng):
        """Where to seek next: `{partition: offset}`."""
        parts = sorted(self.expected)
        top = {p: max(self.expected[p], self.known_end[p]) for p in parts}
        kind = rng.choice(["one", "one", "all-back", "all-forward", "all-any"])
        if kind == "one":
            p = rng.choice(parts)
            return {p: rng.randint(0, top[p])}
        if kind == "all-back":
            return {p: rng.randint(0, self.expected[p]) for p in parts}
        if kind == "all-forward":
            return {p: rng.randint(self.expected[p], top[p]) for p in parts}
        return {p: rng.randint(0, top[p]) for p in parts}

    def sought_to(self, partition, offset):
        self.expected[partition] = offset
        self.sought[partition] = offset


def main():
    args = parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": f"seek-check-{time.time_ns()}",
        "enable.auto.commit": False,
        "auto.offset.reset": "error",
    }
    for item in args.extra:
        key, _, value = item.partition("=")
        conf[key] = value
    consumer = Consumer(conf)
    topic = consumer.list_topics(args.topic, timeout=30).topics[args.topic]
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30)[1]
        for p in topic.partitions
    }
    checker = Checker(ends)
    consumer.assign([TopicPartition(args.topic, p, 0) for p in ends])
    seeks = 0
    start = time.monotonic()
    next_seek = start + rng.uniform(0.2, 1.0)
    while time.monotonic() < start + args.seconds:
        for msg in consumer.consume(num_messages=50, timeout=0.2):
            if msg.error() is None:
                checker.record(msg.partition(), msg.offset(), msg.value())
            elif msg.error().code() != KafkaError._PARTITION_EOF:
                checker.error(f"consume error: {msg.error()}")
        now = time.monotonic()
        if now >= next_seek and now < start + args.seconds - args.settle_seconds:
            for p, offset in checker.targets(rng).items():
                consumer.seek(TopicPartition(args.topic, p, offset))
                checker.sought_to(p, offset)
            seeks += 1
            next_seek = now + rng.uniform(0.2, 1.0)
    consumer.close()
    if checker.records == 0:
        checker.error("no record read")
    print(
        json.dumps(
            {
                "seeks": seeks,
                "records": checker.records,
                "after_seek": checker.after_seek,
                "errors": checker.errors[:20],
                "error_count": len(checker.errors),
                "seed": seed,
            }
        )
    )
    return 1 if checker.errors else 0


if __name__ == "__main__":
    sys.exit(main())
