"""Tail a topic with librdkafka in a consumer group, printing what happened as
JSON events, one a line, in the format of Kafka's VerifiableConsumer.

Used by Sluice's integration tests as a long-running librdkafka consumer, in
the background (the tests read the events as they come, and stop it with
SIGTERM). The events, each with `timestamp` (ms) and `name`:

- `startup_complete`;
- `partitions_assigned`, `partitions_revoked`, `partitions_lost`: with
  `partitions`, a list of `{topic, partition}`;
- `records_consumed`: what one `consume()` returned, `count` and per partition
  `{topic, partition, count, minOffset, maxOffset}`;
- `record_data` (with `--verbose`): one record, `{key, value, topic,
  partition, offset}`;
- `consume_error` (a message carrying an error other than partition EOF) and
  `client_error` (librdkafka's error callback): `{code, message}`;
- `shutdown_complete`, after `close()`.

    tail_consumer.py --bootstrap HOST:PORT --topic T --group G [--verbose] [-X key=value ...]
"""

import argparse
import json
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "-X", dest="extra", action="append", default=[], help="librdkafka property key=value"
    )
    return parser.parse_args()


def emit(name, **fields):
    print(json.dumps({"timestamp": int(time.time() * 1000), "name": name, **fields}), flush=True)


def partitions(tps):
    return [{"topic": tp.topic, "partition": tp.partition} for tp in tps]


def text(raw):
    return None if raw is None else raw.decode("utf-8", "replace")


def report(batch, verbose):
    """Prints the `records_consumed` event of one batch (and its records)."""
    ranges = {}
    for msg in batch:
        key = (msg.topic(), msg.partition())
        low, high, count = ranges.get(key, (msg.offset(), msg.offset(), 0))
        ranges[key] = (min(low, msg.offset()), max(high, msg.offset()), count + 1)
        if verbose:
            emit(
                "record_data",
                key=text(msg.key()),
                value=text(msg.value()),
                topic=msg.topic(),
                partition=msg.partition(),
                offset=msg.offset(),
            )
    emit(
        "records_consumed",
        count=len(batch),
        partitions=[
            {"topic": t, "partition": p, "count": c, "minOffset": lo, "maxOffset": hi}
            for (t, p), (lo, hi, c) in ranges.items()
        ],
    )


def main():
    args = parse_args()
    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "error_cb": lambda err: emit("client_error", code=err.code(), message=err.str()),
    }
    for item in args.extra:
        key, _, value = item.partition("=")
        conf[key] = value
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer = Consumer(conf)
    consumer.subscribe(
        [args.topic],
        on_assign=lambda _c, tps: emit("partitions_assigned", partitions=partitions(tps)),
        on_revoke=lambda _c, tps: emit("partitions_revoked", partitions=partitions(tps)),
        on_lost=lambda _c, tps: emit("partitions_lost", partitions=partitions(tps)),
    )
    emit("startup_complete")
    while not stopping:
        batch = []
        for msg in consumer.consume(num_messages=500, timeout=0.5):
            if msg.error() is None:
                batch.append(msg)
            elif msg.error().code() != KafkaError._PARTITION_EOF:
                emit("consume_error", code=msg.error().code(), message=msg.error().str())
        if batch:
            report(batch, args.verbose)
    consumer.close()
    emit("shutdown_complete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
