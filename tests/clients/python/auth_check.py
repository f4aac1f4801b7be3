"""Connect with librdkafka, ask for metadata, and report authentication errors.

Prints one JSON line: {"ok": bool, "brokers": [...], "auth_failed": bool, "errors": [...]}.
Exits 0 whenever it could run; the Rust test asserts on the JSON.

    auth_check.py --bootstrap HOST:PORT [--timeout-secs S] [-X key=value ...]
"""

import argparse
import json
import sys

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--timeout-secs", type=float, default=15)
    parser.add_argument("-X", dest="extra", action="append", default=[])
    args = parser.parse_args()

    errors = []
    auth_failed = False

    def on_error(err):
        nonlocal auth_failed
        errors.append(str(err))
        if err.code() == KafkaError._AUTHENTICATION:
            auth_failed = True

    conf = {"bootstrap.servers": args.bootstrap, "error_cb": on_error}
    for item in args.extra:
        key, _, value = item.partition("=")
        conf[key] = value
    admin = AdminClient(conf)
    brokers = []
    try:
        metadata = admin.list_topics(timeout=args.timeout_secs)
        brokers = [f"{b.host}:{b.port}" for b in metadata.brokers.values()]
    except KafkaException as exc:
        errors.append(str(exc))
        if exc.args and exc.args[0].code() == KafkaError._AUTHENTICATION:
            auth_failed = True
    print(json.dumps({"ok": bool(brokers) and not auth_failed, "brokers": brokers,
                      "auth_failed": auth_failed, "errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
