// JS reference for the tokenizer differential test: loads a tokenizer.json with
// @lenml/tokenizers (transformers.js) and prints one JSON line {"text","ids"} per corpus string,
// encoded like HF encode(text, add_special_tokens=False).
// Usage: node tokenizer_reference.mjs TOKENIZER_JSON
import fs from "node:fs";
import { TokenizerLoader } from "@lenml/tokenizers";
import { corpus } from "./tokenizer_corpus.mjs";

const path = process.argv[2];
if (!path) {
  console.error("usage: tokenizer_reference.mjs TOKENIZER_JSON");
  process.exit(2);
}
const tokenizerJSON = JSON.parse(fs.readFileSync(path, "utf8"));
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON,
  tokenizerConfig: { tokenizer_class: "PreTrainedTokenizerFast", add_bos_token: false,
    add_eos_token: false, clean_up_tokenization_spaces: false },
});
const lines = [];
for (const text of corpus()) {
  lines.push(JSON.stringify({ text, ids: tok.encode(text, { add_special_tokens: false }) }));
}
process.stdout.write(lines.join("\n") + "\n");
