// Deterministic corpus for the tokenizer differential test (>= 2,000 strings): scripts, emoji,
// CJK, code, whitespace runs, digits, special-token spellings and invalid-looking sequences.
// Seeded PRNG, so every run produces the same strings. Code points are limited to ones assigned
// by Unicode 14 (the C++ regex engine's tables) and exclude U+0085, U+180E and U+FEFF, where the
// JS reference's `\s` differs from Oniguruma's (HF tokenizers); those are tested in C++.

function mulberry32(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FW = "\uFF5C";
const SP = "\u2581";

const words = {
  latin: ["Hello", "world", "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog",
    "naïve", "café", "résumé", "Ångström", "straße", "Œuvre", "façade", "coöperate", "Zürich",
    "São", "Paulo", "ĳssel", "Dvořák", "Łódź", "İstanbul", "don't", "I'm", "we'll", "they've",
    "it's", "O'Reilly", "e-mail", "state-of-the-art", "USA", "NASA", "iPhone", "McDonald"],
  cyrillic: ["Привет", "мир", "Москва", "съешь", "ещё", "этих", "мягких", "французских", "булок"],
  greek: ["Γειά", "σου", "κόσμε", "αβγδε", "Ωμέγα", "φιλοσοφία"],
  arabic: ["مرحبا", "بالعالم", "السلام", "عليكم", "كتاب", "٠١٢٣٤٥٦٧٨٩"],
  hebrew: ["שלום", "עולם", "תודה", "בבקשה"],
  devanagari: ["नमस्ते", "दुनिया", "हिन्दी", "संस्कृतम्", "०१२३"],
  thai: ["สวัสดี", "ชาวโลก", "ภาษาไทย"],
  hangul: ["안녕하세요", "세계", "한국어", "감사합니다"],
  japanese: ["こんにちは", "世界", "カタカナ", "ひらがな", "日本語", "東京", "ｶﾀｶﾅ", "ラーメン"],
  chinese: ["你好", "世界", "中文", "测试", "毕老师", "深度求索", "人工智能", "龘", "𠀀𠀁", "繁體字"],
  emoji: ["😀", "🚀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "❤️", "☕", "🤖", "🧑🏿‍💻",
    "✨", "🎉", "#️⃣", "1️⃣", "🫠"],
  symbols: ["∑", "∫", "√", "≤", "≥", "≠", "∞", "→", "⇒", "©", "®", "™", "€", "£", "¥", "§",
    "¶", "•", "…", "—", "–", "«", "»", "„", "“", "”", "‘", "’", "°", "±", "×", "÷", "µ", "½",
    "²", "³", "Ⅻ", "①", "╔═╗", "▲", "♠", "♥", "★", "☆", "✓", "✗"],
  marks: ["e\u0301", "a\u0308", "n\u0303", "\u0301", "\u0300\u0301", "o\u0302\u0323",
    "\u20DD", "Z\u0335\u0321\u0330a\u0336l\u0337g\u0334o"],
};

const specials = [
  "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
  "<｜System｜>", "<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>", "<｜image｜>",
  "<｜▁pad▁｜>", "<｜tool▁calls▁begin｜>", "<｜fim▁hole｜>", "<|EOT|>", "<dsml:", "</dsml:",
  "<｜place▁holder▁no▁7｜>", "<|place_holder_mm_span_0021|>", "<｜action｜>", "<｜read_url｜>",
  "<｜begin▁sys｜>", "<｜end_of_query｜>", "<｜box｜>", "<｜/ref｜>",
];
// Near misses: must stay ordinary text in every mode.
const nearMisses = [
  "<|User|>", "<｜user｜>", "<｜User>", "｜User｜>", "<｜User｜", "< ｜User｜>", "<｜Us er｜>",
  "<think >", "< think>", "<Think>", "</ think>", "<think", "think>", "<｜DSML｜", "|DSML|",
  "｜dsml｜", "<｜begin_of_sentence｜>", "<｜begin▁of▁sentence|>", "<|begin▁of▁sentence｜>",
  "<｜Assistant｜｜>", "<<｜User｜>>", "<｜System", "＜｜User｜＞", "<\uFF5CUser\uFF5C\u200B>",
  "<｜image2｜>x", "<｜place▁holder▁no▁｜>", "<|place_holder_mm_span_9999|>",
];

const code = [
  "int main(int argc, char** argv) {\n  return 0;\n}\n",
  "def f(x):\n    return x**2 + 1  # square\n\n\nprint(f(3))\n",
  "for (auto& [k, v] : map) { std::cout << k << \"=\" << v << '\\n'; }",
  '{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b\\"c"}}',
  "<div class=\"x\" id='y'>&amp;&lt;&gt;&#169;</div>\n<!-- comment -->",
  "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%a%';",
  "if [[ -n \"$HOME\" ]]; then echo \"${HOME}/.cache\" | sed 's/a/b/g'; fi",
  "const re = /^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)$/i;",
  "x+=1;y-=2;z*=3;w/=4;a%=5;b<<=6;c>>=7;d&=8;e|=9;f^=10;",
  "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
  "\t\tif (a && b || !c) {\r\n\t\t\treturn;\r\n\t\t}\r\n",
  "    \n    \n\n\t\n",
  "#include <vector>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
  "path/to/file_name-v2.tar.gz C:\\Users\\me\\Documents\\a.txt",
  "https://example.com/a/b?c=1&d=%20e#frag mailto:someone@example.org",
  "@decorator\nclass A(B, metaclass=M):\n    __slots__ = ('x',)\n",
  "λx.λy.x y  ∀x∈ℝ: x² ≥ 0",
  "0x1F 0b1010 0o777 1_000_000 3.14159 6.02e23 -0.0 +42 1e-9",
];

const spaces = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", "\r", " \n", "\n ", "\t\n",
  "\u00A0", "\u3000", "\u2003", "\u2009", "\u202F", "\u205F", "\u2028", "\u2029", "\u000B",
  "\u000C", "    ", "\n\n\n", " \t \t"];

