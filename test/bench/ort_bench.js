// ort_bench.js MODEL.onnx INPUT.bin OUTPUT.bin THREADS MIN_SECONDS
// Times one ONNX model in ONNX Runtime (the Linux x64 library inside the npm package
// onnxruntime-node): warm-up, then repeated runs until MIN_SECONDS have passed (at least 7).
// Reads the input (raw float32, the model's one input shape) and writes the first output
// (raw float32) so the caller can check it matches pdc. Prints one JSON line.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.env.ORT_NODE_MODULE || path.join(__dirname, 'ort', 'node_modules', 'onnxruntime-node'));

async function main() {
  const [modelPath, inPath, outPath, threadsArg, minArg] = process.argv.slice(2);
  const threads = parseInt(threadsArg, 10);
  const minSeconds = parseFloat(minArg);
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const inName = session.inputNames[0];
  const meta = session.inputMetadata ? session.inputMetadata[0] : null;
  const buf = fs.readFileSync(inPath);
  const data = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  let dims = meta && meta.shape ? meta.shape : null;
  if (!dims || dims.some((d) => typeof d !== 'number')) dims = JSON.parse(process.env.ORT_INPUT_DIMS);
  const feeds = {[inName]: new ort.Tensor('float32', data, dims)};
  let out = null;
  for (let i = 0; i < 3; i++) out = await session.run(feeds);
  const times = [];
  let spent = 0;
  while (times.length < 7 || spent < minSeconds) {
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    const dt = Number(process.hrtime.bigint() - t0) / 1e6;
    times.push(dt);
    spent += dt / 1e3;
    if (times.length >= 1000) break;
  }
  times.sort((a, b) => a - b);
  const n = times.length;
  const median = n % 2 ? times[(n - 1) / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  const first = out[session.outputNames[0]].data;
  fs.writeFileSync(outPath, Buffer.from(first.buffer, first.byteOffset, first.byteLength));
  console.log(JSON.stringify({median_ms: median, min_ms: times[0], max_ms: times[n - 1], runs: n, threads,
                              ort_version: ort.env && ort.env.versions ? ort.env.versions.common : 'unknown'}));
}

main().catch((e) => {
  console.error('ort_bench: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
