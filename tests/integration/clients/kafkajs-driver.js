#!/usr/bin/env node
// KafkaJS 2.2.4 driver. Command-line contract: README.md in this folder.
// stdout carries only JSON lines; KafkaJS's own log goes to stderr ($RAFKA_CLIENT_LOG level).
'use strict'

const path = require('path')
// Modules come from ./node/node_modules (installed by setup.sh), wherever we are run from.
const nodeRequire = require('module').createRequire(path.join(__dirname, 'node', 'package.json'))
const { Kafka, logLevel, CompressionTypes, CompressionCodecs, Partitioners, AssignerProtocol } =
  nodeRequire('kafkajs')
const Batch = nodeRequire('kafkajs/src/consumer/batch')
const ConsumerGroup = nodeRequire('kafkajs/src/consumer/consumerGroup')
const { KafkaJSError } = nodeRequire('kafkajs/src/errors')
const { errorCodes } = nodeRequire('kafkajs/src/protocol/error')

// KafkaJS 2.2.4 predates error code 90 (Kafka 2.7): without this it reports a fenced producer as
// "Unknown error code 90". The entry is Kafka's (Errors.PRODUCER_FENCED).
if (!errorCodes.some(e => e.code === 90)) {
  errorCodes.push({
    type: 'PRODUCER_FENCED',
    code: 90,
    retriable: false,
    message:
      'There is a newer producer with the same transactionalId which fences the current one.',
  })
}

// KafkaJS has gzip built in; the other codecs are plug-ins registered on its codec table.
CompressionCodecs[CompressionTypes.Snappy] = nodeRequire('kafkajs-snappy')
const LZ4Codec = nodeRequire('kafkajs-lz4')
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
// zstd: the plug-ins on npm don't load here (@kafkajs/zstd's cppzst fails to build against
// Node 20 headers; @sensejs/kafkajs-zstd-support's CommonJS build throws "__importDefault is
// not defined"), so this is the latter's six lines, on the same zstd-napi binding.
const zstd = nodeRequire('zstd-napi')
CompressionCodecs[CompressionTypes.ZSTD] = () => {
  const compressor = new zstd.Compressor()
  const decompressor = new zstd.Decompressor() // also handles frames without a content size
  return {
    compress: async encoder => compressor.compress(encoder.buffer),
    decompress: async buffer => decompressor.decompress(buffer),
  }
}

const EXIT_FAILED = 1
const EXIT_USAGE = 2
const EXIT_UNSUPPORTED = 3
const EXIT_TOPIC_EXISTS = 4
const FILLER = 'abcdefghijklmnopqrstuvwxyz0123456789'
const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}
const SEND_CHUNK = 500 // records per send(): keeps each partition's batch well under 1 MiB

class Failure extends Error {}

function usage(why) {
  process.stderr.write(
    'usage: kafkajs-driver.js <create-topic|produce|consume|offsets-for-times|group-consume|' +
      'describe-group|committed|commit|txn-produce|txn-copy|txn-fence|admin <action>> ' +
      `--bootstrap B --topic T ... (${why})\n`
  )
  process.exit(EXIT_USAGE) // nothing is on stdout yet
}

function parseOptions(argv) {
  const opts = {}
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) usage(`bad option ${argv[i]}`)
    opts[argv[i].slice(2)] = argv[i + 1]
  }
  return opts
}

const required = (opts, name) => (name in opts ? opts[name] : usage(`missing --${name}`))
// ASCII-only JSON, like the other drivers: latin-1 strings may hold U+0085, which some line
// splitters (Python's str.splitlines) treat as a line break.
const asciiEscape = c => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')
const print = obj =>
  process.stdout.write(JSON.stringify(obj).replace(/[\u007f-\uffff]/g, asciiEscape) + '\n')
// Binary fields are printed as latin-1 strings: one character per byte (README.md).
const bin = buf => (buf == null ? null : Buffer.from(buf).toString('latin1'))

// Whether a broker answered SaslAuthenticate with an error (KafkaJS logs it, then throws a
// KafkaJSSASLAuthenticationError that keeps only the broker's text).
let saslRefused = false

