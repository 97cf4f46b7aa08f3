// node ort_run.js MODEL IN.bin DIMS_JSON OUT.bin: one ONNX Runtime run, the first output as raw float32 (nonfinite_vs_ort.py)
const fs = require('fs');
const ort = require(require('path').join(__dirname, 'ort', 'node_modules', 'onnxruntime-node'));
(async () => {
  const [m, inp, dims, out] = process.argv.slice(2);
  const s = await ort.InferenceSession.create(m);
  const b = fs.readFileSync(inp);
  const x = new ort.Tensor('float32', new Float32Array(b.buffer, b.byteOffset, b.length / 4), JSON.parse(dims));
  const r = await s.run({[s.inputNames[0]]: x});
  const y = r[s.outputNames[0]].data;
  fs.writeFileSync(out, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
})().catch(e => { console.error(e); process.exit(1); });
