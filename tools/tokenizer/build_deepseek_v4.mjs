// Builds the DeepSeek V4 and V4.1 tokenizer.json files from the V3 tokenizer.json (same BPE
// vocabulary, merges and pre-tokenizer) by extending its added-token table to ids 128815..129279,
// as the V4 (Pro/Flash) and V4.1 releases do. Usage: node build_deepseek_v4.mjs V3_JSON OUT_DIR
// writes OUT_DIR/deepseek-v4/tokenizer.json and OUT_DIR/deepseek-v41/tokenizer.json.
import fs from "node:fs";
import path from "node:path";

const [, , v3Path, outDir] = process.argv;
if (!v3Path || !outDir) {
  console.error("usage: build_deepseek_v4.mjs V3_TOKENIZER_JSON OUT_DIR");
  process.exit(2);
}

const FW = "\uFF5C"; // ｜ FULLWIDTH VERTICAL LINE
const SP = "\u2581"; // ▁ LOWER ONE EIGHTH BLOCK
const sp = (name) => `<${FW}${name.replaceAll(" ", SP)}${FW}>`;

// Named tokens shared by V4 and V4.1 (control=true: chat/markup tokens, special=false like the
// V3 chat tokens; control=false: reserved markers, special=true).
const shared = [
  [128815, sp("begin of repo name"), true], [128816, sp("end of repo name"), true],
  [128817, sp("begin of file name"), true], [128818, sp("end of file name"), true],
  [128819, sp("begin of file"), true], [128820, sp("end of file"), true],
  [128821, "<think>", true], [128822, "</think>", true],
  [128823, sp("place holder for copy"), true],
  [128824, sp("place holder for pointer replace"), true],
  [128825, `${FW}DSML${FW}`, true],
  [128826, sp("begin sys"), true], [128827, sp("end sys"), true],
  [128828, sp("latest_reminder"), true],
  [128829, sp("action"), true], [128830, sp("query"), true], [128831, sp("authority"), true],
  [128832, sp("domain"), true], [128833, sp("task"), true], [128834, sp("political"), true],
  [128835, sp("entity"), true], [128836, sp("title"), true], [128837, sp("safety"), true],
  [128838, sp("answer"), true], [128839, sp("search"), true],
  [128840, "<dsml:", true], [128841, "</dsml:", true],
  [128842, sp("search begin"), true], [128843, sp("search end"), true],
  [128844, sp("extracted_url"), true], [128845, sp("read_url"), true],
  [128846, sp("end_of_query"), false],
  [129262, sp("rl_image_pad"), false], [129263, sp("rl_image_start"), false],
  [129271, sp("/polygon"), false], [129272, sp("polygon"), false],
  [129273, sp("/point"), false], [129274, sp("point"), false],
  [129275, sp("/box"), false], [129276, sp("box"), false],
  [129277, sp("/ref"), false], [129278, sp("ref"), false],
];
const mmSpan = (n) => `<|place_holder_mm_span_${String(n).padStart(4, "0")}|>`;

function table(version) {
  const named = [...shared];
  for (let n = 21; n <= 435; n++) named.push([128847 + n - 21, mmSpan(n), false]);
  if (version === "v4") {
    named.push([129264, sp("image2"), false], [129265, `<${FW}/table>${FW}`, false],
      [129266, sp("table"), false], [129267, sp("/td"), false], [129268, sp("td"), false],
      [129269, sp("/tr"), false], [129270, sp("tr"), false], [129279, sp("image"), false]);
  } else {
    // V4.1: <｜System｜> takes placeholder 799; the image placeholder is 129264 (spelled
    // <｜image｜> as deepseek-recipe writes it); the other free ids are span placeholders.
    named.push([128799, sp("System"), true], [129264, sp("image"), true]);
    for (let n = 436; n <= 441; n++) named.push([129265 + n - 436, mmSpan(n), false]);
    named.push([129279, mmSpan(442), false]);
  }
  return named;
}

const v3 = JSON.parse(fs.readFileSync(v3Path, "utf8"));
for (const version of ["v4", "v41"]) {
  const byId = new Map(v3.added_tokens.map((t) => [t.id, { ...t }]));
  for (const [id, content, control] of table(version)) {
    byId.set(id, {
      id, content, single_word: false, lstrip: false, rstrip: false,
      normalized: control, special: !control,
    });
  }
  for (let id = 128000; id < 129280; id++) {
    if (!byId.has(id)) throw new Error(`${version}: id ${id} left unnamed`);
  }
  const contents = new Set();
  for (const t of byId.values()) {
    if (contents.has(t.content)) throw new Error(`${version}: duplicate ${t.content}`);
    contents.add(t.content);
  }
  const out = { ...v3, added_tokens: [...byId.values()].sort((a, b) => a.id - b.id) };
  const dir = path.join(outDir, version === "v4" ? "deepseek-v4" : "deepseek-v41");
  fs.mkdirSync(dir, { recursive: true });
  const tmp = path.join(dir, `tokenizer.json.${process.pid}.tmp`);
  fs.writeFileSync(tmp, JSON.stringify(out));
  fs.renameSync(tmp, path.join(dir, "tokenizer.json"));
  console.log(`build_tokenizers: ${dir}/tokenizer.json (${out.added_tokens.length} added tokens)`);
}