function stderrLogCreator() {
  return ({ namespace, level, log }) => {
    const { message, timestamp, logger, ...extra } = log
    if (namespace === 'Connection' && message.startsWith('Response SaslAuthenticate')) {
      saslRefused = true
    }
    const name = Object.keys(logLevel).find(k => logLevel[k] === level) ?? level
    process.stderr.write(`[kafkajs ${name} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

// $RAFKA_CLIENT_SECURITY (README.md, "Security") as KafkaJS's ssl and sasl options.
function securityOptions() {
  const raw = (process.env.RAFKA_CLIENT_SECURITY || '').trim()
  const sec = raw ? JSON.parse(raw) : {}
  const protocol = sec.protocol || 'PLAINTEXT'
  const out = {}
  if (protocol === 'SSL' || protocol === 'SASL_SSL') {
    const fs = require('fs')
    out.ssl = sec.ca ? { ca: [fs.readFileSync(sec.ca, 'utf-8')] } : {}
    if (sec.cert) {
      out.ssl.cert = fs.readFileSync(sec.cert, 'utf-8')
      out.ssl.key = fs.readFileSync(sec.key, 'utf-8')
    }
  }
  if (protocol.startsWith('SASL_')) {
    if (sec.tokenauth) {
      process.stderr.write('KafkaJS has no delegation tokens (SCRAM tokenauth extension)\n')
      process.exit(EXIT_UNSUPPORTED)
    }
    const mechanism = sec.mechanism.toLowerCase()
    out.sasl =
      mechanism === 'oauthbearer'
        ? { mechanism, oauthBearerProvider: async () => ({ value: sec.token }) }
        : { mechanism, username: sec.username, password: sec.password }
  }
  return out
}

function makeKafka(bootstrap, timeoutMs) {
  const level = (process.env.RAFKA_CLIENT_LOG || 'WARN').toUpperCase()
  return new Kafka({
    ...securityOptions(),
    clientId: 'rafka-kafkajs-driver',
    brokers: bootstrap.split(','),
    connectionTimeout: 3000,
    requestTimeout: Math.min(30000, timeoutMs),
    logLevel: logLevel[level === 'WARNING' ? 'WARN' : level] ?? logLevel.WARN,
    logCreator: stderrLogCreator,
    retry: { retries: 8, maxRetryTime: 2000 },
  })
}

// ---- commands -------------------------------------------------------------------------

async function createTopic(kafka, topic, opts, timeoutMs) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [
        {
          topic,
          numPartitions: parseInt(required(opts, 'partitions'), 10),
          // -1 = the broker's default.
          replicationFactor: parseInt(opts['replication-factor'] ?? '-1', 10),
        },
      ],
      waitForLeaders: true, // KafkaJS then polls Metadata until every partition has a leader
      timeout: timeoutMs,
    })
    // KafkaJS swallows TOPIC_ALREADY_EXISTS and returns false instead.
    if (!created) {
      process.stderr.write(`create-topic: topic already exists: ${topic}\n`)
      return EXIT_TOPIC_EXISTS
    }
    print({ topic, partitions: parseInt(opts.partitions, 10) })
    return 0
  } finally {
    await admin.disconnect()
  }
}

function recordValue(i) {
  let filler = ''
  for (let j = 0; j < (i * 37) % 200; j++) filler += FILLER[(i + j) % FILLER.length]
  return Buffer.from(`value-${i}-${filler}`)
}

// Reference record i (README.md, "produce") as a KafkaJS message.
const referenceMessage = (i, startTs) => ({
  key: `key-${i}`,
  value: recordValue(i),
  headers: { h1: `v-${i}`, h2: Buffer.from([0x00, 0xff, i % 256]) },
  timestamp: String(startTs + i),
})

async function produce(kafka, topic, opts, timeoutMs) {
  const count = parseInt(required(opts, 'count'), 10)
  const acks = parseInt(opts.acks ?? '-1', 10)
  const compression = COMPRESSION[opts.compression ?? 'none']
  if (compression === undefined) usage(`unknown compression ${opts.compression}`)
  const startTs = opts['start-ts'] !== undefined ? Number(opts['start-ts']) : Date.now()

  // send() reports a base offset per partition, not per record. To print each record's
  // partition and offset we wrap KafkaJS's own default (Java-compatible murmur2) partitioner
  // and remember what it chose for each message object; within one send() KafkaJS keeps each
  // partition's messages in order in a single record batch, so offset = base + position.
  const chosen = new Map()
  const producer = kafka.producer({
    createPartitioner: () => {
      const partitioner = Partitioners.DefaultPartitioner()
      return args => {
        const p = partitioner(args)
        chosen.set(args.message, p)
        return p
      }
    },
    // Idempotence stays off (KafkaJS default) until the broker implements InitProducerId.
    idempotent: false,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  try {
    for (let first = 0; first < count; first += SEND_CHUNK) {
      const messages = []
      for (let i = first; i < Math.min(count, first + SEND_CHUNK); i++) {
        messages.push(referenceMessage(i, startTs))
      }
      chosen.clear()
      const results = await producer.send({ topic, messages, acks, compression, timeout: timeoutMs })
      const base = new Map(results.map(r => [r.partition, r]))
      const position = new Map()
      for (const m of messages) {
        const p = chosen.get(m)
        const pos = position.get(p) ?? 0
        position.set(p, pos + 1)
        const r = base.get(p) // absent with acks=0: there is no response
        const logAppend = r && Number(r.logAppendTime) !== -1 ? Number(r.logAppendTime) : null
        print({
          key: m.key,
          partition: p,
          offset: r ? Number(r.baseOffset) + pos : -1,
          timestamp: logAppend ?? Number(m.timestamp),
        })
      }
    }
    return 0
  } finally {
    await producer.disconnect()
  }
}

// KafkaJS's consumer only works inside a consumer group (JoinGroup/SyncGroup/Heartbeat/
// OffsetFetch...), which Rafka does not implement yet. So `consume` drives KafkaJS's protocol
// layer directly, without a group:
//   - kafka[<private createCluster symbol>]() builds the same Cluster object that
//     kafka.consumer()/admin() use internally (same config; the symbol isn't exported);
//   - cluster.addTargetTopic / findTopicPartitionMetadata / findLeaderForPartitions /
//     findBroker give the partitions and their leaders from KafkaJS's Metadata handling;
//   - admin.fetchTopicOffsets() (public) gives each partition's log start (= "beginning");
//   - broker.fetch() sends KafkaJS's own Fetch request and decodes the response with its
//     record-batch decoders and registered codecs; kafkajs/src/consumer/batch.js then drops
//     records below the fetch offset and control records, exactly as the consumer does.
// Like KafkaJS's consumer, fetches use isolation level READ_COMMITTED unless --isolation-level
// says read_uncommitted.
function createCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(
    s => s.description === 'private:Kafka:createCluster'
  )
  if (!sym) throw new Failure('KafkaJS internals changed: no createCluster symbol')
  return kafka[sym]({ allowAutoTopicCreation: false })
}

const ISOLATION = { read_uncommitted: 0, read_committed: 1 }

function fetchRequest(topic, partitions, next, maxWaitTime, isolationLevel) {
  return {
    maxWaitTime,
    minBytes: 1,
    maxBytes: 10485760,
    isolationLevel,
    topics: [
      {
        topic,
        partitions: partitions.map(p => ({
          partition: p,
          fetchOffset: String(next.get(p)),
          maxBytes: 1048576,
        })),
      },
    ],
  }
}

async function consume(kafka, topic, opts) {
  const expect = parseInt(required(opts, 'expect'), 10)
  const deadline = Date.now() + Number(opts.timeout ?? '30') * 1000
  const isolation = ISOLATION[opts['isolation-level'] ?? 'read_committed']
  if (isolation === undefined) usage(`bad --isolation-level ${opts['isolation-level']}`)
  const admin = kafka.admin()
  const cluster = createCluster(kafka)
  await admin.connect()
  await cluster.connect()
  let seen = 0
  try {
    await cluster.addTargetTopic(topic)
    const next = new Map() // partition -> next fetch offset
    for (const { partition, low } of await admin.fetchTopicOffsets(topic)) {
      next.set(partition, low)
    }
    while (seen < expect && Date.now() < deadline) {
      const byLeader = cluster.findLeaderForPartitions(topic, [...next.keys()])
      for (const [nodeId, partitions] of Object.entries(byLeader)) {
        const broker = await cluster.findBroker({ nodeId })
        const maxWaitTime = Math.max(1, Math.min(500, deadline - Date.now()))
        let responses
        try {
          ;({ responses } = await broker.fetch(
            fetchRequest(topic, partitions, next, maxWaitTime, isolation)
          ))
        } catch (e) {
          // e.g. NOT_LEADER_OR_FOLLOWER while leadership moves: refresh, retry until the deadline.
          if (!e.retriable) throw e
          process.stderr.write(`consume: retrying after ${e.message}\n`)
          await cluster.refreshMetadata()
          continue
        }
        for (const { partitions: parts } of responses) {
          for (const data of parts) {
            const batch = new Batch(topic, next.get(data.partition), data)
            if (batch.isEmptyIncludingFiltered()) continue
            for (const m of batch.messages) {
              if (seen === expect) break
              seen++
              const headers = []
              for (const [k, v] of Object.entries(m.headers)) {
                // KafkaJS folds repeated header keys into an array (order kept per key only).
                for (const one of Array.isArray(v) ? v : [v]) headers.push([k, bin(one)])
              }
              print({
                partition: batch.partition,
                offset: Number(m.offset),
                key: bin(m.key),
                value: bin(m.value),
                headers,
                timestamp: Number(m.timestamp),
                timestamp_type: m.batchContext.timestampType === 1 ? 'LogAppendTime' : 'CreateTime',
              })
            }
            next.set(data.partition, String(BigInt(batch.lastOffset()) + 1n))
          }
        }
      }
    }
  } finally {
    await cluster.disconnect()
    await admin.disconnect()
  }
  if (seen < expect) throw new Failure(`consume: timed out with ${seen} of ${expect} records`)
  return 0
}

async function offsetsForTimes(kafka, topic, opts) {
  const ts = Number(required(opts, 'timestamp'))
  const admin = kafka.admin()
  await admin.connect()
  try {
    const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, ts)
    // KafkaJS replaces "no such record" (-1 from ListOffsets) by the partition's high
    // watermark. A record's offset is always below the high watermark, so map it back to -1
    // (exact unless something is producing to the topic at the same time).
    const high = new Map((await admin.fetchTopicOffsets(topic)).map(p => [p.partition, p.high]))
    const out = {}
    for (const { partition, offset } of byTime.sort((a, b) => a.partition - b.partition)) {
      out[partition] = offset === high.get(partition) ? -1 : Number(offset)
    }
    print(out)
    return 0
  } finally {
    await admin.disconnect()
  }
}

// ---- consumer groups ------------------------------------------------------------------
// group-consume runs one member of a consumer group with KafkaJS's own consumer (subscribe +
// run) and prints what happens to it as JSON events; describe-group, committed and commit look
// at / write the group's offsets. Contract: README.md ("Consumer groups").

const event = (kind, fields = {}) => print({ event: kind, ...fields, t: Date.now() })

// A KafkaJS error as Kafka's protocol error name (ILLEGAL_GENERATION, ...) when it wraps one
// (retriers wrap the broker's error in `cause` / `originalError`), else its class name.
function errorName(e) {
  for (let x = e; x; x = x.cause ?? x.originalError) {
    if (x.type) return x.type
    // Per-partition errors (e.g. AlterPartitionReassignments) come as an aggregate.
    if (x.name === 'KafkaJSAggregateError' && x.errors?.length) return errorName(x.errors[0])
    // The broker refused the SaslAuthenticate (error code 58; KafkaJS keeps only its text).
    if (x.name === 'KafkaJSSASLAuthenticationError' && saslRefused)
      return 'SASL_AUTHENTICATION_FAILED'
    if (x === (x.cause ?? x.originalError)) break
  }
  return e.name
}
const seconds = (opts, name, dflt) => (name in opts ? Math.round(Number(opts[name]) * 1000) : dflt)

function parsePairs(spec) {
  const out = new Map()
  for (const item of (spec ?? '').split(',')) {
    if (item.trim()) {
      const [p, o] = item.split(':')
      out.set(parseInt(p, 10), parseInt(o, 10))
    }
  }
  return out
}

// "P:O[@A],...": partition -> {to: O, at: A} (at null: the partition's first message).
function parseSeeks(spec) {
  const out = new Map()
  for (const item of (spec ?? '').split(',')) {
    if (item.trim()) {
      const [p, rest] = item.split(':')
      const [to, at] = rest.split('@')
      const seek = { to: parseInt(to, 10), at: at === undefined ? null : parseInt(at, 10) }
      out.set(parseInt(p, 10), seek)
    }
  }
  return out
}

const parseInts = spec =>
  new Set(
    (spec ?? '')
      .split(',')
      .filter(x => x.trim())
      .map(x => parseInt(x, 10))
  )

// KafkaJS has no rebalance listener: its consumer gives up its whole assignment when it
// (re)joins (eager protocol) and reports the new one in GROUP_JOIN, without the generation.
// Wrapping ConsumerGroup#joinAndSync (the same module instance the consumer uses) reports
// both moments, with the generation and member id KafkaJS got from JoinGroup.
let groupHooks = null
const originalJoinAndSync = ConsumerGroup.prototype.joinAndSync
ConsumerGroup.prototype.joinAndSync = async function (...args) {
  if (groupHooks) groupHooks.beforeJoin(this)
  const result = await originalJoinAndSync.apply(this, args)
  if (groupHooks) groupHooks.afterJoin(this)
  return result
}

// Thrown out of eachMessage to stop without resolving the message (it is not processed).
class Unprocessed extends KafkaJSError {}

async function groupConsume(kafka, topic, opts) {
  const groupId = required(opts, 'group')
  const commit = opts.commit ?? 'auto'
  const each = opts.each ?? 'message'
  if (!['auto', 'offsets', 'none'].includes(commit)) usage(`KafkaJS: --commit ${commit}`)
  if (!['message', 'batch'].includes(each)) usage(`bad --each ${each}`)
  if ((opts.protocol ?? 'classic') !== 'classic' || opts['instance-id'] !== undefined) {
    process.stderr.write('KafkaJS has neither KIP-848 nor static membership\n')
    return EXIT_UNSUPPORTED
  }
  if ((opts.assignor ?? 'roundrobin') !== 'roundrobin') usage('KafkaJS has only roundrobin')
  const processMs = Number(opts['process-ms'] ?? '0')
  const stallAt = parseInt(opts['stall-at'] ?? '0', 10)
  const stallMs = Number(opts['stall-ms'] ?? '0')
  const maxRecords = parseInt(opts['max-records'] ?? '0', 10)
  const durationMs = seconds(opts, 'duration', 0)
  const commitEvery = parseInt(opts['commit-every'] ?? '1', 10)
  const seeks = parseSeeks(opts.seek)
  const pauseSet = parseInts(opts.pause)
  const resumeAfterMs = Number(opts['resume-after-ms'] ?? '0')
  const started = Date.now()

  let records = 0
  let owned = []
  let pausedParts = []
  let pauseState = pauseSet.size ? 'pending' : 'done' // -> paused -> done
  let resumePaused = null
  const inFlight = new Set()
  let maxInFlight = 0
  let stopping = null

  const consumer = kafka.consumer({
    groupId,
    sessionTimeout: seconds(opts, 'session-timeout', 30000),
    heartbeatInterval: seconds(opts, 'heartbeat-interval', 3000),
    rebalanceTimeout: seconds(opts, 'max-poll-interval', 60000),
    maxWaitTimeInMs: 500,
    allowAutoTopicCreation: false,
  })
  groupHooks = {
    beforeJoin: () => {
      if (owned.length) event('revoked', { partitions: owned, owned: [] })
      owned = []
    },
    afterJoin: cg => {
      const mine = cg.assigned().find(a => a.topic === topic)
      owned = [...(mine ? mine.partitions : [])].sort((a, b) => a - b)
      event('assigned', {
        partitions: owned,
        owned,
        generation: cg.generationId,
        member_id: cg.memberId,
      })
    },
  }
  consumer.on(consumer.events.COMMIT_OFFSETS, ({ payload }) => {
    const offsets = {}
    for (const t of payload.topics) {
      if (t.topic === topic) for (const p of t.partitions) offsets[p.partition] = Number(p.offset)
    }
    event('commit', { via: 'callback', offsets, error: null, partition_errors: {} })
  })
  // The consumer stopped (after leaving the group): also after a crash, before KafkaJS restarts
  // it (restartOnFailure) as a new member.
  consumer.on(consumer.events.STOP, () => {
    if (owned.length) event('revoked', { partitions: owned, owned: [] })
    owned = []
  })
  consumer.on(consumer.events.CRASH, async ({ payload }) => {
    const e = payload.error
    const error = await coordinatorError(kafka, groupId, e)
    event('error', { error, message: e.message, restart: payload.restart })
  })

  const done = () =>
    stopping !== null ||
    (maxRecords > 0 && records >= maxRecords) ||
    (durationMs > 0 && Date.now() - started >= durationMs)
  let stopped
  const stopDone = new Promise(resolve => (stopped = resolve))
  const stop = () => {
    if (stopping === null) {
      stopping = consumer.disconnect().then(stopped, e => {
        event('error', { error: errorName(e), message: e.message })
        stopped()
      })
    }
  }
  const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
  const resumeNow = () => {
    if (pauseState !== 'paused') return
    pauseState = 'done'
    resumePaused()
    event('resumed', { partitions: pausedParts })
  }
  if (opts['stop-on-eof'] === 'true') {
    // Lines on stdin: "stop" (as its end does), "resume" (the paused partition).
    let buffered = ''
    process.stdin.on('data', chunk => {
      const lines = (buffered + chunk).split('\n')
      buffered = lines.pop()
      for (const line of lines) {
        if (line.trim() === 'stop') stop()
        if (line.trim() === 'resume') resumeNow()
      }
    })
    process.stdin.on('end', stop)
  }
  const timer = setInterval(() => done() && stop(), 100)

  // One record; returns false when it was not processed (seek or pause: not resolved).
  async function handle(partition, message, pause) {
    const offset = Number(message.offset)
    const seek = seeks.get(partition)
    if (seek && (seek.at === null || seek.at === offset)) {
      seeks.delete(partition)
      event('seek', { partition, offset: seek.to, at: offset })
      if (seek.to !== offset) {
        consumer.seek({ topic, partition, offset: String(seek.to) })
        return false
      }
    }
    if (pauseState === 'pending' && pauseSet.has(partition)) {
      // The docs' pattern: pause() the message's partition and throw, so this message is
      // delivered again after the resume.
      pauseState = 'paused'
      pausedParts = [partition]
      resumePaused = pause()
      event('paused', { partitions: pausedParts })
      if (resumeAfterMs > 0) setTimeout(resumeNow, resumeAfterMs) // the docs: retryAfter
      throw new Unprocessed(`paused partition ${partition}`)
    }
    inFlight.add(partition)
    maxInFlight = Math.max(maxInFlight, inFlight.size)
    // --stall-at: KafkaJS heartbeats between messages only, so a long stall gets it kicked out.
    const work = processMs + (records + 1 === stallAt ? stallMs : 0)
    if (work) await sleep(work)
    inFlight.delete(partition)
    records++
    event('record', { partition, offset, key: bin(message.key), in_flight: inFlight.size + 1 })
    if (commit === 'offsets' && records % commitEvery === 0) {
      const offsets = { [partition]: offset + 1 }
      try {
        await consumer.commitOffsets([{ topic, partition, offset: String(offset + 1) }])
        event('commit', { via: 'offsets', offsets, error: null, partition_errors: {} })
      } catch (e) {
        event('commit', { via: 'offsets', offsets, error: errorName(e), partition_errors: {} })
      }
    }
    return true
  }

  const run = {
    autoCommit: commit === 'auto',
    autoCommitInterval: seconds(opts, 'auto-commit-interval', null),
    autoCommitThreshold: opts['auto-commit-threshold']
      ? parseInt(opts['auto-commit-threshold'], 10)
      : null,
    partitionsConsumedConcurrently: parseInt(opts.concurrency ?? '1', 10),
  }
  if (each === 'message') {
    run.eachMessage = async ({ partition, message, pause }) => {
      if (done()) {
        stop()
        throw new Unprocessed('stopping')
      }
      await handle(partition, message, pause)
    }
  } else {
    // The docs' eachBatch loop: resolve each processed offset, heartbeat, commit if due.
    run.eachBatchAutoResolve = false
    run.eachBatch = async ({
      batch,
      resolveOffset,
      heartbeat,
      commitOffsetsIfNecessary,
      isRunning,
      isStale,
      pause,
    }) => {
      event('batch', { partition: batch.partition, size: batch.messages.length })
      for (const message of batch.messages) {
        if (!isRunning() || isStale() || done()) break
        if (!(await handle(batch.partition, message, pause))) break
        resolveOffset(message.offset)
        await heartbeat()
        await commitOffsetsIfNecessary()
      }
    }
  }
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: (opts['offset-reset'] ?? 'earliest') === 'earliest' })
  await consumer.run(run)
  await stopDone
  clearInterval(timer)
  event('closed', { records, max_in_flight: maxInFlight })
  return 0
}

async function describeGroup(kafka, opts) {
  const groupId = required(opts, 'group')
  const admin = kafka.admin()
  const cluster = createCluster(kafka)
  await admin.connect()
  await cluster.connect()
  try {
    const coordinator = await cluster.findGroupCoordinator({ groupId })
    const { groups } = await admin.describeGroups([groupId])
    const g = groups[0]
    const members = g.members.map(m => {
      const decoded = m.memberAssignment.length
        ? AssignerProtocol.MemberAssignment.decode(m.memberAssignment)
        : null
      const partitions = []
      for (const [t, ps] of Object.entries(decoded ? decoded.assignment : {})) {
        for (const p of ps) partitions.push([t, p])
      }
      return {
        member_id: m.memberId,
        instance_id: null,
        client_id: m.clientId,
        host: m.clientHost,
        partitions: partitions.sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] < b[0] ? -1 : 1)),
      }
    })
    print({
      group: g.groupId,
      error: null,
      state: g.state,
      type: null,
      protocol: g.protocol,
      coordinator: coordinator.nodeId,
      members,
    })
    return 0
  } finally {
    await cluster.disconnect()
    await admin.disconnect()
  }
}

async function committed(kafka, topic, opts) {
  const groupId = required(opts, 'group')
  const admin = kafka.admin()
  await admin.connect()
  try {
    const [res] = await admin.fetchOffsets({ groupId, topics: [topic] })
    const out = {}
    for (const { partition, offset } of res.partitions.sort((a, b) => a.partition - b.partition)) {
      out[partition] = Number(offset) < 0 ? -1 : Number(offset)
    }
    print(out)
    return 0
  } finally {
    await admin.disconnect()
  }
}

// cluster.findGroupCoordinator asks every broker and, when all fail, throws
// The error name of a consumer crash. KafkaJS reports a FindCoordinator refusal (e.g.
// GROUP_AUTHORIZATION_FAILED) as KafkaJSGroupCoordinatorNotFound without the broker's error:
// then ask the seed broker again for it.
async function coordinatorError(kafka, groupId, e) {
  if (e.name !== 'KafkaJSGroupCoordinatorNotFound') return errorName(e)
  const cluster = createCluster(kafka)
  try {
    await cluster.connect()
    await cluster.brokerPool.seedBroker.findGroupCoordinator({ groupId, coordinatorType: 0 })
    return errorName(e)
  } catch (again) {
    return errorName(again)
  } finally {
    await cluster.disconnect()
  }
}

// KafkaJSGroupCoordinatorNotFound without the brokers' error: ask the seed broker again to
// report what it answered (e.g. INVALID_GROUP_ID).
async function findCoordinator(cluster, groupId) {
  try {
    return await cluster.findGroupCoordinator({ groupId })
  } catch (e) {
    if (e.name !== 'KafkaJSGroupCoordinatorNotFound') throw e
    await cluster.brokerPool.seedBroker.findGroupCoordinator({ groupId, coordinatorType: 0 })
    throw e
  }
}

// commit: one OffsetCommit through KafkaJS's protocol layer (the coordinator's Broker object,
// as KafkaJS's consumer sends it), with --member-id/--generation if given (else '' and -1, as a
// client outside the group). KafkaJS turns an error code into an exception: one error for all.
async function commitOffsets(kafka, topic, opts) {
  const groupId = required(opts, 'group')
  const offsets = parsePairs(required(opts, 'offsets'))
  const cluster = createCluster(kafka)
  await cluster.connect()
  const partitions = {}
  let error = null
  try {
    const coordinator = await findCoordinator(cluster, groupId)
    await coordinator.offsetCommit({
      groupId,
      groupGenerationId: parseInt(opts.generation ?? '-1', 10),
      memberId: opts['member-id'] ?? '',
      topics: [
        {
          topic,
          partitions: [...offsets].map(([partition, offset]) => ({
            partition,
            offset: String(offset),
          })),
        },
      ],
    })
  } catch (e) {
    if (errorName(e) === e.name) throw e
    error = errorName(e)
  } finally {
    await cluster.disconnect()
  }
  for (const p of offsets.keys()) partitions[p] = error
  print({ error, partitions })
  return 0
}

// ---- transactions ---------------------------------------------------------------------
// txn-produce, txn-copy and txn-fence: contract in README.md ("Transactions"). KafkaJS's
// transactional API: producer.transaction() (InitProducerId the first time, then a new
// transaction), transaction.send / sendOffsets({ consumerGroupId, topics }) / commit / abort.

function txnProducer(kafka, transactionalId) {
  return kafka.producer({
    transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    // Bounded (KafkaJS's idempotent default retries forever): a stuck broker fails the command.
    retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 2000 },
  })
}

function parseEnds(opts) {
  const ends = (opts.end ?? 'commit').split(',')
  if (!ends.every(e => e === 'commit' || e === 'abort')) usage(`bad --end ${opts.end}`)
  return ends
}

// --hold true: a transaction waits for a line on stdin before it ends; stdin's end releases
// this and every later hold.
function makeHold(opts) {
  let on = opts.hold === 'true'
  if (!on) return async () => {}
  const lines = []
  let ended = false
  let waiter = null
  const wake = got => {
    const w = waiter
    waiter = null
    if (w) w(got)
    return w !== null
  }
  const rl = require('readline').createInterface({ input: process.stdin })
  rl.on('line', line => wake(true) || lines.push(line))
  rl.on('close', () => {
    ended = true
    wake(false)
  })
  return async txn => {
    if (!on) return
    event('hold', { txn })
    if (lines.length) lines.shift()
    else if (ended) on = false
    else on = await new Promise(resolve => (waiter = resolve))
  }
}

async function sendAll(txn, topic, messages, timeoutMs) {
  for (let at = 0; at < messages.length; at += SEND_CHUNK) {
    const chunk = messages.slice(at, at + SEND_CHUNK)
    await txn.send({ topic, messages: chunk, acks: -1, timeout: timeoutMs })
  }
}

async function txnProduce(kafka, topic, opts, timeoutMs) {
  const count = parseInt(required(opts, 'count'), 10)
  const batches = parseInt(opts.batches ?? '1', 10)
  const startTs = opts['start-ts'] !== undefined ? Number(opts['start-ts']) : Date.now()
  const ends = parseEnds(opts)
  const hold = makeHold(opts)
  const producer = txnProducer(kafka, required(opts, 'transactional-id'))
  await producer.connect()
  try {
    for (let k = 0; k < batches; k++) {
      const first = Math.floor((k * count) / batches)
      const end = Math.floor(((k + 1) * count) / batches)
      const messages = []
      for (let i = first; i < end; i++) messages.push(referenceMessage(i, startTs))
      const txn = await producer.transaction()
      await sendAll(txn, topic, messages, timeoutMs)
      await hold(k)
      const how = ends[k % ends.length]
      await (how === 'commit' ? txn.commit() : txn.abort())
      event(how, { txn: k, first, count: end - first })
    }
    return 0
  } finally {
    await producer.disconnect()
  }
}

// The seed's consume-transform-produce loop: eachBatch, a transaction per chunk of --batch
// messages of one partition, transaction.sendOffsets({ consumerGroupId, topics }).
async function txnCopy(kafka, topic, opts, timeoutMs) {
  const output = required(opts, 'output')
  const groupId = required(opts, 'group')
  const count = parseInt(opts.count ?? '0', 10)
  const batchSize = parseInt(opts.batch ?? '10', 10)
  const maxBatches = parseInt(opts['max-batches'] ?? '0', 10)
  const idleMs = seconds(opts, 'idle', 0)
  const ends = parseEnds(opts)
  const hold = makeHold(opts)
  const producer = txnProducer(kafka, required(opts, 'transactional-id'))
  const consumer = kafka.consumer({
    groupId,
    readUncommitted: false,
    maxWaitTimeInMs: 500,
    allowAutoTopicCreation: false,
  })
  let committed = 0
  let aborted = 0
  let txnNo = 0
  let last = Date.now()
  let failure = null
  let timedOut = false
  let stopping = null
  const deadline = last + timeoutMs
  const finished = () =>
    (count > 0 && committed >= count) || (maxBatches > 0 && txnNo >= maxBatches)
  let stopped
  const stopDone = new Promise(resolve => (stopped = resolve))
  const stop = () => {
    if (stopping === null) {
      stopping = consumer.disconnect().then(stopped, e => {
        failure = failure ?? e
        stopped()
      })
    }
  }
  const timer = setInterval(() => {
    const now = Date.now()
    if (finished() || (idleMs > 0 && now - last >= idleMs)) stop()
    else if (now >= deadline) {
      timedOut = true
      stop()
    }
  }, 100)
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    if (!payload.restart) {
      failure = failure ?? payload.error
      stop()
    }
  })
  await producer.connect()
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      const { partition, messages } = batch
      for (let at = 0; at < messages.length; at += batchSize) {
        if (!isRunning() || isStale() || stopping !== null || finished()) return
        const chunk = messages.slice(at, at + batchSize)
        const lastOffset = chunk[chunk.length - 1].offset
        const next = String(BigInt(lastOffset) + 1n)
        last = Date.now()
        const how = ends[txnNo % ends.length]
        try {
          const transaction = await producer.transaction()
          const copies = chunk.map(m => ({
            key: m.key,
            value: m.value,
            headers: { src: `${partition}:${m.offset}` },
          }))
          await sendAll(transaction, output, copies, timeoutMs)
          await transaction.sendOffsets({
            consumerGroupId: groupId,
            topics: [{ topic, partitions: [{ partition, offset: next }] }],
          })
          await hold(txnNo)
          await (how === 'commit' ? transaction.commit() : transaction.abort())
        } catch (e) {
          failure = failure ?? e // e.g. fenced: fatal for this producer
          stop()
          return
        }
        if (how === 'commit') {
          committed += chunk.length
          resolveOffset(lastOffset)
        } else {
          aborted += chunk.length
          consumer.seek({ topic, partition, offset: chunk[0].offset }) // read them again
        }
        event(how, {
          txn: txnNo,
          records: chunk.length,
          offsets: { [partition]: Number(next) },
          keys: chunk.map(m => bin(m.key)),
        })
        txnNo++
        await heartbeat()
        if (how === 'abort') return // the rest of the batch comes again after the seek
      }
    },
  })
  await stopDone
  clearInterval(timer)
  await producer.disconnect()
  event('closed', { committed, aborted })
  if (failure) throw failure
  if (timedOut) {
    const message = `txn-copy: ${committed} of ${count} records committed in ${timeoutMs} ms`
    print({ error: 'TIMEOUT', message })
    throw new Failure(message)
  }
  return 0
}

// Two producers with one transactional id: the second fences the first (the zombie).
async function txnFence(kafka, topic, opts, timeoutMs) {
  const id = required(opts, 'transactional-id')
  const startTs = Date.now()
  const send = (txn, i) =>
    txn.send({ topic, messages: [referenceMessage(i, startTs)], acks: -1, timeout: timeoutMs })
  const zombie = txnProducer(kafka, id)
  const b = txnProducer(kafka, id)
  await zombie.connect()
  await b.connect()
  try {
    const ta = await zombie.transaction()
    event('begin', { producer: 'A' })
    await send(ta, 0)
    event('sent', { producer: 'A', key: 'key-0' })
    const tb = await b.transaction() // InitProducerId bumps the epoch: A is fenced
    event('init', { producer: 'B' })
    await send(tb, 1)
    await tb.commit()
    event('commit', { producer: 'B', key: 'key-1' })
    let stage = 'send'
    try {
      await send(ta, 2)
      stage = 'commit'
      await ta.commit()
    } catch (e) {
      process.stderr.write(`txn-fence: A failed at ${stage}: ${e.stack || e}\n`)
      event('fenced', { producer: 'A', stage, error: errorName(e) })
      return 0
    }
    event('not-fenced', { producer: 'A' })
    const message = 'the first producer committed after the second one initialized'
    print({ error: 'NOT_FENCED', message })
    throw new Failure(`txn-fence: ${message}`)
  } finally {
    await zombie.disconnect()
    await b.disconnect()
  }
}

// ---- admin ----------------------------------------------------------------------------
// `admin <action>`: one KafkaJS admin call per run, its outcome as client-neutral JSON
// (README.md, "Admin"). KafkaJS has no elections, log dirs, features or
// IncrementalAlterConfigs (alter-configs is the legacy AlterConfigs: the --set entries replace
// every dynamic config of the resource); describe-cluster and describe-topics are Metadata.

const ADMIN_LISTS = ['set', 'delete', 'append', 'subtract']
// DescribeConfigs' wire source numbers by Kafka's (Java's ConfigEntry.ConfigSource) names.
const CONFIG_SOURCES = [
  'UNKNOWN',
  'DYNAMIC_TOPIC_CONFIG',
  'DYNAMIC_BROKER_CONFIG',
  'DYNAMIC_DEFAULT_BROKER_CONFIG',
  'STATIC_BROKER_CONFIG',
  'DEFAULT_CONFIG',
  'DYNAMIC_BROKER_LOGGER_CONFIG',
  'DYNAMIC_CLIENT_METRICS_CONFIG',
  'DYNAMIC_GROUP_CONFIG',
]
const { ConfigResourceTypes } = nodeRequire('kafkajs')

function parseAdminOptions(argv) {
  const opts = Object.fromEntries(ADMIN_LISTS.map(k => [k, []]))
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) usage(`bad option ${argv[i]}`)
    const name = argv[i].slice(2)
    if (ADMIN_LISTS.includes(name)) opts[name].push(argv[i + 1])
    else opts[name] = argv[i + 1]
  }
  return opts
}

const ints = spec => (spec ?? '').split(',').filter(x => x.trim()).map(x => parseInt(x, 10))
const byPartition = (a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition

// --topic T | --broker ID | --broker-logger ID as KafkaJS's {type, name}.
function configResource(opts) {
  for (const [kind, type] of [
    ['topic', ConfigResourceTypes.TOPIC],
    ['broker', ConfigResourceTypes.BROKER],
    ['broker-logger', ConfigResourceTypes.BROKER_LOGGER],
  ]) {
    if (kind in opts) {
      // KafkaJS refuses an empty name: the cluster-wide broker default ("") is out of reach.
      if (!opts[kind]) unsupported('KafkaJS refuses an empty config resource name')
      return { kind, type, name: opts[kind] }
    }
  }
  usage('admin: needs --topic, --broker or --broker-logger')
}

function unsupported(why) {
  process.stderr.write(`kafkajs-driver: ${why}\n`)
  process.exit(EXIT_UNSUPPORTED)
}

// The outcome of a call: null, or Kafka's error name of what it threw.
async function outcome(promise) {
  try {
    await promise
    return null
  } catch (e) {
    process.stderr.write(`admin: ${e.stack || e}\n`)
    return errorName(e)
  }
}

const adminActions = {
  'describe-cluster': async admin => {
    const { brokers, controller, clusterId } = await admin.describeCluster()
    print({
      cluster_id: clusterId,
      controller,
      brokers: brokers
        .map(b => ({ id: b.nodeId, host: b.host, port: b.port, rack: b.rack ?? null }))
        .sort((a, b) => a.id - b.id),
    })
  },
  'describe-topics': async (admin, opts) => {
    for (const topic of required(opts, 'topic').split(',')) {
      let meta
      try {
        meta = await admin.fetchTopicMetadata({ topics: [topic] })
      } catch (e) {
        print({ topic, error: errorName(e) })
        continue
      }
      const partitions = meta.topics[0].partitions
        .map(p => ({
          partition: p.partitionId,
          leader: p.leader < 0 ? null : p.leader,
          replicas: p.replicas,
          isr: p.isr,
        }))
        .sort((a, b) => a.partition - b.partition)
      print({ topic, error: null, topic_id: null, internal: false, partitions })
    }
  },
  'list-offsets': async (admin, opts) => {
    const topic = required(opts, 'topic')
    const partitions = {}
    for (const p of await admin.fetchTopicOffsets(topic)) {
      partitions[p.partition] = { earliest: Number(p.low), latest: Number(p.high) }
    }
    print({ topic, partitions })
  },
  'create-partitions': async (admin, opts) => {
    const topic = required(opts, 'topic')
    const assignments = opts.assignments?.split(';').map(ints)
    const error = await outcome(
      admin.createPartitions({
        topicPartitions: [{ topic, count: parseInt(required(opts, 'count'), 10), assignments }],
        validateOnly: opts['validate-only'] === 'true',
      })
    )
    print({ topic, error })
  },
  'delete-records': async (admin, opts) => {
    const topic = required(opts, 'topic')
    const partitions = [...parsePairs(required(opts, 'offsets'))].map(([partition, o]) => ({
      partition,
      offset: String(o),
    }))
    const errors = {}
    await admin.fetchTopicOffsets(topic) // loads the topic's metadata, which deleteTopicRecords needs
    try {
      await admin.deleteTopicRecords({ topic, partitions })
    } catch (e) {
      process.stderr.write(`admin: ${e.stack || e}\n`)
      // KafkaJSDeleteTopicRecordsError (wrapped by the retrier) lists the failed partitions;
      // anything else fails them all.
      let listed = e
      while (listed && !listed.partitions) listed = listed.cause ?? listed.originalError
      for (const p of listed?.partitions ?? partitions.map(p => ({ ...p, error: e }))) {
        errors[p.partition] = errorName(p.error)
      }
    }
    // KafkaJS returns nothing: the low watermark comes from ListOffsets afterwards.
    const low = new Map((await admin.fetchTopicOffsets(topic)).map(p => [p.partition, p.low]))
    for (const { partition } of partitions) {
      const error = errors[partition] ?? null
      print({
        topic,
        partition,
        error,
        low_watermark: error ? null : Number(low.get(partition)),
      })
    }
  },
  'describe-configs': async (admin, opts) => {
    const { kind, type, name } = configResource(opts)
    let res
    try {
      res = await admin.describeConfigs({ resources: [{ type, name }], includeSynonyms: true })
    } catch (e) {
      print({ resource: kind, name, error: errorName(e) })
      return
    }
    const configs = {}
    for (const c of res.resources[0].configEntries) {
      configs[c.configName] = {
        value: c.configValue,
        source: CONFIG_SOURCES[c.configSource] ?? String(c.configSource),
        read_only: c.readOnly,
        sensitive: c.isSensitive,
        synonyms: (c.configSynonyms ?? []).map(s => [
          s.configName,
          s.configValue,
          CONFIG_SOURCES[s.configSource],
        ]),
        type: null,
        documentation: null,
      }
    }
    const sorted = Object.fromEntries(Object.entries(configs).sort(([a], [b]) => (a < b ? -1 : 1)))
    print({ resource: kind, name, error: null, configs: sorted })
  },
  'alter-configs': async (admin, opts) => {
    const { kind, type, name } = configResource(opts)
    if (opts.delete.length || opts.append.length || opts.subtract.length)
      unsupported('KafkaJS has only the legacy AlterConfigs (--set)')
    const configEntries = opts.set.map(kv => {
      const eq = kv.indexOf('=')
      if (eq < 0) usage(`expected k=v, got ${kv}`)
      return { name: kv.slice(0, eq), value: kv.slice(eq + 1) }
    })
    const error = await outcome(
      admin.alterConfigs({
        resources: [{ type, name, configEntries }],
        validateOnly: opts['validate-only'] === 'true',
      })
    )
    print({ resource: kind, name, error })
  },
  reassign: async (admin, opts) => {
    const topic = required(opts, 'topic')
    const partition = parseInt(required(opts, 'partition'), 10)
    // KafkaJS has no cancellation (it refuses a null replica list).
    if (opts.cancel === 'true') unsupported('KafkaJS cannot cancel a reassignment')
    const replicas = ints(required(opts, 'replicas'))
    const error = await outcome(
      admin.alterPartitionReassignments({
        topics: [{ topic, partitionAssignment: [{ partition, replicas }] }],
      })
    )
    print({ topic, partition, error })
  },
  'list-reassignments': async (admin, opts) => {
    const topics = opts.topic ? [{ topic: opts.topic, partitions: ints(opts.partitions) }] : null
    let res
    try {
      res = await admin.listPartitionReassignments({ topics })
    } catch (e) {
      print({ error: errorName(e), reassignments: [] })
      return
    }
    const reassignments = res.topics
      .flatMap(t =>
        t.partitions.map(p => ({
          topic: t.topic ?? t.name,
          partition: p.partitionIndex ?? p.partition,
          replicas: p.replicas,
          adding: p.addingReplicas,
          removing: p.removingReplicas,
        }))
      )
      .sort(byPartition)
    print({ error: null, reassignments })
  },
}

async function adminCommand(argv) {
  const [action, ...rest] = argv
  const opts = parseAdminOptions(rest)
  if (!action) usage('admin: missing action')
  if (!adminActions[action]) {
    if (ADMIN_ACTIONS.includes(action)) unsupported(`KafkaJS's admin has no ${action}`)
    usage(`unknown admin action ${action}`)
  }
  const kafka = makeKafka(required(opts, 'bootstrap'), Number(opts.timeout ?? '60') * 1000)
  const admin = kafka.admin()
  await admin.connect()
  try {
    await adminActions[action](admin, opts)
    return 0
  } finally {
    await admin.disconnect()
  }
}

// Every action of the contract (README.md, "Admin"), for exit 3 on those KafkaJS lacks.
const ADMIN_ACTIONS = [
  'describe-cluster',
  'describe-topics',
  'list-offsets',
  'create-partitions',
  'delete-records',
  'describe-configs',
  'alter-configs',
  'elect-leaders',
  'reassign',
  'list-reassignments',
  'describe-log-dirs',
  'alter-log-dir',
  'describe-features',
  'update-features',
]

async function main() {
  const [command, ...rest] = process.argv.slice(2)
  if (!command) usage('missing command')
  if (command === 'admin') return adminCommand(rest)
  const opts = parseOptions(rest)
  const bootstrap = required(opts, 'bootstrap')
  const topic = command === 'describe-group' ? opts.topic : required(opts, 'topic')
  const timeoutMs = Number(opts.timeout ?? '60') * 1000
  const kafka = makeKafka(bootstrap, timeoutMs)
  const commands = {
    'create-topic': () => createTopic(kafka, topic, opts, timeoutMs),
    produce: () => produce(kafka, topic, opts, timeoutMs),
    consume: () => consume(kafka, topic, opts),
    'offsets-for-times': () => offsetsForTimes(kafka, topic, opts),
    'group-consume': () =>
      groupConsume(kafka, topic, opts).catch(e => {
        event('error', { error: errorName(e), message: e.message, fatal: true })
        throw new Failure(`group-consume: ${e.stack || e}`) // reported: no error line
      }),
    'describe-group': () => describeGroup(kafka, opts),
    committed: () => committed(kafka, topic, opts),
    commit: () => commitOffsets(kafka, topic, opts),
    'txn-produce': () => txnProduce(kafka, topic, opts, timeoutMs),
    'txn-copy': () => txnCopy(kafka, topic, opts, timeoutMs),
    'txn-fence': () => txnFence(kafka, topic, opts, timeoutMs),
  }
  if (!commands[command]) usage(`unknown command ${command}`)
  return commands[command]()
}

// process.exit() drops stdout still queued for a full pipe: exit once it has drained (the
// write callback runs after every earlier write).
const exitAfterFlush = rc => process.stdout.write('', () => process.exit(rc))

// A failure ends with the contract's error line: Kafka's error name when KafkaJS's error
// carries one, else its class name.
main().then(exitAfterFlush, err => {
  process.stderr.write(err instanceof Failure ? `${err.message}\n` : `error: ${err.stack || err}\n`)
  if (!(err instanceof Failure)) print({ error: errorName(err), message: String(err.message) })
  exitAfterFlush(EXIT_FAILED)
})
