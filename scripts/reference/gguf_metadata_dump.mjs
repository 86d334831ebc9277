// Dumps a GGUF file's header as @huggingface/gguf (Hugging Face's GGUF parser)
// reads it: the version, the key/value metadata with each value's GGUF type
// (and element type for arrays), and the tensor infos (name, shape in GGUF
// order, i.e. ne[0] first, ggml type id and name, offset in the data section),
// plus the data section's offset. The reference side of the GGUF fixtures:
// scripts/reference/make_gguf_fixtures.sh writes its output beside
// each fixture as <fixture>.metadata.json.
//
// Values: strings and booleans as they are; integers as JSON numbers (64-bit
// ones that do not fit a double exactly as decimal strings); floats as the
// double the parser produced (a float32 widened exactly), in JavaScript's
// shortest round-trip form. Keys in file order.
//
// Run: node scripts/reference/gguf_metadata_dump.mjs NODE_MODULES FILE.gguf [display-name]
// where NODE_MODULES is the folder install.sh fills (build/reference/node_modules).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [nodeModules, file, shown] = process.argv.slice(2);
if (!nodeModules || !file) {
  console.error("usage: gguf_metadata_dump.mjs NODE_MODULES FILE.gguf [display-name]");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(nodeModules), "package.json"));
const ggufPath = require.resolve("@huggingface/gguf");
const { gguf, GGUFValueType, GGMLQuantizationType } = await import(ggufPath);
const version = JSON.parse(
  fs.readFileSync(path.join(path.dirname(ggufPath), "..", "package.json"), "utf8")).version;

const { typedMetadata, tensorInfos, tensorDataOffset, littleEndian } = await gguf(path.resolve(file), {
  allowLocalFile: true,
  typedMetadata: true,
});

function plain(v) {
  if (typeof v === "bigint") {
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
  }
  if (Array.isArray(v)) return v.map(plain);
  if (typeof v === "number" && !Number.isFinite(v)) return String(v);
  return v;
}

const kv = [];
for (const [key, entry] of Object.entries(typedMetadata)) {
  if (key === "version" || key === "tensor_count" || key === "kv_count") continue;
  const item = { key, type: GGUFValueType[entry.type] };
  if (entry.subType !== undefined) item.subType = GGUFValueType[entry.subType];
  if (Array.isArray(entry.value)) item.length = entry.value.length;
  item.value = plain(entry.value);
  kv.push(item);
}

const out = {
  file: shown ?? path.basename(file),
  parser: `@huggingface/gguf ${version}`,
  littleEndian,
  version: plain(typedMetadata.version.value),
  tensor_count: plain(typedMetadata.tensor_count.value),
  kv_count: plain(typedMetadata.kv_count.value),
  tensor_data_offset: plain(tensorDataOffset),
  kv,
  tensors: tensorInfos.map((t) => ({
    name: t.name,
    n_dims: t.n_dims,
    shape: t.shape.map(plain),
    dtype: t.dtype,
    type: GGMLQuantizationType[t.dtype] ?? null,
    offset: plain(t.offset),
  })),
};

// One key/value or tensor a line: compact, and diffs stay readable.
const lines = [];
lines.push("{");
for (const k of ["file", "parser", "littleEndian", "version", "tensor_count", "kv_count", "tensor_data_offset"]) {
  lines.push(`  ${JSON.stringify(k)}: ${JSON.stringify(out[k])},`);
}
lines.push('  "kv": [');
lines.push(out.kv.map((x) => "    " + JSON.stringify(x)).join(",\n"));
lines.push("  ],");
lines.push('  "tensors": [');
lines.push(out.tensors.map((x) => "    " + JSON.stringify(x)).join(",\n"));
lines.push("  ]");
lines.push("}");
process.stdout.write(lines.join("\n") + "\n");
