"""Produce N records with librdkafka, then consume them back.

Used by Sluice's integration tests as a real librdkafka client. Prints one JSON
line with what happened and exits non-zero on any error, so the Rust test can
assert on it.

    produce_consume.py --bootstrap HOST:PORT --topic T --count N [-X key=value ...]
"""

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--timeout-secs", type=float, default=60)
    parser.add_argument("--group", default=None)
    parser.add_argument("--skip-produce", action="store_true")
    parser.add_argument("--skip-consume", action="store_true")
    parser.add_argument(
        "-X", dest="extra", action="append", default=[], help="librdkafka property key=value"
    )
    return parser.parse_args()


def base_config(args):
    conf = {"bootstrap.servers": args.bootstrap}
    for item in args.extra:
        key, _, value = item.partition("=")
        conf[key] = value
    return conf


def produce(args, errors):
    conf = base_config(args)
    conf.update({"acks": "all", "enable.idempotence": True})
    producer = Producer(conf)
    delivered = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"delivery failed: {err}")
        else:
            delivered.append(msg.value().decode())

    for i in range(args.count):
        producer.produce(args.topic, key=str(i).encode(), value=f"record-{i}".encode(), on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(args.timeout_secs)
    if remaining:
        errors.append(f"{remaining} records not delivered within {args.timeout_secs}s")
    return delivered


def consume(args, errors):
    conf = base_config(args)
    conf.update(
        {
            "group.id": args.group or f"pc-{args.topic}-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
        }
    )
    consumer = Consumer(conf)
    consumer.subscribe([args.topic])
    seen = set()
    deadline = time.monotonic() + args.timeout_secs
    while len(seen) < args.count and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() != KafkaError._PARTITION_EOF:
                errors.append(f"consume error: {msg.error()}")
            continue
        seen.add(msg.value().decode())
    consumer.close()
    if len(seen) < args.count:
        errors.append(f"consumed {len(seen)} of {args.count} records within {args.timeout_secs}s")
    return seen


def main():
    args = parse_args()
    errors = []
    delivered = [] if args.skip_produce else produce(args, errors)
    consumed = set() if args.skip_consume else consume(args, errors)
    print(json.dumps({"delivered": len(delivered), "consumed": len(consumed), "errors": errors}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