const invalidLooking = [
  "\\xff\\xfe", "\\u0000", "%C3%28", "%E2%82", "&#xD800;", "&#0;", "\uFFFD", "\uFFFD\uFFFD",
  "\uFFFE", "\uFFFF", "\uE000", "\uF8FF", "\u{F0000}", "\u{10FFFD}", "\u0000", "\u0001",
  "\u001B[31mred\u001B[0m", "\u007F", "\u200B", "\u200C", "\u200D", "\u200E", "\u200F",
  "\u202E", "\u2066", "\u00AD", "a\u0000b", "\u{1D11E}", "\u{1F9D1}", "Ã©", "Ã¢â‚¬â„¢",
  "ĠÑĤÐ²ÑĬÑĢ", "Ġ", "ĊĊ", "ÂÃÄ", "\u0130\u0131", "ﬁ", "ﬀ", "Å", "Å",
];

function pick(rng, list) {
  return list[Math.floor(rng() * list.length)];
}

function digits(rng) {
  const n = 1 + Math.floor(rng() * 14);
  let s = "";
  for (let i = 0; i < n; i++) s += String(Math.floor(rng() * 10));
  const forms = [s, s.replace(/\d/g, (d) => String.fromCharCode(0xff10 + Number(d))),
    s.replace(/\d/g, (d) => String.fromCharCode(0x0660 + Number(d))), `${s}.${s}`, `-${s}`,
    `${s},${s}`, `$${s}`, `${s}%`, `v${s}`, `${s}px`, `№${s}`, `${s}th`];
  return pick(rng, forms);
}

function fragment(rng) {
  const r = rng();
  if (r < 0.35) return pick(rng, words[pick(rng, Object.keys(words))]);
  if (r < 0.5) return pick(rng, spaces);
  if (r < 0.6) return digits(rng);
  if (r < 0.68) return pick(rng, [...words.symbols, ",", ".", "!", "?", ":", ";", "(", ")",
    "[", "]", "{", "}", "'", "\"", "-", "_", "/", "\\", "|", "`", "~", "^", "*", "&", "#"]);
  if (r < 0.76) return pick(rng, specials);
  if (r < 0.82) return pick(rng, nearMisses);
  if (r < 0.9) return pick(rng, invalidLooking);
  return pick(rng, code);
}

export function corpus() {
  const out = [];
  // Fixed cases first.
  out.push("", " ", "a", "Hello", "Hello, world!", "1 12 123 1234", "What is 2+2?",
    "<｜User｜>Hi<｜Assistant｜>", "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ");
  for (const list of Object.values(words)) out.push(...list, list.join(" "), list.join(""));
  out.push(...specials, ...nearMisses, ...code, ...spaces, ...invalidLooking);
  for (const s of specials) out.push(`x${s}y`, ` ${s} `, `${s}${s}`, `\n${s}\n`, `1${s}2`);
  for (const s of spaces) out.push(`a${s}b`, `${s}a`, `a${s}`, `${s}${s}${s}`, `.${s}x`,
    `${s}1`, `中${s}文`);
  for (let n = 1; n <= 40; n++) out.push("7".repeat(n), " ".repeat(n), "\n".repeat(n),
    "a".repeat(n), "中".repeat(n));
  // Random mixtures.
  const rng = mulberry32(20260401);
  while (out.length < 2600) {
    const n = 1 + Math.floor(rng() * 24);
    let s = "";
    for (let i = 0; i < n; i++) s += fragment(rng);
    out.push(s);
  }
  // A few long texts (whitespace runs and letter runs that need the heap merge path).
  out.push(" ".repeat(300), "ab".repeat(400), "\n\t ".repeat(100), "x".repeat(1000));
  return out;
}
