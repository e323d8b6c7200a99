#!/usr/bin/env node
// ONNX Runtime's side of `make compare-ort`: times one ONNX model (exported by
// `torch_zoo.py export-onnx`) on the cpu the way latch's and PyTorch's steps are timed:
// the given thread count for the operators (one for the graph: sequential), untimed
// warm-up runs first, then the wall time of each run on the same seeded input.
//
//   node bench/ort_time.js --ort DIR --onnx FILE --shape B,3,S,S --repeat N --warmup N --threads N --json OUT
//
// --ort is the onnxruntime-node package directory (npm install --ignore-scripts
// onnxruntime-node: the package ships its cpu binaries). Writes {"ort": version,
// "median_ms", "min_ms", "samples_ms"}; exits 1 with a message on any failure.
"use strict";

function parseArgs(argv) {
  const args = {repeat: 10, warmup: 2, threads: 1};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i], value = argv[i + 1];
    if (!key.startsWith("--") || value === undefined) throw new Error(`bad argument ${key}`);
    args[key.slice(2)] = value;
  }
  for (const need of ["ort", "onnx", "shape", "json"])
    if (!args[need]) throw new Error(`--${need} is required`);
  args.shape = args.shape.split(",").map(Number);
  for (const key of ["repeat", "warmup", "threads"]) args[key] = Number(args[key]);
  if (args.shape.some((d) => !(d > 0)) || !(args.repeat >= 1) || !(args.warmup >= 0) || !(args.threads >= 1))
    throw new Error("--shape, --repeat and --threads take positive integers");
  return args;
}

// The same inputs on every run: uniform in [-1, 1) from a fixed linear congruential sequence.
function seededInput(count) {
  const data = new Float32Array(count);
  let state = 12345;
  for (let i = 0; i < count; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    data[i] = (state / 4294967296) * 2 - 1;
  }
  return data;
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
  const count = args.shape.reduce((a, b) => a * b, 1);
  const feeds = {[session.inputNames[0]]: new ort.Tensor("float32", seededInput(count), args.shape)};
  for (let i = 0; i < args.warmup; i++) await session.run(feeds);
  const samples = [];
  for (let i = 0; i < args.repeat; i++) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  const version = require(args.ort + "/package.json").version;
  const result = {ort: version, threads: args.threads, shape: args.shape, median_ms: median(samples),
                  min_ms: Math.min(...samples), samples_ms: samples};
  require("fs").writeFileSync(args.json, JSON.stringify(result));
  console.log(`ort ${version}: ${args.onnx} ${args.shape.join("x")}: median ${result.median_ms.toFixed(3)} ms`);
}

main().catch((e) => {
  console.error(`ort_time.js: ${e.message}`);
  process.exit(1);
});
