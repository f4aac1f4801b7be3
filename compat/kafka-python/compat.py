"""The kafka-python program of Sluice's client compatibility matrix
(crates/sluice/tests/compat/matrix.rs; scenarios in compat/README.md).

    compat.py --bootstrap HOST:PORT --prefix P [--scram-user U --scram-password W]

Prints one `RESULT <scenario> PASS|FAIL|SKIP <detail>` line per scenario and
exits 1 if any failed. Runs in a venv with compat/kafka-python/requirements.txt.
"""

import argparse
import collections
import logging
import sys
import time
import traceback

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

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


class Recent(logging.Handler):
    """Keeps the library's last log records (DEBUG included), so that a
    failed scenario can show what the client did before it failed."""

    def __init__(self, keep=4000):
        super().__init__(logging.DEBUG)
        self.records = collections.deque(maxlen=keep)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record):
        # The consumer's poll loop logs this on every pass: it would push
        # everything else out.
        if isinstance(record.msg, str) and record.msg.startswith("need_rejoin"):
            return
        self.records.append(record)

    def dump(self):
        for record in self.records:
            print(self.format(record), file=sys.stderr)
        self.records.clear()


RECENT = Recent()
logging.getLogger("kafka").addHandler(RECENT)
logging.getLogger("kafka").setLevel(logging.DEBUG)


def common():
    conf = {
        "bootstrap_servers": ARGS.bootstrap.split(","),
        "client_id": ARGS.prefix + "-kafka-python",
        "request_timeout_ms": 30000,
    }
    if ARGS.scram_user:
        conf.update(
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_plain_username": ARGS.scram_user,
                "sasl_plain_password": ARGS.scram_password,
            }
        )
    return conf


def admin():
    return KafkaAdminClient(**common())


def create_topic(topic, partitions=PARTITIONS):
    a = admin()
    try:
        a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])
    finally:
        a.close()


def producer(transactional_id=None):
    conf = common()
    conf.update({"acks": "all", "linger_ms": 5, "retries": 10})
    if transactional_id:
        conf["transactional_id"] = transactional_id
    return KafkaProducer(**conf)


def produce(p, topic, tag):
    """Produces `<tag>-<i>` for i in 0..COUNT, record i to partition i % PARTITIONS."""
    futures = [
        p.send(topic, key=f"k-{i}".encode(), value=f"{tag}-{i}".encode(), partition=i % PARTITIONS)
        for i in range(COUNT)
    ]
    p.flush(45)
    for f in futures:
        f.get(timeout=45)


def values(tag):
    return {f"{tag}-{i}" for i in range(COUNT)}


def consumer(group, isolation="read_uncommitted"):
    conf = common()
    conf.update(
        {
            "group_id": group,
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            "isolation_level": isolation,
            "session_timeout_ms": 10000,
            "heartbeat_interval_ms": 1000,
        }
    )
    return KafkaConsumer(**conf)


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
        # Each poll may take all the time left (it returns as soon as records
        # arrive): kafka-python 3.0.12 never completes a group join whose
        # SyncGroup answer arrives after a poll gave up waiting for it
        # (compat/README.md, "Notes"; poll_timeout_join.py shows it directly
        # against Kafka), so a short poll timeout can hang the consumer.
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        for records in c.poll(timeout_ms=left_ms).values():
            for r in records:
                value = r.value.decode()
                if forbidden(value):
                    raise RuntimeError(f"{what}: read {value} at {r.topic}-{r.partition}@{r.offset}")
                missing.discard(value)


def produce_consume():
    topic = ARGS.prefix + "-pc"
    create_topic(topic)
    p = producer()
    try:
        produce(p, topic, "pc")
    finally:
        p.close(timeout=10)
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
    try:
        produce(p, topic, "old")
        c = consumer(group)
        try:
            c.subscribe([topic])
            consume_all(c, values("old"), lambda v: not v.startswith("old-"), "first consumer")
            c.commit()
        finally:
            c.close()
        produce(p, topic, "new")
    finally:
        p.close(timeout=10)
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
    try:
        a.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])
        deadline = time.monotonic() + 30
        while True:
            described = a.describe_topics([topic])
            partitions = described[0]["partitions"] if described else []
            if (
                described
                and described[0]["error_code"] == 0
                and partitions
                and all(p["leader_id"] >= 0 for p in partitions)
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no leaders for {topic}: {described}")
            time.sleep(0.2)
        if len(partitions) != 2:
            raise RuntimeError(f"described {len(partitions)} partitions, not 2")
        for p in partitions:
            # Through Sluice, replicas are the Sluice nodes that stand for them.
            if p["leader_id"] not in p["replica_nodes"]:
                raise RuntimeError(f"partition {p['partition_index']}: leader not among replicas: {p}")
        a.delete_topics([topic])
        deadline = time.monotonic() + 30
        while topic in a.list_topics():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic} still listed 30 s after deletion")
            time.sleep(0.2)
    finally:
        a.close()
    return "created, described (2 partitions with leaders), deleted"


def transaction():
    topic = ARGS.prefix + "-txn"
    create_topic(topic)
    p = producer(ARGS.prefix + "-txn-id")
    try:
        p.init_transactions()
        for tag in ["c", "a", "d"]:
            p.begin_transaction()
            produce(p, topic, tag)
            if tag == "a":
                p.abort_transaction()
            else:
                p.commit_transaction()
    finally:
        p.close(timeout=10)
    c = consumer(ARGS.prefix + "-txn-group", "read_committed")
    try:
        c.subscribe([topic])
        consume_all(
            c, values("c") | values("d"), lambda v: v.startswith("a-"), "read_committed consumer"
        )
    finally:
        c.close()
    return "2 committed, 1 aborted; read_committed saw exactly the committed records"


def main():
    print(f"VERSION {kafka.__version__}", flush=True)
    failed = False
    for name, scenario in [
        ("produce-consume", produce_consume),
        ("group-resume", group_resume),
        ("admin", admin_scenario),
        ("transaction", transaction),
    ]:
        RECENT.records.clear()
        try:
            detail = scenario()
            print(f"RESULT {name} PASS {detail}", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is a FAIL cell
            failed = True
            message = f"{type(e).__name__}: {e}".replace("\n", " ")
            print(f"RESULT {name} FAIL {message}", flush=True)
            traceback.print_exc()
            print(f"--- kafka-python's last log records before {name} failed ---", file=sys.stderr)
            RECENT.dump()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
