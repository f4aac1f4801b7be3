"""librdkafka (confluent-kafka) clients of scripts/soak.

Each writes one JSON object per line to --out ({"t": unix seconds, "ev": ...})
and runs until --stop-file exists (or its own bound).

  clients.py txn-produce --bootstrap B --topic T --rate R --out F --stop-file S
      A transactional producer (transactional.id soak-txn): transactions of
      about half a second of records (keys and values are a running sequence
      number), every 10th aborted on purpose. Events: "commit"/"abort"
      (first, last: the sequence numbers of the transaction), "in-doubt"
      (the producer failed fatally during the transaction's end, so its
      outcome is whatever the coordinator decided: a new producer with the
      same transactional.id takes over), "error" (text).
  clients.py tail --bootstrap B --topic T [--offsets-topic O] --out F --stop-file S
      A read_committed consumer in group soak-tail, from the earliest offset,
      auto commit, of T (and O). Events: "got" (seqs: the sequence numbers
      of one poll's records of T; at: [partition, offset] of its records of
      O), "error" (text).
  clients.py admin --bootstrap B --out F --stop-file S [--every-secs 5]
      An admin loop: create a topic (3 partitions, RF 3), describe it, list
      and describe the consumer groups, delete the topic. Events: "ok" (op,
      secs) and "fail" (op, error) per step, "round" once all steps passed.
  clients.py delete-prefix --bootstrap B --prefix P
      Deletes every topic whose name starts with P (bounded, best effort).
  clients.py warm-up --bootstrap B --topic T
      Makes the brokers create their internal topics (__transaction_state,
      __consumer_offsets: 50 partitions each) and load them, by a
      transaction and a group's offset commit on T; run against the brokers
      before the clients start.
  clients.py create-topic --bootstrap B --topic T [--partitions 6]
      Creates T (RF 3, min.insync.replicas=2) and waits until it has leaders.
"""

import argparse
import json
import os
import sys
import time

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

OP_TIMEOUT_SECS = 30
# SOAK_RDKAFKA_DEBUG: librdkafka debug contexts for the transactional producers.
DEBUG = os.environ.get("SOAK_RDKAFKA_DEBUG", "")


