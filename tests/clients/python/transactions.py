"""Transactions with librdkafka: one that commits, one that aborts.

Used by Sluice's integration tests as a real transactional librdkafka client.
The producer runs `init_transactions`, then one transaction per `--commit` /
`--abort` step (in the order given), each producing `--count` records with
values `<step-name>-<i>` (keys `<i>`, `--delay-ms` apart) and ending with
`commit_transaction` or `abort_transaction`, after a flush so that every
record has reached its partition log. It prints one JSON line with what
happened (with `--report-records`, each step's records as `[partition,
offset, value]`) and exits non-zero on any error, so the Rust test can
assert on it.

    transactions.py --bootstrap HOST:PORT --topic T --transactional-id ID \
        --commit committed --abort aborted [--count N] [--delay-ms MS] \
        [--report-records] [-X key=value ...]
"""

import argparse
import json
import sys
import time

from confluent_kafka import KafkaException, Producer


class Step(argparse.Action):
    """Collects `--commit NAME` and `--abort NAME` in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        steps = getattr(namespace, "steps", None) or []
        steps.append((option_string.lstrip("-"), values))
        namespace.steps = steps


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--timeout-secs", type=float, default=60)
    parser.add_argument("--delay-ms", type=float, default=0)
    parser.add_argument("--report-records", action="store_true")
    parser.add_argument("--commit", action=Step, dest="steps", default=[])
    parser.add_argument("--abort", action=Step, dest="steps", default=[])
    parser.add_argument(
        "-X", dest="extra", action="append", default=[], help="librdkafka property key=value"
    )
    return parser.parse_args()


def main():
    args = parse_args()
    conf = {
        "bootstrap.servers": args.bootstrap,
        "transactional.id": args.transactional_id,
        "transaction.timeout.ms": 60000,
    }
    for item in args.extra:
        key, _, value = item.partition("=")
        conf[key] = value
    errors = []
    outcomes = []
    written = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"delivery of {msg.value()!r} failed: {err}")
        else:
            written.append([msg.partition(), msg.offset(), msg.value().decode()])

    producer = Producer(conf)
    try:
        producer.init_transactions(args.timeout_secs)
        for action, name in args.steps:
            written.clear()
            producer.begin_transaction()
            for i in range(args.count):
                producer.produce(
                    args.topic,
                    key=str(i).encode(),
                    value=f"{name}-{i}".encode(),
                    on_delivery=on_delivery,
                )
                producer.poll(0)
                if args.delay_ms:
                    time.sleep(args.delay_ms / 1000)
            # Flush first, so that every record really reached its partition
            # log (a read_uncommitted reader can see the aborted ones) and
            # its delivery report, with its offset, has come.
            remaining = producer.flush(args.timeout_secs)
            if remaining:
                errors.append(f"{remaining} records of {name} not delivered before {action}")
            if action == "commit":
                producer.commit_transaction(args.timeout_secs)
            else:
                producer.abort_transaction(args.timeout_secs)
            outcome = {"name": name, "action": action, "records": args.count}
            if args.report_records:
                outcome["written"] = list(written)
            outcomes.append(outcome)
    except KafkaException as exc:
        errors.append(f"transaction failed: {exc}")
    print(json.dumps({"transactions": outcomes, "errors": errors}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
