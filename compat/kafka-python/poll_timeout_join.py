"""Shows a kafka-python 3.0.12 consumer bug directly against Kafka (no
Sluice): a group join whose SyncGroup answer arrives after `poll()` gave up
waiting for it is never completed. The consumer then keeps its old (empty)
assignment, sends no heartbeat, OffsetFetch or Fetch, and reads nothing
until the broker expires it; `close()` then gets UNKNOWN_MEMBER_ID.

    poll_timeout_join.py --bootstrap HOST:PORT [--poll-ms 5] [--runs 6]

Each run creates a topic of 3 partitions with 30 records, subscribes a new
group consumer and polls with `--poll-ms` for up to 30 s. Against Kafka
4.1.2 on 127.0.0.1 with a 5 ms poll, most runs read nothing; with a poll
longer than the join (compat.py polls with all the time left), every run
reads all 30. Prints one line per run and exits 1 if any run read fewer.
"""

import argparse
import sys
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic


def run(bootstrap, poll_ms):
    topic = "poll-timeout-join-" + uuid.uuid4().hex[:8]
    admin = KafkaAdminClient(bootstrap_servers=[bootstrap])
    try:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=[bootstrap], acks="all")
    for i in range(30):
        producer.send(topic, value=f"v-{i}".encode(), partition=i % 3)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=[bootstrap],
        group_id=topic + "-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
    )
    consumer.subscribe([topic])
    read, start = 0, time.monotonic()
    while read < 30 and time.monotonic() < start + 30:
        for records in consumer.poll(timeout_ms=poll_ms).values():
            read += len(records)
    consumer.close()
    return read, time.monotonic() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--poll-ms", type=int, default=5)
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    short = 0
    for i in range(args.runs):
        read, secs = run(args.bootstrap, args.poll_ms)
        print(f"run {i + 1}: poll {args.poll_ms} ms: read {read} of 30 in {secs:.1f} s", flush=True)
        short += read < 30
    sys.exit(1 if short else 0)


if __name__ == "__main__":
    main()
