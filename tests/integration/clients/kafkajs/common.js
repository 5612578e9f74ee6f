// KafkaJS driver (../kafkajs-driver.js): what every command shares. Loading this module loads
// KafkaJS from ../node/node_modules and registers the compression codecs and error code 90.
'use strict'

const path = require('path')
// Modules come from ../node/node_modules (installed by setup.sh), wherever we are run from.
const nodeRequire = require('module').createRequire(
  path.join(__dirname, '..', 'node', 'package.json')
)
const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = nodeRequire('kafkajs')
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
// Binary fields are printed as latin-1 strings: one character per byte (../README.md).
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

// $RAFKA_CLIENT_SECURITY (../README.md, "Security") as KafkaJS's ssl and sasl options.
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

// ---- shared by several commands ------------------------------------------------------

function recordValue(i) {
  let filler = ''
  for (let j = 0; j < (i * 37) % 200; j++) filler += FILLER[(i + j) % FILLER.length]
  return Buffer.from(`value-${i}-${filler}`)
}

// Reference record i (../README.md, "produce") as a KafkaJS message.
const referenceMessage = (i, startTs) => ({
  key: `key-${i}`,
  value: recordValue(i),
  headers: { h1: `v-${i}`, h2: Buffer.from([0x00, 0xff, i % 256]) },
  timestamp: String(startTs + i),
})

// kafka[<private createCluster symbol>]() builds the same Cluster object that
// kafka.consumer()/admin() use internally (same config; the symbol isn't exported): the
// protocol layer that consume, describe-group and commit drive directly.
function createCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(
    s => s.description === 'private:Kafka:createCluster'
  )
  if (!sym) throw new Failure('KafkaJS internals changed: no createCluster symbol')
  return kafka[sym]({ allowAutoTopicCreation: false })
}

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

module.exports = {
  nodeRequire,
  EXIT_FAILED,
  EXIT_USAGE,
  EXIT_UNSUPPORTED,
  EXIT_TOPIC_EXISTS,
  SEND_CHUNK,
  Failure,
  usage,
  parseOptions,
  required,
  print,
  bin,
  makeKafka,
  referenceMessage,
  createCluster,
  event,
  errorName,
  seconds,
  parsePairs,
}
