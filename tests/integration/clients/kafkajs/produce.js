// KafkaJS driver (../kafkajs-driver.js): create-topic, produce, consume, offsets-for-times.
// Command-line contract: ../README.md.
'use strict'

const {
  nodeRequire,
  EXIT_TOPIC_EXISTS,
  SEND_CHUNK,
  Failure,
  usage,
  required,
  print,
  bin,
  referenceMessage,
  createCluster,
} = require('./common')

const { CompressionTypes, Partitioners } = nodeRequire('kafkajs')
const Batch = nodeRequire('kafkajs/src/consumer/batch')

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

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

module.exports = { createTopic, produce, consume, offsetsForTimes }
