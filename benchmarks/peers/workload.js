// The peers' side of turnstile's contention benchmark (see
// benchmarks/workload.h for turnstile's side, which this mirrors):
//
//   * uncontended: one contender, one key, lock+release pairs per second,
//     and per pair the server's own CPU (INFO cpu) and the commands it ran
//     (INFO commandstats, scripts' commands included), as turnstile's rows;
//   * N contenders (2, 8, 32) on one key with forced handoff: the holder
//     releases only once another contender waits in acquire, and competes
//     again only once another contender took the key. Reported: acquisitions
//     per second and the handoff gap (release call -> next holder's acquire
//     return), median and p99, in microseconds.
//
// Both libraries wait by polling. They are given a 1 ms retry interval (their
// defaults are 200 ms for redlock and 10 ms for redis-semaphore), the most
// favorable setting that does not spin.
//
//   node workload.js <port> [duration-ms]
// Prints one JSON object per line on stdout, progress on stderr.

'use strict';

const fs = require('fs');
const path = require('path');
const Redis = require('ioredis');
const Redlock = require('redlock').default;
const { Mutex, Semaphore } = require('redis-semaphore');

const port = Number(process.argv[2]);
const durationMs = Number(process.argv[3] || 1000);
const CONTENDER_COUNTS = [2, 8, 32];
const RETRY_MS = 1;
const LEASE_MS = 30000;
const POLL_MS = 1;
const FORCED_HANDOFF_WAIT_MS = 50;

// From node_modules directly: redlock's "exports" hides its package.json.
function version(name) {
  const file = path.join(__dirname, 'node_modules', name, 'package.json');
  return JSON.parse(fs.readFileSync(file, 'utf8')).version;
}

// redis-semaphore's primitives take one object per acquisition.
function redisSemaphore(create) {
  const options = { lockTimeout: LEASE_MS, acquireTimeout: 60000, retryInterval: RETRY_MS, refreshInterval: 0 };
  return {
    version: version('redis-semaphore'),
    make(connection, key) {
      let held = null;
      return {
        async acquire() {
          held = create(connection, key, options);
          await held.acquire();
        },
        async release() { await held.release(); held = null; },
      };
    },
  };
}

// Each library as: make(connection, key) -> { acquire(), release() }, one
// object per contender and key.
const LIBRARIES = {
  redlock: {
    version: version('redlock'),
    make(connection, key) {
      const redlock = new Redlock([connection], {
        retryCount: 1000000, retryDelay: RETRY_MS, retryJitter: 0, automaticExtensionThreshold: 500,
      });
      let lock = null;
      return {
        async acquire() { lock = await redlock.acquire([key], LEASE_MS); },
        async release() { await lock.release(); lock = null; },
      };
    },
  },
  'redis-semaphore Mutex': redisSemaphore((connection, key, options) => new Mutex(connection, key, options)),
  'redis-semaphore Semaphore': redisSemaphore((connection, key, options) => new Semaphore(connection, key, 1, options)),
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const nowUs = () => Number(process.hrtime.bigint()) / 1000;

function percentile(samples, fraction) {
  if (samples.length === 0) return 0;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(fraction * (sorted.length - 1))];
}

async function pollUntil(endUs, done) {
  const giveUpUs = Math.min(endUs, nowUs() + FORCED_HANDOFF_WAIT_MS * 1000);
  while (!done() && nowUs() < giveUpUs) await sleep(POLL_MS);
}

function connect() {
  return new Redis({ host: '127.0.0.1', port, lazyConnect: false, enableAutoPipelining: false });
}

// The server's CPU seconds (user + system) and commands run so far, the
// INFO calls themselves left out.
async function serverWork(connection) {
  const text = await connection.info('all');
  let cpuS = 0;
  let commands = 0;
  for (const line of text.split('\r\n')) {
    const cpu = /^used_cpu_(user|sys):([0-9.]+)$/.exec(line);
    if (cpu) cpuS += Number(cpu[2]);
    const stat = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (stat && stat[1] !== 'info') commands += Number(stat[2]);
  }
  return { cpuS, commands };
}

async function uncontended(library, key) {
  const connection = connect();
  const handle = library.make(connection, key);
  let pairs = 0;
  const before = await serverWork(connection);
  const start = nowUs();
  const end = start + durationMs * 1000;
  while (nowUs() < end) {
    await handle.acquire();
    await handle.release();
    pairs += 1;
  }
  const seconds = (nowUs() - start) / 1e6;
  const after = await serverWork(connection);
  connection.disconnect();
  return {
    pairs_per_s: pairs / seconds,
    pairs,
    seconds,
    redis_cpu_us_per_pair: ((after.cpuS - before.cpuS) * 1e6) / pairs,
    commands_per_pair: (after.commands - before.commands) / pairs,
  };
}

async function forcedHandoff(library, key, contenders) {
  const record = { holder: -1, releaseCallUs: 0, waiting: 0 };
  const gaps = [];
  let acquisitions = 0;
  let handoffs = 0;
  const connections = [];
  const start = nowUs();
  const end = start + durationMs * 1000;
  const run = async (me) => {
    const connection = connect();
    connections.push(connection);
    const handle = library.make(connection, key);
    while (nowUs() < end) {
      record.waiting += 1;
      await handle.acquire();
      const acquiredUs = nowUs();
      record.waiting -= 1;
      acquisitions += 1;
      if (record.holder >= 0 && record.holder !== me) {
        handoffs += 1;
        gaps.push(acquiredUs - record.releaseCallUs);
      }
      record.holder = me;
      await pollUntil(end, () => record.waiting > 0);
      record.releaseCallUs = nowUs();
      await handle.release();
      await pollUntil(end, () => record.holder !== me);
    }
  };
  await Promise.all(Array.from({ length: contenders }, (_, me) => run(me)));
  const seconds = (nowUs() - start) / 1e6;
  for (const connection of connections) connection.disconnect();
  return {
    acquisitions,
    acquisitions_per_s: acquisitions / seconds,
    handoffs,
    handoff_share: acquisitions ? handoffs / acquisitions : 0,
    gap_median_us: percentile(gaps, 0.5),
    gap_p99_us: percentile(gaps, 0.99),
    gap_samples: gaps.length,
    seconds,
  };
}

async function main() {
  if (!Number.isInteger(port) || port <= 0) throw new Error('usage: node workload.js <port> [duration-ms]');
  let run = 0;
  for (const [name, library] of Object.entries(LIBRARIES)) {
    const common = { kind: 'peer', library: name, version: library.version, retry_ms: RETRY_MS };
    const pairs = await uncontended(library, `peers:${run++}`);
    console.error(`  peer  ${name} ${library.version} uncontended: ${pairs.pairs_per_s.toFixed(0)} pairs/s`);
    console.log(JSON.stringify({ ...common, workload: 'uncontended', contenders: 1, ...pairs }));
    for (const contenders of CONTENDER_COUNTS) {
      const result = await forcedHandoff(library, `peers:${run++}`, contenders);
      console.error(`  peer  ${name} ${contenders} contenders, forced handoff: ` +
        `${result.acquisitions_per_s.toFixed(0)} acq/s, gap median ${result.gap_median_us.toFixed(0)} us ` +
        `p99 ${result.gap_p99_us.toFixed(0)} us`);
      console.log(JSON.stringify({ ...common, workload: 'forced_handoff', contenders, ...result }));
    }
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(`peers: ${error.stack || error}`);
  process.exit(1);
});
