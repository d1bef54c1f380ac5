#!/usr/bin/env node
// Enqueue notification jobs from Node with node-redis 4 (Debian's node-redis, or npm's redis).
// Debian installs it under /usr/share/nodejs: run with NODE_PATH=/usr/share/nodejs if needed.
// Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (js),
// SHARDS (1): a queue of N shards takes each job on one of apns:{Q.0}:jobs … apns:{Q.N-1}:jobs,
// here at random; KEY_PREFIX: give each job the idempotency_key "<prefix>-<i>", and push it to the
// shard FNV-1a-32(key) mod N, so that a key has one home (idempotency keys are per shard).
const { createClient } = require('redis');

async function main() {
  const host = process.env.REDIS_HOST || '127.0.0.1';
  const port = process.env.REDIS_PORT || '6379';
  const queue = process.env.QUEUE || 'default';
  const prefix = process.env.ID_PREFIX || 'js';
  const count = parseInt(process.env.COUNT || '1', 10);
  const shards = parseInt(process.env.SHARDS || '1', 10);
  const keyPrefix = process.env.KEY_PREFIX;
  // FNV-1a, 32 bits, of the UTF-8 bytes: the shard of an idempotency key (README).
  const fnv1a32 = (text) => Buffer.from(text, 'utf8').reduce((h, b) => Math.imul(h ^ b, 0x01000193) >>> 0, 0x811c9dc5);
  const jobsKey = (key) => {
    if (shards === 1) return `apns:{${queue}}:jobs`;
    return `apns:{${queue}.${key ? fnv1a32(key) % shards : Math.floor(Math.random() * shards)}}:jobs`;
  };
  const client = createClient({ url: `redis://${host}:${port}` });
  client.on('error', (err) => { console.error(err); process.exit(1); });
  await client.connect();
  for (let i = 0; i < count; i++) {
    const job = {
      v: 1,
      id: `${prefix}-${i}`,
      token: 'c0' + i.toString(16).padStart(62, '0'),
      payload: { aps: { alert: { title: 'From Node', body: `Job ${i}` } } },
    };
    if (keyPrefix) job.idempotency_key = `${keyPrefix}-${i}`;
    await client.lPush(jobsKey(job.idempotency_key), JSON.stringify(job));
  }
  await client.quit();
  console.log(`enqueued ${count} jobs on queue ${queue} (${shards} shards)`);
}

main().catch((err) => { console.error(err); process.exit(1); });
