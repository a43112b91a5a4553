// Where the test scripts look for their npm packages, in order: TRELLIS_NODE_MODULES, NODE_PATH's
// folders, then build/node/node_modules of this checkout (what scripts/setup-node-client.sh
// fills). ESM imports ignore NODE_PATH, so the scripts require() from each folder in turn.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function moduleDirs() {
  const dirs = [];
  if (process.env.TRELLIS_NODE_MODULES) dirs.push(process.env.TRELLIS_NODE_MODULES);
  for (const entry of (process.env.NODE_PATH ?? '').split(path.delimiter)) {
    if (entry) dirs.push(entry);
  }
  const sourceRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  dirs.push(path.join(sourceRoot, 'build', 'node', 'node_modules'));
  return dirs;
}
