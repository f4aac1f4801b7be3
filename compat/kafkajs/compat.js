// The kafkajs program of Sluice's client compatibility matrix
// (crates/sluice/tests/compat/matrix.rs; scenarios in compat/README.md).
//
//   node compat.js --bootstrap HOST:PORT --prefix P [--scram-user U --scram-password W]
//
// Prints one `RESULT <scenario> PASS|FAIL|SKIP <detail>` line per scenario and
// exits 1 if any failed. kafkajs is pinned by package-lock.json (`npm ci`).
'use strict';

const { Kafka, logLevel } = require('kafkajs');

const PARTITIONS = 3;
const COUNT = 30;
const DEADLINE_MS = 60000;

function parseArgs() {
  const args = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i + 1 < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!['bootstrap', 'prefix', 'scram-user', 'scram-password'].includes(key)) {
      throw new Error(`unknown argument ${argv[i]}`);
    }
    args[key] = argv[i + 1];
  }
  if (!args.bootstrap || !args.prefix) throw new Error('--bootstrap and --prefix are required');
  return args;
}

const ARGS = parseArgs();

const kafka = new Kafka({
  clientId: `${ARGS.prefix}-kafkajs`,
  brokers: ARGS.bootstrap.split(','),
  connectionTimeout: 10000,
  requestTimeout: 30000,
  logLevel: logLevel.WARN,
  sasl: ARGS['scram-user']
    ? { mechanism: 'scram-sha-256', username: ARGS['scram-user'], password: ARGS['scram-password'] }
    : undefined,
});

function values(tag) {
  return new Set([...Array(COUNT).keys()].map((i) => `${tag}-${i}`));
}

function records(tag) {
  return [...Array(COUNT).keys()].map((i) => ({
    key: `k-${i}`,
    value: `${tag}-${i}`,
    partition: i % PARTITIONS,
  }));
}

// Creates `topic` with `admin`, then waits (bounded) until its metadata
// shows a leader for every partition. kafkajs's own `waitForLeaders` retries
// LEADER_NOT_AVAILABLE only, and the Metadata request after CreateTopics may
// reach a broker that has not applied the new topic yet
// (UNKNOWN_TOPIC_OR_PARTITION): through Sluice, which sends a connection's
// CreateTopics and Metadata to different brokers, that race is far more
// likely than against Kafka directly (see compat/README.md).
async function createWith(admin, topic, partitions) {
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: 3 }],
    waitForLeaders: false,
    timeout: 30000,
  });
  if (!created) throw new Error(`${topic} was not created (it exists already)`);
  const deadline = Date.now() + 30000;
  for (;;) {
    let last;
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      const ps = topics[0].partitions;
      if (ps.length === partitions && ps.every((p) => p.leader >= 0)) return ps;
      last = JSON.stringify(ps);
    } catch (e) {
      if (!['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE'].includes(e.type)) throw e;
      last = e.type;
    }
    if (Date.now() > deadline) throw new Error(`no leaders for ${topic} within 30 s: ${last}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function createTopic(topic, partitions = PARTITIONS) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await createWith(admin, topic, partitions);
  } finally {
    await admin.disconnect();
  }
}

// Runs a consumer of `group` on `topic` from the earliest offset until every
// value of `wanted` was read; fails if a value for which `forbidden` holds is
// read, or at the deadline. With `commit`, commits the offsets after the
// last record of each partition before it stops.
async function consumeAll(group, topic, wanted, forbidden, what, { commit = false, readUncommitted = true } = {}) {
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
    readUncommitted,
    retry: { retries: 10 },
  });
  await consumer.connect();
  const missing = new Set(wanted);
  const next = {};
  let failure = null;
  let timer;
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    const done = new Promise((resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${what}: ${missing.size} of ${wanted.size} records not consumed within ${DEADLINE_MS} ms`)),
        DEADLINE_MS,
      );
      consumer
        .run({
          autoCommit: false,
          eachMessage: async ({ partition, message }) => {
            const value = message.value.toString();
            if (forbidden(value)) {
              failure = new Error(`${what}: read ${value} at ${topic}-${partition}@${message.offset}`);
              reject(failure);
              return;
            }
            missing.delete(value);
            next[partition] = (BigInt(message.offset) + 1n).toString();
            if (missing.size === 0) resolve();
          },
        })
        .catch(reject);
    });
    await done;
    if (commit) {
      await consumer.commitOffsets(
        Object.entries(next).map(([partition, offset]) => ({ topic, partition: Number(partition), offset })),
      );
    }
  } finally {
    clearTimeout(timer);
    await consumer.disconnect();
  }
}

