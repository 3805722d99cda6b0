#!/usr/bin/env node
// Times one ONNX model in ONNX Runtime (CPU execution provider, fp32) and prints JSON.
//
// usage: node ort_run.js MODEL.onnx [INPUT.npy | NAME=INPUT.npy]... [options]
//   Inputs without a name are matched to the model's inputs in order.
//   --warmup W            untimed runs first (default 5)
//   --iterations N        timed runs (default 20)
//   --threads T           intra-op threads (default 2)
//   --inter-threads T     inter-op threads (default 1)
//   --save-outputs DIR    write every output to DIR/NN_name.npy (after the timed runs)
//   --first K             output values listed in the JSON per output (default 8)
//   --ort-dir DIR         directory whose node_modules holds onnxruntime-node
//                         (default: $IPEX_ORT_DIR, else normal module resolution)
// Prints {model, ort_version, threads, inter_op_threads, warmup, iterations, median_ms, p90_ms,
// min_ms, mean_ms, max_ms, samples_ms, session_ms, inputs, outputs [{name, dtype, shape, sum,
// abs_sum, first}], saved}. Exit 2 on usage errors, 3 on unreadable inputs or model, 5 else.
'use strict';

const fs = require('fs');
const path = require('path');

const EXIT_USAGE = 2;
const EXIT_BAD_INPUT = 3;
const EXIT_INTERNAL = 5;
// Largest array payload accepted from one .npy file.
const MAX_NPY_BYTES = 8 * 1024 ** 3;
const MAX_NPY_HEADER = 64 * 1024;

class UserError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code;
  }
}

// ---------------------------------------------------------------------------------------------
// .npy (format 1.0, 2.0, 3.0; little-endian, C order)

// descr -> [ONNX Runtime tensor type, element size, typed array]
const NPY_TYPES = {
  '<f4': ['float32', 4, Float32Array],
  '<f8': ['float64', 8, Float64Array],
  '<i8': ['int64', 8, BigInt64Array],
  '<i4': ['int32', 4, Int32Array],
  '|b1': ['bool', 1, Uint8Array],
  '|u1': ['uint8', 1, Uint8Array],
  '|i1': ['int8', 1, Int8Array],
};
const DESCR_OF = Object.fromEntries(Object.entries(NPY_TYPES).map(([d, [t]]) => [t, d]));

function readNpy(file) {
  let bytes;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new UserError(`cannot read '${file}': ${e.message}`, EXIT_BAD_INPUT);
  }
  const bad = (what) => new UserError(`'${file}': not a supported .npy file: ${what}`, EXIT_BAD_INPUT);
  if (bytes.length < 10 || bytes.toString('latin1', 0, 6) !== '\x93NUMPY') throw bad('no NUMPY magic');
  const major = bytes[6];
  let headerLen;
  let headerStart;
  if (major === 1) {
    headerLen = bytes.readUInt16LE(8);
    headerStart = 10;
  } else if (major === 2 || major === 3) {
    if (bytes.length < 12) throw bad('truncated header length');
    headerLen = bytes.readUInt32LE(8);
    headerStart = 12;
  } else {
    throw bad(`format version ${major}`);
  }
  if (headerLen > MAX_NPY_HEADER || headerStart + headerLen > bytes.length) throw bad('header length out of range');
  const header = bytes.toString(major === 3 ? 'utf8' : 'latin1', headerStart, headerStart + headerLen);
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw bad("header lacks 'descr', 'fortran_order' or 'shape'");
  if (fortran[1] === 'True') throw bad('Fortran order (save with np.ascontiguousarray)');
  const type = NPY_TYPES[descr[1] === '<b1' ? '|b1' : descr[1] === '<u1' ? '|u1' : descr[1] === '<i1' ? '|i1' : descr[1]];
  if (!type) throw bad(`dtype '${descr[1]}' (float32, float64, int64, int32, int8, uint8, bool are read)`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  if (!dims.every((s) => /^\d+$/.test(s))) throw bad(`shape (${shape[1]})`);
  const dimsNum = dims.map(Number);
  const [ortType, size, ArrayType] = type;
  const numel = dimsNum.reduce((a, b) => a * b, 1);
  const payload = numel * size;
  if (!Number.isSafeInteger(payload) || payload > MAX_NPY_BYTES) throw bad('array larger than 8 GiB');
  const dataStart = headerStart + headerLen;
  if (bytes.length - dataStart < payload) throw bad(`payload has ${bytes.length - dataStart} bytes, shape needs ${payload}`);
  // Copy into an aligned buffer of its own (the file buffer may be a slice of a pool).
  const data = new ArrayType(numel);
  Buffer.from(data.buffer).set(bytes.subarray(dataStart, dataStart + payload));
  return { type: ortType, dims: dimsNum, data };
}

