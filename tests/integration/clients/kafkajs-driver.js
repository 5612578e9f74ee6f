#!/usr/bin/env node
// KafkaJS 2.2.4 driver. Command-line contract: README.md in this folder.
// stdout carries only JSON lines; KafkaJS's own log goes to stderr ($RAFKA_CLIENT_LOG level).
// The commands live in ./kafkajs/ (one module per concern; common.js loads KafkaJS from
// ./node/node_modules and holds what they share).
'use strict'

const {
  EXIT_FAILED,
  Failure,
  usage,
  parseOptions,
  required,
  print,
  makeKafka,
  event,
  errorName,
} = require('./kafkajs/common')
const { createTopic, produce, consume, offsetsForTimes } = require('./kafkajs/produce')
const { groupConsume, describeGroup, committed, commitOffsets } = require('./kafkajs/groups')
const { txnProduce, txnCopy, txnFence } = require('./kafkajs/transactions')
const { adminCommand } = require('./kafkajs/admin')

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