async function produceConsume() {
  const topic = `${ARGS.prefix}-pc`;
  await createTopic(topic);
  const producer = kafka.producer();
  await producer.connect();
  try {
    await producer.send({ topic, acks: -1, messages: records('pc') });
  } finally {
    await producer.disconnect();
  }
  await consumeAll(`${ARGS.prefix}-pc-group`, topic, values('pc'), (v) => !v.startsWith('pc-'), 'consume');
  return `${COUNT} records over ${PARTITIONS} partitions`;
}

async function groupResume() {
  const topic = `${ARGS.prefix}-grp`;
  const group = `${ARGS.prefix}-grp-group`;
  await createTopic(topic);
  // Idempotent: kafkajs re-sends every partition of a request when one of
  // them fails, and through Sluice one request holds partitions of several
  // brokers, so a plain producer's retry can write old-* records again
  // after the committed offsets (compat/README.md, "Notes").
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    await producer.send({ topic, acks: -1, messages: records('old') });
    await consumeAll(group, topic, values('old'), (v) => !v.startsWith('old-'), 'first consumer', { commit: true });
    await producer.send({ topic, acks: -1, messages: records('new') });
  } finally {
    await producer.disconnect();
  }
  await consumeAll(group, topic, values('new'), (v) => v.startsWith('old-'), 'resumed consumer (committed offsets not used)');
  return 'second consumer resumed at the committed offsets';
}

async function adminScenario() {
  const topic = `${ARGS.prefix}-adm`;
  const admin = kafka.admin();
  await admin.connect();
  try {
    const partitions = await createWith(admin, topic, 2);
    if (partitions.length !== 2) throw new Error(`described ${partitions.length} partitions, not 2`);
    for (const p of partitions) {
      // Through Sluice, replicas are the Sluice nodes that stand for them.
      if (p.leader < 0 || !p.replicas.includes(p.leader)) {
        throw new Error(`partition ${p.partitionId}: leader ${p.leader} not among ${p.replicas}`);
      }
    }
    await admin.deleteTopics({ topics: [topic], timeout: 30000 });
    const deadline = Date.now() + 30000;
    while ((await admin.listTopics()).includes(topic)) {
      if (Date.now() > deadline) throw new Error(`${topic} still listed 30 s after deletion`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await admin.disconnect();
  }
  return 'created, described (2 partitions with leaders), deleted';
}

async function transaction() {
  const topic = `${ARGS.prefix}-txn`;
  await createTopic(topic);
  const producer = kafka.producer({
    transactionalId: `${ARGS.prefix}-txn-id`,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  try {
    for (const tag of ['c', 'a', 'd']) {
      const txn = await producer.transaction();
      try {
        await txn.send({ topic, acks: -1, messages: records(tag) });
      } catch (e) {
        await txn.abort();
        throw e;
      }
      if (tag === 'a') await txn.abort();
      else await txn.commit();
    }
  } finally {
    await producer.disconnect();
  }
  const committed = new Set([...values('c'), ...values('d')]);
  await consumeAll(`${ARGS.prefix}-txn-group`, topic, committed, (v) => v.startsWith('a-'), 'read_committed consumer', {
    readUncommitted: false,
  });
  return '2 committed, 1 aborted; read_committed saw exactly the committed records';
}

async function main() {
  console.log(`VERSION ${require('kafkajs/package.json').version}`);
  let failed = false;
  for (const [name, scenario] of [
    ['produce-consume', produceConsume],
    ['group-resume', groupResume],
    ['admin', adminScenario],
    ['transaction', transaction],
  ]) {
    try {
      const detail = await scenario();
      console.log(`RESULT ${name} PASS ${detail}`);
    } catch (e) {
      failed = true;
      console.log(`RESULT ${name} FAIL ${String(e && e.stack ? e.name + ': ' + e.message : e).replace(/\n/g, ' ')}`);
      console.error(e);
    }
  }
  process.exit(failed ? 1 : 0);
}

main();
