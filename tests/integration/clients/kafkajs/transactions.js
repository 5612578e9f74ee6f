// KafkaJS driver (../kafkajs-driver.js): transactions.
// txn-produce, txn-copy and txn-fence: contract in ../README.md ("Transactions"). KafkaJS's
// transactional API: producer.transaction() (InitProducerId the first time, then a new
// transaction), transaction.send / sendOffsets({ consumerGroupId, topics }) / commit / abort.
'use strict'

const {
  SEND_CHUNK,
  Failure,
  usage,
  required,
  print,
  bin,
  referenceMessage,
  event,
  errorName,
  seconds,
} = require('./common')

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

module.exports = { txnProduce, txnCopy, txnFence }
