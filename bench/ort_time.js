#!/usr/bin/env node
// ONNX Runtime's side of `make compare-ort`: times one ONNX model (exported by
// `torch_zoo.py export-onnx`) on the cpu the way latch's and PyTorch's steps are timed:
// the given thread count for the operators (one for the graph: sequential), untimed
// warm-up runs first, then the wall time of each run, on the input file the other sides
// read; the last run's first output is written for the output check.
//
//   node bench/ort_time.js --ort DIR --onnx FILE --input FILE.npy --output FILE.npy
//                          [--past DIR] --repeat N --warmup N --threads N --json OUT
//
// --ort is the onnxruntime-node package directory (npm install --ignore-scripts
// onnxruntime-node: the package ships its cpu binaries). The model's first input is read
// from --input (.npy, float32 or int64); a KV-cache step's other inputs, past.<layer>.key
// and .value, from DIR/<name>.npy, and each run's outputs present.<layer>.key/value become
// the next run's past (the cache grows by one position per run, as latch's and PyTorch's).
// Writes {"ort": version, "median_ms", "min_ms", "samples_ms"}; exits 1 with a message on
// any failure.
"use strict";
const fs = require("fs");
const path = require("path");

function parseArgs(argv) {
  const args = {repeat: 10, warmup: 2, threads: 1};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i], value = argv[i + 1];
    if (!key.startsWith("--") || value === undefined) throw new Error(`bad argument ${key}`);
    args[key.slice(2)] = value;
  }
  for (const need of ["ort", "onnx", "input", "output", "json"])
    if (!args[need]) throw new Error(`--${need} is required`);
  for (const key of ["repeat", "warmup", "threads"]) args[key] = Number(args[key]);
  if (!(args.repeat >= 1) || !(args.warmup >= 0) || !(args.threads >= 1))
    throw new Error("--repeat and --threads take positive integers, --warmup one not negative");
  return args;
}

// A .npy file (version 1 to 3, little-endian float32 or int64, C order) as an ORT tensor.
function readNpy(ort, file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString("latin1", 0, 6) !== "\x93NUMPY") throw new Error(`${file}: not a .npy file`);
  const major = buf[6], headerLength = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLength;
  const header = buf.toString("latin1", major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header), shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape || /'fortran_order':\s*True/.test(header)) throw new Error(`${file}: unreadable header ${header}`);
  const dims = shape[1].split(",").map((d) => d.trim()).filter((d) => d).map(Number);
  const count = dims.reduce((a, b) => a * b, 1), data = buf.subarray(start);
  const kinds = {"<f4": ["float32", Float32Array], "<i8": ["int64", BigInt64Array]};
  const kind = kinds[descr[1]];
  if (!kind) throw new Error(`${file}: dtype ${descr[1]} (float32 and int64 are read)`);
  if (data.length !== count * kind[1].BYTES_PER_ELEMENT) throw new Error(`${file}: ${data.length} bytes for ${dims}`);
  const copy = new kind[1](count);
  new Uint8Array(copy.buffer).set(data);
  return new ort.Tensor(kind[0], copy, dims);
}

// A float32 tensor as a .npy file (version 1).
function writeNpy(file, tensor) {
  if (tensor.type !== "float32") throw new Error(`output of type ${tensor.type} (float32 is written)`);
  const dims = tensor.dims.join(", ") + (tensor.dims.length === 1 ? "," : "");
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims}), }`;
  header += " ".repeat(63 - ((10 + header.length) % 64)) + "\n";
  const head = Buffer.alloc(10);
  head.write("\x93NUMPY", 0, "latin1");
  head[6] = 1, head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, "latin1"), data]));
}

function median(values) {
  const s = [...values].sort((a, b) => a - b), mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = require(args.ort);
  const session = await ort.InferenceSession.create(args.onnx, {
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  });
  const feeds = {[session.inputNames[0]]: readNpy(ort, args.input)};
  for (const name of session.inputNames.slice(1)) {
    if (!args.past) throw new Error(`the model has input ${name}: give --past DIR`);
    feeds[name] = readNpy(ort, path.join(args.past, `${name}.npy`));
  }
  let result;
  // One run; a KV-cache step's present.* outputs become the next run's past.* inputs.
  const step = async () => {
    result = await session.run(feeds);
    for (const name of session.outputNames.slice(1)) feeds[name.replace(/^present\./, "past.")] = result[name];
  };
  for (let i = 0; i < args.warmup; i++) await step();
  const samples = [];
  for (let i = 0; i < args.repeat; i++) {
    const start = process.hrtime.bigint();
    await step();
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  writeNpy(args.output, result[session.outputNames[0]]);
  const version = require(args.ort + "/package.json").version;
  const out = {ort: version, threads: args.threads, median_ms: median(samples), min_ms: Math.min(...samples),
               samples_ms: samples};
  fs.writeFileSync(args.json, JSON.stringify(out));
  console.log(`ort ${version}: ${args.onnx} on ${args.input}: median ${out.median_ms.toFixed(3)} ms`);
}

main().catch((e) => {
  console.error(`ort_time.js: ${e.message}`);
  process.exit(1);
});
