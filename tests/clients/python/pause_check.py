"""Pause and resume partitions with librdkafka and check every record it gets.

Used by Sluice's integration tests. The consumer is assigned every partition
of `--topic` from offset 0 (no group membership) and, for `--seconds`,
consumes while pausing a random set of partitions every few hundred
milliseconds, each for 0.2 to 12 seconds (longer than Sluice keeps a stashed
answer, 10 s), and resuming them when their time is up. librdkafka leaves a
paused partition out of its fetches and, on resume, fetches again from the
position the application has reached. The checker requires that, per
partition, each record has exactly the offset that follows the previous one
(a gap is a skipped record, a repeat a duplicate or stale data) and that a
record read twice has the same value. The last `--settle-seconds` resume
everything and pause no more, so that the run ends reading the live end.

It prints one JSON line, `{pauses, resumes, records, after_resume, errors,
error_count, seed}`, and exits non-zero when a record was wrong or nothing
was read.

    pause_check.py --bootstrap HOST:PORT --topic T [--seconds 30] [--seed N] [-X key=value ...]
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
    parser.add_argument("--settle-seconds", type=float, default=5)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "-X", dest="extra", action="append", default=[], help="librdkafka property key=value"
    )
    return parser.parse_args()


class Checker:
    """What the consumer must get next, per partition, and what it got."""

    def __init__(self, partitions):
        self.expected = {p: 0 for p in partitions}
        self.resumed = {p: False for p in partitions}
        self.values = {}
        self.records = 0
        self.after_resume = 0
        self.errors = []

    def record(self, partition, offset, value):
        want = self.expected[partition]
        if offset != want:
            how = "gap" if offset > want else "repeat"
            after = "first after a resume" if self.resumed[partition] else "not after a resume"
            self.errors.append(
                f"partition {partition}: offset {offset} where {want} was due ({how}; {after})"
            )
        if self.resumed[partition]:
            self.after_resume += 1
            self.resumed[partition] = False
        seen = self.values.setdefault((partition, offset), value)
        if seen != value:
            self.errors.append(f"partition {partition} offset {offset}: {value!r}, earlier {seen!r}")
        self.expected[partition] = offset + 1
        self.records += 1


def main():
    args = parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": f"pause-check-{time.time_ns()}",
        "enable.auto.commit": False,
        "auto.offset.reset": "error",
    }
    for item in args.extra:
        key, _, value = item.partition("=")
        conf[key] = value
    consumer = Consumer(conf)
    topic = consumer.list_topics(args.topic, timeout=30).topics[args.topic]
    partitions = sorted(topic.partitions)
    checker = Checker(partitions)
    consumer.assign([TopicPartition(args.topic, p, 0) for p in partitions])
    paused = {}  # partition -> when to resume
    pauses = resumes = 0
    start = time.monotonic()
    settle = start + args.seconds - args.settle_seconds
    next_pause = start + rng.uniform(0.3, 1.5)
    while time.monotonic() < start + args.seconds:
        for msg in consumer.consume(num_messages=50, timeout=0.2):
            if msg.error() is None:
                checker.record(msg.partition(), msg.offset(), msg.value())
            elif msg.error().code() != KafkaError._PARTITION_EOF:
                checker.errors.append(f"consume error: {msg.error()}")
        now = time.monotonic()
        due = [p for p, until in paused.items() if until <= now or now >= settle]
        if due:
            consumer.resume([TopicPartition(args.topic, p) for p in due])
            for p in due:
                del paused[p]
                checker.resumed[p] = True
            resumes += len(due)
        free = [p for p in partitions if p not in paused]
        if now >= next_pause and now < settle and free:
            chosen = rng.sample(free, rng.randint(1, len(free)))
            consumer.pause([TopicPartition(args.topic, p) for p in chosen])
            for p in chosen:
                paused[p] = now + rng.uniform(0.2, 12.0)
            pauses += len(chosen)
            next_pause = now + rng.uniform(0.3, 1.5)
    consumer.close()
    if checker.records == 0:
        checker.errors.append("no record read")
    print(
        json.dumps(
            {
                "pauses": pauses,
                "resumes": resumes,
                "records": checker.records,
                "after_resume": checker.after_resume,
                "errors": checker.errors[:20],
                "error_count": len(checker.errors),
                "seed": seed,
            }
        )
    )
    return 1 if checker.errors else 0


if __name__ == "__main__":
    sys.exit(main())