function writeNpy(file, tensor) {
  const descr = DESCR_OF[tensor.type];
  if (!descr) throw new UserError(`output type '${tensor.type}' cannot be written as .npy`, EXIT_INTERNAL);
  const dims = tensor.dims.map(Number);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const unpadded = 10 + header.length + 1;
  header += ' '.repeat((64 - (unpadded % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const tmp = `${file}.tmp${process.pid}`;
  fs.writeFileSync(tmp, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
  fs.renameSync(tmp, file);
}

// ---------------------------------------------------------------------------------------------

function parseArgs(argv) {
  const opts = { warmup: 5, iterations: 20, threads: 2, interThreads: 1, first: 8, inputs: [],
                 saveOutputs: null, ortDir: process.env.IPEX_ORT_DIR || null, model: null };
  const intOpt = (name, value, min) => {
    if (value === undefined || !/^\d+$/.test(value) || Number(value) < min)
      throw new UserError(`${name} needs an integer >= ${min}, got '${value}'`, EXIT_USAGE);
    return Number(value);
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    switch (a) {
      case '--warmup': opts.warmup = intOpt(a, argv[++i], 0); break;
      case '--iterations': opts.iterations = intOpt(a, argv[++i], 1); break;
      case '--threads': opts.threads = intOpt(a, argv[++i], 1); break;
      case '--inter-threads': opts.interThreads = intOpt(a, argv[++i], 1); break;
      case '--first': opts.first = intOpt(a, argv[++i], 0); break;
      case '--save-outputs': opts.saveOutputs = argv[++i]; break;
      case '--ort-dir': opts.ortDir = argv[++i]; break;
      case '-h':
      case '--help':
        process.stdout.write(fs.readFileSync(__filename, 'utf8').split('\n').slice(1, 17)
          .map((l) => l.replace(/^\/\/ ?/, '')).join('\n') + '\n');
        process.exit(0);
        break;
      default:
        if (a.startsWith('--')) throw new UserError(`unknown option '${a}' (see --help)`, EXIT_USAGE);
        if (opts.model === null) opts.model = a;
        else opts.inputs.push(a);
    }
  }
  if (opts.model === null) throw new UserError('usage: node ort_run.js MODEL.onnx [INPUT.npy]... (see --help)', EXIT_USAGE);
  if (opts.saveOutputs === undefined) throw new UserError('--save-outputs needs a directory', EXIT_USAGE);
  return opts;
}

function loadOrt(ortDir) {
  const candidates = [];
  if (ortDir) candidates.push(path.resolve(ortDir, 'node_modules', 'onnxruntime-node'));
  candidates.push('onnxruntime-node');
  for (const c of candidates) {
    try {
      return require(c);
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  throw new UserError('onnxruntime-node not found; install it with ' +
    "'ONNXRUNTIME_NODE_INSTALL=skip npm install onnxruntime-node' in a directory and pass it " +
    'as --ort-dir or IPEX_ORT_DIR', EXIT_USAGE);
}

function percentile(sorted, p) {  // nearest rank
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1];
}

function summarize(name, tensor, first) {
  const data = tensor.data;
  let sum = 0;
  let absSum = 0;
  const values = [];
  for (let i = 0; i < data.length; ++i) {
    const v = Number(data[i]);
    sum += v;
    absSum += Math.abs(v);
    if (i < first) values.push(v);
  }
  return { name, dtype: tensor.type, shape: tensor.dims.map(Number), sum, abs_sum: absSum, first: values };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(opts.model)) throw new UserError(`cannot read '${opts.model}': no such file`, EXIT_BAD_INPUT);
  const ort = loadOrt(opts.ortDir);

  const started = process.hrtime.bigint();
  let session;
  try {
    session = await ort.InferenceSession.create(opts.model, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      executionMode: 'sequential',
      intraOpNumThreads: opts.threads,
      interOpNumThreads: opts.interThreads,
    });
  } catch (e) {
    throw new UserError(`'${opts.model}': ONNX Runtime cannot load it: ${e.message}`, EXIT_BAD_INPUT);
  }
  const sessionMs = Number(process.hrtime.bigint() - started) / 1e6;

  const names = session.inputNames;
  const feeds = {};
  const inputs = [];
  let positional = 0;
  for (const arg of opts.inputs) {
    const eq = arg.indexOf('=');
    let name;
    let file;
    if (eq > 0 && !fs.existsSync(arg)) {
      name = arg.slice(0, eq);
      file = arg.slice(eq + 1);
      if (!names.includes(name)) throw new UserError(`input '${name}' is not one of the model's (${names.join(', ')})`, EXIT_USAGE);
    } else {
      if (positional >= names.length) throw new UserError(`more inputs than the model takes (${names.join(', ')})`, EXIT_USAGE);
      name = names[positional++];
      file = arg;
    }
    const array = readNpy(file);
    feeds[name] = new ort.Tensor(array.type, array.data, array.dims);
    inputs.push({ name, file, dtype: array.type, shape: array.dims });
  }
  const missing = names.filter((n) => !(n in feeds));
  if (missing.length) throw new UserError(`no input given for ${missing.join(', ')}`, EXIT_USAGE);

  let outputs;
  for (let i = 0; i < opts.warmup; ++i) outputs = await session.run(feeds);
  const samples = [];
  for (let i = 0; i < opts.iterations; ++i) {
    const t0 = process.hrtime.bigint();
    outputs = await session.run(feeds);
    samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const sorted = [...samples].sort((a, b) => a - b);

  const saved = [];
  if (opts.saveOutputs) {
    fs.mkdirSync(opts.saveOutputs, { recursive: true });
    session.outputNames.forEach((name, i) => {
      const file = path.join(opts.saveOutputs, `${String(i).padStart(2, '0')}_${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.npy`);
      writeNpy(file, outputs[name]);
      saved.push(file);
    });
  }

  const result = {
    model: opts.model,
    ort_version: ort.env.versions ? ort.env.versions.node || ort.env.versions.common : null,
    threads: opts.threads,
    inter_op_threads: opts.interThreads,
    warmup: opts.warmup,
    iterations: opts.iterations,
    median_ms: percentile(sorted, 50),
    p90_ms: percentile(sorted, 90),
    min_ms: sorted[0],
    mean_ms: samples.reduce((a, b) => a + b, 0) / samples.length,
    max_ms: sorted[sorted.length - 1],
    samples_ms: samples,
    session_ms: sessionMs,
    inputs,
    outputs: session.outputNames.map((n) => summarize(n, outputs[n], opts.first)),
    saved,
  };
  process.stdout.write(JSON.stringify(result) + '\n');
  if (typeof session.release === 'function') await session.release();
}

main().catch((e) => {
  process.stderr.write(`ort_run: error: ${e.message}\n`);
  process.exit(e instanceof UserError ? e.code : EXIT_INTERNAL);
});
