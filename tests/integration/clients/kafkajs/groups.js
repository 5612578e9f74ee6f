// KafkaJS driver (../kafkajs-driver.js): consumer groups.
// group-consume runs one member of a consumer group with KafkaJS's own consumer (subscribe +
// run) and prints what happens to it as JSON events; describe-group, committed and commit look
// at / write the group's offsets. Contract: ../README.md ("Consumer groups").
'use strict'

const {
  nodeRequire,
  EXIT_UNSUPPORTED,
  usage,
  required,
  print,
  bin,
  createCluster,
  event,
  errorName,
  seconds,
  parsePairs,
} = require('./common')

const { AssignerProtocol } = nodeRequire('kafkajs')
const ConsumerGroup = nodeRequire('kafkajs/src/consumer/consumerGroup')
const { KafkaJSError } = nodeRequire('kafkajs/src/errors')

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
// ConsumerGroup#leave is wrapped too: KafkaJS stops processing, then leaves, and only emits
// STOP once the LeaveGroup is answered; by then the coordinator may already have handed the
// partitions to another member, so the revocation is reported before the LeaveGroup is sent.
let groupHooks = null
const originalJoinAndSync = ConsumerGroup.prototype.joinAndSync
ConsumerGroup.prototype.joinAndSync = async function (...args) {
  if (groupHooks) groupHooks.beforeJoin(this)
  const result = await originalJoinAndSync.apply(this, args)
  if (groupHooks) groupHooks.afterJoin(this)
  return result
}
const originalLeave = ConsumerGroup.prototype.leave
ConsumerGroup.prototype.leave = async function (...args) {
  if (groupHooks) groupHooks.beforeLeave(this)
  return originalLeave.apply(this, args)
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
  const revokeAll = () => {
    if (owned.length) event('revoked', { partitions: owned, owned: [] })
    owned = []
  }
  groupHooks = {
    beforeJoin: revokeAll,
    beforeLeave: revokeAll,
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
  // The consumer stopped (also after a crash, before KafkaJS restarts it as a new member):
  // normally already reported by beforeLeave; this covers a stop that never reached the leave.
  consumer.on(consumer.events.STOP, revokeAll)
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

module.exports = { groupConsume, describeGroup, committed, commitOffsets }
