// gguf_listing.mjs — a GGUF file as read by Hugging Face's @huggingface/gguf,
// an independent reader (tests/fixtures/npm, fetched by tools/fetch_fixtures.sh):
//
//   node tests/formats/gguf_listing.mjs FILE.gguf
//
// prints one line per key/value and per tensor in a canonical form that
// test_gguf_hf_reader.c prints from flux.c's own parser, and checks what
// the reader alone can: each tensor's bytes (from its shape and ggml's
// block sizes) lie inside the file after the data
// start, aligned to general.alignment, without overlapping another tensor.
// Exit 1 with a message when a check fails.
import { statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "../fixtures/npm/package.json"));
const { gguf } = require("@huggingface/gguf");

const path = process.argv[2];
const { typedMetadata, tensorInfos, tensorDataOffset } = await gguf(path, {
  allowLocalFile: true,
  typedMetadata: true,
});

// ggml type id -> [elements per block, bytes per block] (ggml's type traits,
// written here from ggml's public block definitions, not from flux.c)
const BLOCK = { 0: [1, 4], 1: [1, 2], 2: [32, 18], 3: [32, 20], 6: [32, 22], 7: [32, 24], 8: [32, 34],
  10: [256, 84], 11: [256, 110], 12: [256, 144], 13: [256, 176], 14: [256, 210], 20: [32, 18], 23: [256, 136],
  24: [1, 1], 25: [1, 2], 26: [1, 4], 27: [1, 8], 28: [1, 8], 30: [1, 2] };

const f32hex = (v) => { const b = new DataView(new ArrayBuffer(4)); b.setFloat32(0, v, true); return b.getUint32(0, true).toString(16); };
const f64hex = (v) => { const b = new DataView(new ArrayBuffer(8)); b.setFloat64(0, v, true); return b.getBigUint64(0, true).toString(16); };
const scalar = (type, v) => {
  switch (type) {
    case 6: return f32hex(Number(v));   // F32: the bits, not a decimal rendering
    case 12: return f64hex(Number(v));  // F64
    case 7: return v ? "1" : "0";       // BOOL
    case 8: return JSON.stringify(v);   // STRING
    default: return BigInt(v).toString();
  }
};

const lines = [];
for (const [key, { value, type, subType }] of Object.entries(typedMetadata)) {
  if (key === "version" || key === "tensor_count" || key === "kv_count") continue; // the header, not key/values
  if (type === 9) {
    const shown = value.length <= 16 ? " " + value.map((e) => scalar(subType, e)).join(",") : "";
    lines.push(`kv ${key} array ${subType} ${value.length}${shown}`);
  } else {
    lines.push(`kv ${key} ${type} ${scalar(type, value)}`);
  }
}

const alignment = Number(typedMetadata["general.alignment"]?.value ?? 32);
const fileSize = BigInt(statSync(path).size);
const spans = [];
const fail = (msg) => { console.error(`gguf_listing: ${path}: ${msg}`); process.exit(1); };
if (Number(tensorDataOffset) % alignment) fail(`data start ${tensorDataOffset} not aligned to ${alignment}`);
for (const t of tensorInfos) {
  const dims = t.shape.map((d) => BigInt(d));
  lines.push(`tensor ${t.name} ${t.dtype} ${dims.join(",")} ${BigInt(t.offset)}`);
  if (!BLOCK[t.dtype]) fail(`${t.name}: ggml type ${t.dtype} unknown to this check`);
  const [block, bytes] = BLOCK[t.dtype];
  const n = dims.reduce((a, b) => a * b, 1n);
  if (dims[0] % BigInt(block)) fail(`${t.name}: row of ${dims[0]} not whole blocks of ${block}`);
  const size = (n / BigInt(block)) * BigInt(bytes);
  const start = BigInt(tensorDataOffset) + BigInt(t.offset);
  if (BigInt(t.offset) % BigInt(alignment)) fail(`${t.name}: offset ${t.offset} not aligned to ${alignment}`);
  if (start + size > fileSize) fail(`${t.name}: bytes [${start}, ${start + size}) past the end of the file (${fileSize})`);
  spans.push([start, start + size, t.name]);
}
spans.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
for (let i = 1; i < spans.length; i++)
  if (spans[i][0] < spans[i - 1][1]) fail(`${spans[i][2]} overlaps ${spans[i - 1][2]}`);
console.log(lines.join("\n"));
