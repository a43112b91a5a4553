// Validates generated JSON texts against their JSON Schemas with Ajv (v8, with ajv-formats), a
// validator independent of Trellis's schema compiler: what the grammar let through must be what
// the schema allows.
//
//   node tests/node/ajv_validate.mjs CASES.json
//
// CASES.json: {"cases": [{"name": "...", "schema": {...}, "outputs": ["<json text>", ...],
//                         "draft": "2020-12", "oneOfAsAnyOf": true}, ...]}
// ("name" is optional: it only labels the failures). Each output is parsed with JSON.parse (a
// parse failure is a failure) and validated with allErrors and strict: false, under the draft the
// schema's $schema declares, else the case's "draft": Ajv2020 for 2020-12, Ajv2019 for 2019-09,
// the default Ajv (draft-07, which also reads draft-06) otherwise. Formats (date, time, date-time, uuid, email, ...) are
// checked by ajv-formats.
// "oneOfAsAnyOf" (optional) validates against the schema with every oneOf read as anyOf, the
// semantics Trellis documents for oneOf (exclusivity is not enforced); an output valid so but
// matching several branches is not a failure: it gets a "note:" line and counts in "oneOfOverlaps".
//
// Prints one line per failure ("case I (NAME) output J: TEXT -> ERRORS"), then one JSON summary
// line {"ok", "cases", "outputs", "failed", "oneOfOverlaps"}. Exit status: 0 when every output is
// valid, 1 when any is not, 2 on a setup error (no file, ajv absent). Ajv and ajv-formats are
// looked up in
// TRELLIS_NODE_MODULES, then in each NODE_PATH entry, then in build/node/node_modules of the
// source tree (scripts/setup-node-client.sh installs them there).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { moduleDirs } from './module_dirs.mjs';

function setupError(message) {
  console.log(JSON.stringify({ ok: false, error: message }));
  process.exit(2);
}

// ESM imports ignore NODE_PATH, and ajv is CommonJS: require it from the first folder holding it.
function loadPackages() {
  const dirs = moduleDirs();
  for (const dir of dirs) {
    const require = createRequire(path.join(path.resolve(dir), 'index.js'));
    try {
      const interop = (mod) => mod.default ?? mod;
      return {
        Ajv: interop(require('ajv')),
        Ajv2019: interop(require('ajv/dist/2019')),
        Ajv2020: interop(require('ajv/dist/2020')),
        addFormats: interop(require('ajv-formats')),
      };
    } catch {
      // not (all) in this folder; try the next
    }
  }
  return null;
}

const file = process.argv[2];
if (!file) setupError('usage: node ajv_validate.mjs CASES.json');
let input;
try {
  input = JSON.parse(fs.readFileSync(file, 'utf8'));
} catch (err) {
  setupError(`cannot read ${file}: ${err.message}`);
}
if (!Array.isArray(input?.cases)) setupError(`${file} has no "cases" list`);
const packages = loadPackages();
if (packages === null) {
  setupError('ajv and ajv-formats are absent: run scripts/setup-node-client.sh build/node');
}

// A fresh validator per schema: suite schemas reuse $id values, which one Ajv instance refuses to
// register twice.
function makeValidator(schema, draft) {
  const isObject = typeof schema === 'object' && schema !== null;
  const declared = String((isObject ? schema.$schema : undefined) ?? draft ?? '');
  let AjvClass = packages.Ajv;
  if (declared.includes('2020-12')) AjvClass = packages.Ajv2020;
  else if (declared.includes('2019-09')) AjvClass = packages.Ajv2019;
  const ajv = new AjvClass({ strict: false, allErrors: true, logger: false });
  packages.addFormats(ajv);
  return ajv.compile(schema);
}

// Keywords whose value is a schema, a list of schemas, or an object of schemas (drafts 6 to
// 2020-12); other values (enum, const, examples, ...) are data and left alone.
const SCHEMA_VALUED = new Set(['additionalItems', 'additionalProperties', 'contains', 'else', 'if',
  'items', 'not', 'propertyNames', 'then', 'unevaluatedItems', 'unevaluatedProperties']);
const SCHEMA_LISTS = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items']);
const SCHEMA_MAPS = new Set(['$defs', 'definitions', 'dependencies', 'dependentSchemas',
  'patternProperties', 'properties']);

// `schema` with each oneOf turned into an anyOf (beside an anyOf: both, under allOf). A $ref that
// points into a oneOf would no longer resolve; Trellis's test schemas have none.
function oneOfAsAnyOf(schema) {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return schema;
  const out = {};
  for (const [key, value] of Object.entries(schema)) {
    if (SCHEMA_LISTS.has(key) && Array.isArray(value)) {
      out[key] = value.map(oneOfAsAnyOf);
    } else if (SCHEMA_VALUED.has(key)) {
      out[key] = oneOfAsAnyOf(value);
    } else if (SCHEMA_MAPS.has(key) && typeof value === 'object' && value !== null) {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, oneOfAsAnyOf(v)]));
    } else {
      out[key] = value;
    }
  }
  if ('oneOf' in out) {
    const branches = out.oneOf;
    delete out.oneOf;
    if ('anyOf' in out) {
      out.allOf = [...(out.allOf ?? []), { anyOf: branches }];
    } else {
      out.anyOf = branches;
    }
  }
  return out;
}

let nOutputs = 0;
let nOverlaps = 0;
let nFailed = 0;
input.cases.forEach((item, caseIndex) => {
  const label = `case ${caseIndex}${item.name ? ` (${item.name})` : ''}`;
  const outputs = item.outputs ?? [];
  nOutputs += outputs.length;
  let validate;
  let validateStrict = null;  // the schema as given, when `validate` reads oneOf as anyOf
  try {
    if (item.oneOfAsAnyOf) {
      validate = makeValidator(oneOfAsAnyOf(item.schema), item.draft);
      validateStrict = makeValidator(item.schema, item.draft);
    } else {
      validate = makeValidator(item.schema, item.draft);
    }
  } catch (err) {
    nFailed += outputs.length;
    console.log(
      `${label}: ajv cannot compile the schema ${JSON.stringify(item.schema)}: ${err.message}`,
    );
    return;
  }
  outputs.forEach((text, outputIndex) => {
    let value;
    try {
      value = JSON.parse(text);
    } catch (err) {
      ++nFailed;
      console.log(
        `${label} output ${outputIndex}: ${JSON.stringify(text)} -> not JSON: ${err.message}`,
      );
      return;
    }
    if (!validate(value)) {
      ++nFailed;
      console.log(
        `${label} output ${outputIndex}: ${JSON.stringify(text)} -> ` +
          `${JSON.stringify(validate.errors)} schema ${JSON.stringify(item.schema)}`,
      );
    } else if (validateStrict !== null && !validateStrict(value)) {
      ++nOverlaps;
      console.log(
        `note: ${label} output ${outputIndex}: ${JSON.stringify(text)} matches several oneOf ` +
          `branches (valid with oneOf read as anyOf): ${JSON.stringify(validateStrict.errors)}`,
      );
    }
  });
});
console.log(
  JSON.stringify({
    ok: nFailed === 0,
    cases: input.cases.length,
    outputs: nOutputs,
    failed: nFailed,
    oneOfOverlaps: nOverlaps,
  }),
);
process.exit(nFailed === 0 ? 0 : 1);
