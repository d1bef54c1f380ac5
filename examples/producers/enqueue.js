#!/usr/bin/env node
// Enqueue notification jobs from Node with node-redis 4 (Debian's node-redis, or npm's redis).
// Debian installs it under /usr/share/nodejs: run with NODE_PATH=/usr/share/nodejs if needed.
// Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (js),
// SHARDS (1): a queue of N shards takes each job on one of apns:{Q.0}:jobs … apns:{Q.N-1}:jobs,
// here at random.
const { createClient } = require('redis');

async function main() {
  const host = process.env.REDIS_HOST || '127.0.0.1';
  const port = process.env.REDIS_PORT || '6379';
  const queue = process.env.QUEUE || 'default';
  const prefix = process.env.ID_PREFIX || 'js';
  const count = parseInt(process.env.COUNT || '1', 10);
  const shards = parseInt(process.env.SHARDS || '1', 10);
  const jobsKey = () => (shards === 1 ? `apns:{${queue}}:jobs` : `apns:{${queue}.${Math.floor(Math.random() * shards)}}:jobs`);
  const client = createClient({ url: `redis://${host}:${port}` });
  client.on('error', (err) => { console.error(err); process.exit(1); });
  await client.connect();
  for (let i = 0; i < count; i++) {
    await client.lPush(jobsKey(), JSON.stringify({
      v: 1,
      id: `${prefix}-${i}`,
      token: 'c0' + i.toString(16).padStart(62, '0'),
      payload: { aps: { alert: { title: 'From Node', body: `Job ${i}` } } },
    }));
  }
  await client.quit();
  console.log(`enqueued ${count} jobs on queue ${queue} (${shards} shards)`);
}

main().catch((err) => { console.error(err); process.exit(1); });
