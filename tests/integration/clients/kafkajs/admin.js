// KafkaJS driver (../kafkajs-driver.js): admin.
// `admin <action>`: one KafkaJS admin call per run, its outcome as client-neutral JSON
// (../README.md, "Admin"). KafkaJS has no elections, log dirs, features or
// IncrementalAlterConfigs (alter-configs is the legacy AlterConfigs: the --set entries replace
// every dynamic config of the resource); describe-cluster and describe-topics are Metadata.
'use strict'

const {
  nodeRequire,
  EXIT_UNSUPPORTED,
  usage,
  required,
  print,
  makeKafka,
  errorName,
  parsePairs,
} = require('./common')

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

// Every action of the contract (../README.md, "Admin"), for exit 3 on those KafkaJS lacks.
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

module.exports = { adminCommand }
