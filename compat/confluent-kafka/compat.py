"""The librdkafka (Python confluent-kafka) program of Sluice's client
compatibility matrix (crates/sluice/tests/compat/matrix.rs; scenarios in compat/README.md).

    compat.py --bootstrap HOST:PORT --prefix P [--scram-user U --scram-password W]

Prints one `RESULT <scenario> PASS|FAIL|SKIP <detail>` line per scenario and
exits 1 if any failed. Runs with the interpreter of scripts/lib/python-env.sh
(confluent-kafka pinned in tests/clients/python/requirements.txt).
"""

import argparse
import sys
import time
import traceback

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3
COUNT = 30
DEADLINE_SECS = 60


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--scram-user")
    parser.add_argument("--scram-password")
    return parser.parse_args()


ARGS = parse_args()


def common():
    conf = {"bootstrap.servers": ARGS.bootstrap, "client.id": ARGS.prefix + "-rdkafka"}
    if ARGS.scram_user:
        conf.update(
            {
                "security.protocol": "sasl_plaintext",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": ARGS.scram_user,
                "sasl.password": ARGS.scram_password,
            }
        )
    return conf


def admin():
    return AdminClient(common())


def create_topic(topic, partitions=PARTITIONS):
    a = admin()  # kept alive until the result: a destroyed client fails its futures
    futures = a.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=3)],
        request_timeout=30,
    )
    futures[topic].result(timeout=40)


def producer(transactional_id=None):
    conf = common()
    conf.update({"acks": "all", "linger.ms": 5, "delivery.timeout.ms": 45000})
    if transactional_id:
        conf["transactional.id"] = transactional_id
    return Producer(conf)


def produce(p, topic, tag):
    """Produces `<tag>-<i>` for i in 0..COUNT, record i to partition i % PARTITIONS."""
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(str(err))

    for i in range(COUNT):
        p.produce(topic, key=f"k-{i}", value=f"{tag}-{i}", partition=i % PARTITIONS, on_delivery=report)
    left = p.flush(45)
    if left:
        raise RuntimeError(f"{left} records not delivered within 45 s")
    if errors:
        raise RuntimeError(f"delivery failed: {errors[0]} ({len(errors)} records)")


def values(tag):
    return {f"{tag}-{i}" for i in range(COUNT)}


def consumer(group, isolation="read_uncommitted"):
    conf = common()
    conf.update(
        {
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
        }
    )
    return Consumer(conf)


def consume_all(c, wanted, forbidden, what):
    """Polls until every value of `wanted` was read; raises if a value for
    which `forbidden` holds is read, or at the deadline."""
    missing = set(wanted)
    deadline = time.monotonic() + DEADLINE_SECS
    while missing:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{what}: {len(missing)} of {len(wanted)} records not consumed within {DEADLINE_SECS} s"
            )
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().retriable() or not msg.error().fatal():
                continue
            raise KafkaException(msg.error())
        value = msg.value().decode()
        if forbidden(value):
            raise RuntimeError(
                f"{what}: read {value} at {msg.topic()}-{msg.partition()}@{msg.offset()}"
            )
        missing.discard(value)


def produce_consume():
    topic = ARGS.prefix + "-pc"
    create_topic(topic)
    produce(producer(), topic, "pc")
    c = consumer(ARGS.prefix + "-pc-group")
    try:
        c.subscribe([topic])
        consume_all(c, values("pc"), lambda v: not v.startswith("pc-"), "consume")
    finally:
        c.close()
    return f"{COUNT} records over {PARTITIONS} partitions"


def group_resume():
    topic = ARGS.prefix + "-grp"
    group = ARGS.prefix + "-grp-group"
    create_topic(topic)
    p = producer()
    produce(p, topic, "old")
    c = consumer(group)
    try:
        c.subscribe([topic])
        consume_all(c, values("old"), lambda v: not v.startswith("old-"), "first consumer")
        c.commit(asynchronous=False)
    finally:
        c.close()
    produce(p, topic, "new")
    c = consumer(group)
    try:
        c.subscribe([topic])
        consume_all(
            c,
            values("new"),
            lambda v: v.startswith("old-"),
            "resumed consumer (committed offsets not used)",
        )
    finally:
        c.close()
    return "second consumer resumed at the committed offsets"


def admin_scenario():
    topic = ARGS.prefix + "-adm"
    a = admin()
    a.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)], request_timeout=30)[
        topic
    ].result(timeout=40)
    deadline = time.monotonic() + 30
    while True:
        try:
            desc = a.describe_topics(
                confluent_kafka.TopicCollection([topic]), request_timeout=30
            )[topic].result(timeout=40)
            if all(p.leader is not None for p in desc.partitions):
                break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise RuntimeError(f"no leaders for {topic}")
        time.sleep(0.2)
    if len(desc.partitions) != 2:
        raise RuntimeError(f"described {len(desc.partitions)} partitions, not 2")
    for p in desc.partitions:
        # Through Sluice, replicas are the Sluice nodes that stand for them.
        if not p.replicas or p.leader.id not in [r.id for r in p.replicas]:
            raise RuntimeError(f"partition {p.id}: leader {p.leader} not among {p.replicas}")
    a.delete_topics([topic], request_timeout=30)[topic].result(timeout=40)
    deadline = time.monotonic() + 30
    while topic in a.list_topics(timeout=30).topics:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} still listed 30 s after deletion")
        time.sleep(0.2)
    return "created, described (2 partitions with leaders), deleted"


def transaction():
    topic = ARGS.prefix + "-txn"
    create_topic(topic)
    p = producer(ARGS.prefix + "-txn-id")
    p.init_transactions(30)
    for tag in ["c", "a", "d"]:
        p.begin_transaction()
        produce(p, topic, tag)
        if tag == "a":
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    c = consumer(ARGS.prefix + "-txn-group", "read_committed")
    try:
        c.subscribe([topic])
        consume_all(
            c, values("c") | values("d"), lambda v: v.startswith("a-"), "read_committed consumer"
        )
    finally:
        c.close()
    return "2 committed, 1 aborted; read_committed saw exactly the committed records"


def version():
    """confluent-kafka's version (a string in 2.16, a (string, int) pair before)."""
    v = confluent_kafka.version()
    return v if isinstance(v, str) else v[0]


def main():
    print(
        f"VERSION {version()} (librdkafka {confluent_kafka.libversion()[0]})",
        flush=True,
    )
    failed = False
    for name, scenario in [
        ("produce-consume", produce_consume),
        ("group-resume", group_resume),
        ("admin", admin_scenario),
        ("transaction", transaction),
    ]:
        try:
            detail = scenario()
            print(f"RESULT {name} PASS {detail}", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is a FAIL cell
            failed = True
            message = f"{type(e).__name__}: {e}".replace("\n", " ")
            print(f"RESULT {name} FAIL {message}", flush=True)
            traceback.print_exc()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
