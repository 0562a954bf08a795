// Validates structured-output samples with ajv (JSON Schema draft 2020-12 + formats).
// Usage: node structured_validate.mjs samples.jsonl
// Each line: {"schema": <schema>, "output": "<generated text>"}. Exit 1 if any sample fails.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

function withNullable(schema) {
  // Rewrite {nullable: true, ...rest} as {anyOf: [rest, {type: "null"}]} recursively.
  if (Array.isArray(schema)) return schema.map(withNullable);
  if (schema === null || typeof schema !== "object") return schema;
  const out = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === "enum" || k === "const" || k === "default" || k === "examples") out[k] = v;
    else if (k === "properties" || k === "$defs" || k === "definitions") {
      out[k] = Object.fromEntries(Object.entries(v).map(([n, s]) => [n, withNullable(s)]));
    } else out[k] = withNullable(v);
  }
  if (out.nullable === true) {
    delete out.nullable;
    const defs = {};
    for (const k of ["$defs", "definitions"]) if (k in out) { defs[k] = out[k]; delete out[k]; }
    return { ...defs, anyOf: [out, { type: "null" }] };
  }
  return out;
}

const lines = readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l.length > 0);
let failed = 0;
for (const [i, line] of lines.entries()) {
  const { schema, output } = JSON.parse(line);
  let value;
  try {
    value = JSON.parse(output);
  } catch (e) {
    console.log(`sample ${i}: output is not JSON (${e.message}): ${output}`);
    failed++;
    continue;
  }
  const validate = ajv.compile(withNullable(schema));
  if (!validate(value)) {
    console.log(`sample ${i}: ${ajv.errorsText(validate.errors)}\n  schema: ${JSON.stringify(schema)}\n  output: ${output}`);
    failed++;
  }
}
console.log(`${lines.length - failed}/${lines.length} samples valid`);
process.exit(failed === 0 && lines.length > 0 ? 0 : 1);