class Out:
    """A line-buffered JSON event log."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1)

    def __call__(self, ev, **fields):
        fields.update(t=round(time.time(), 3), ev=ev)
        self.f.write(json.dumps(fields) + "\n")


def stopped(args):
    return os.path.exists(args.stop_file)


def error_cb(out):
    def cb(err):
        out("error", error=str(err))

    return cb


def txn_produce(args):
    out = Out(args.out)
    per_txn = max(1, args.rate // 2)
    seq, txn = 0, 0

    def new_producer():
        p = Producer(
            {
                "bootstrap.servers": args.bootstrap,
                "transactional.id": args.transactional_id,
                "transaction.timeout.ms": 60000,
                "linger.ms": 20,
                "error_cb": error_cb(out),
                # librdkafka's debug contexts (e.g. "eos,msg"), to stderr.
                **({"debug": DEBUG} if DEBUG else {}),
            }
        )
        while True:
            try:
                p.init_transactions(OP_TIMEOUT_SECS)
                return p
            except KafkaException as e:
                out("error", error=f"init_transactions: {e}")
                if stopped(args):
                    sys.exit(0)
                time.sleep(1)

    p = new_producer()
    out("ready")
    while not stopped(args):
        txn += 1
        first = seq
        abort = txn % 10 == 0
        started = time.monotonic()
        try:
            p.begin_transaction()
            for _ in range(per_txn):
                while True:
                    try:
                        p.produce(args.topic, key=str(seq), value=str(seq))
                        break
                    except BufferError:
                        p.poll(0.1)
                seq += 1
                p.poll(0)
                # Paced: per_txn records in about half a second.
                lag = started + (seq - first) / args.rate - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
            # Everything sent before the transaction ends: an abort purges
            # what is still queued, and librdkafka then needs an epoch bump
            # for the sequence numbers it skipped (the next transaction
            # fails with OUT_OF_ORDER_SEQUENCE_NUMBER, against the brokers
            # directly too).
            p.flush(OP_TIMEOUT_SECS)
            end_transaction(p, abort, OP_TIMEOUT_SECS)
            out("abort" if abort else "commit", first=first, last=seq - 1)
        except KafkaException as e:
            err = e.args[0]
            # produce() in a transaction that failed: _STATE.
            if err.txn_requires_abort() or err.code() == KafkaError._STATE:
                try:
                    p.abort_transaction(OP_TIMEOUT_SECS)
                    out("abort", first=first, last=seq - 1, error=str(err))
                    continue
                except KafkaException as e2:
                    err = e2.args[0]
            out("in-doubt", first=first, last=seq - 1, error=str(err))
            p = new_producer()
    p.flush(10)


def end_transaction(p, abort, timeout):
    """Commits or aborts, retrying what librdkafka calls retriable."""
    deadline = time.monotonic() + 4 * timeout
    while True:
        try:
            if abort:
                p.abort_transaction(timeout)
            else:
                p.commit_transaction(timeout)
            return
        except KafkaException as e:
            if not e.args[0].retriable() or time.monotonic() > deadline:
                raise


def tail(args):
    out = Out(args.out)
    c = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": "soak-tail",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": True,
            "error_cb": error_cb(out),
        }
    )
    c.subscribe([args.topic] + ([args.offsets_topic] if args.offsets_topic else []))
    while not stopped(args):
        msgs = c.consume(500, 0.5)
        seqs, where = [], []
        for m in msgs:
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    out("error", error=str(m.error()))
                continue
            if m.topic() == args.topic:
                seqs.append(int(m.value()))
            else:
                where.append([m.partition(), m.offset()])
        if seqs or where:
            out("got", seqs=seqs, at=where)
    c.close()


def admin(args):
    out = Out(args.out)
    a = AdminClient({"bootstrap.servers": args.bootstrap, "error_cb": error_cb(out)})
    n = 0
    while not stopped(args):
        n += 1
        name = f"soak-admin-{n}"
        started = time.monotonic()
        steps = [
            ("create", lambda: a.create_topics([NewTopic(name, 3, 3)])[name].result(OP_TIMEOUT_SECS)),
            ("describe-topic", lambda: describe_topic(a, name)),
            ("describe-groups", lambda: describe_groups(a)),
            ("delete", lambda: a.delete_topics([name])[name].result(OP_TIMEOUT_SECS)),
        ]
        ok = True
        for op, step in steps:
            t0 = time.monotonic()
            try:
                step()
                out("ok", op=op, secs=round(time.monotonic() - t0, 3))
            except Exception as e:  # every failure is reported, none ends the loop
                ok = False
                out("fail", op=op, error=str(e))
                if op == "create":
                    break
        if not ok:
            # Best effort: a topic created before a failure goes too.
            try:
                a.delete_topics([name])[name].result(OP_TIMEOUT_SECS)
            except Exception:
                pass
        else:
            out("round", n=n)
        rest = args.every_secs - (time.monotonic() - started)
        while rest > 0 and not stopped(args):
            time.sleep(min(rest, 0.5))
            rest -= 0.5


def describe_topic(a, name):
    # Metadata may lag the create by a moment: a bounded wait for it.
    deadline = time.monotonic() + OP_TIMEOUT_SECS
    while True:
        try:
            d = a.describe_topics(TopicCollection([name]))[name].result(OP_TIMEOUT_SECS)
            if len(d.partitions) != 3:
                raise RuntimeError(f"{name} has {len(d.partitions)} partitions, not 3")
            return
        except KafkaException as e:
            if e.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def describe_groups(a):
    listed = a.list_consumer_groups(request_timeout=OP_TIMEOUT_SECS).result(OP_TIMEOUT_SECS)
    ids = sorted(g.group_id for g in listed.valid)[:20]
    if "soak-tail" not in ids:
        ids.append("soak-tail")
    for gid, f in a.describe_consumer_groups(ids, request_timeout=OP_TIMEOUT_SECS).items():
        f.result(OP_TIMEOUT_SECS)


def delete_prefix(args):
    a = AdminClient({"bootstrap.servers": args.bootstrap})
    names = [t for t in a.list_topics(timeout=OP_TIMEOUT_SECS).topics if t.startswith(args.prefix)]
    if not names:
        return
    for name, f in a.delete_topics(names, operation_timeout=OP_TIMEOUT_SECS).items():
        try:
            f.result(OP_TIMEOUT_SECS)
        except KafkaException as e:
            print(f"delete {name}: {e}", file=sys.stderr)


def warm_up(args):
    deadline = time.monotonic() + 4 * OP_TIMEOUT_SECS
    p = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": "soak-warm-up"})
    while True:
        try:
            p.init_transactions(OP_TIMEOUT_SECS)
            p.begin_transaction()
            p.produce(args.topic, key="warm-up", value="-1")
            p.abort_transaction(OP_TIMEOUT_SECS)
            break
        except KafkaException as e:
            if time.monotonic() > deadline:
                sys.exit(f"warm-up transaction: {e}")
            time.sleep(1)
    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "soak-warm-up", "enable.auto.commit": False})
    while True:
        try:
            c.commit(offsets=[TopicPartition(args.topic, 0, 0)], asynchronous=False)
            break
        except KafkaException as e:
            if time.monotonic() > deadline:
                sys.exit(f"warm-up commit: {e}")
            time.sleep(1)
    c.close()


def create_topic(args):
    a = AdminClient({"bootstrap.servers": args.bootstrap})
    t = NewTopic(args.topic, args.partitions, 3, config={"min.insync.replicas": "2"})
    a.create_topics([t])[args.topic].result(OP_TIMEOUT_SECS)
    deadline = time.monotonic() + OP_TIMEOUT_SECS
    while True:
        md = a.list_topics(args.topic, timeout=OP_TIMEOUT_SECS).topics.get(args.topic)
        if md and not md.error and len(md.partitions) == args.partitions and all(
            p.leader >= 0 for p in md.partitions.values()
        ):
            return
        if time.monotonic() > deadline:
            sys.exit(f"{args.topic} has no leader for every partition within {OP_TIMEOUT_SECS} s")
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("txn-produce", "tail", "admin"):
        s = sub.add_parser(name)
        s.add_argument("--bootstrap", required=True)
        s.add_argument("--out", required=True)
        s.add_argument("--stop-file", required=True)
        if name != "admin":
            s.add_argument("--topic", required=True)
    sub.choices["txn-produce"].add_argument("--rate", type=int, default=200)
    sub.choices["txn-produce"].add_argument("--transactional-id", default="soak-txn")
    sub.choices["admin"].add_argument("--every-secs", type=float, default=5)
    sub.choices["tail"].add_argument("--offsets-topic")
    s = sub.add_parser("delete-prefix")
    s.add_argument("--bootstrap", required=True)
    s.add_argument("--prefix", required=True)
    s = sub.add_parser("warm-up")
    s.add_argument("--bootstrap", required=True)
    s.add_argument("--topic", required=True)
    s = sub.add_parser("create-topic")
    s.add_argument("--bootstrap", required=True)
    s.add_argument("--topic", required=True)
    s.add_argument("--partitions", type=int, default=6)
    args = ap.parse_args()
    {
        "txn-produce": txn_produce,
        "tail": tail,
        "admin": admin,
        "delete-prefix": delete_prefix,
        "create-topic": create_topic,
        "warm-up": warm_up,
    }[args.cmd](args)


if __name__ == "__main__":
    main()
