#!/usr/bin/env node
// (Re)generate every model file of examples/model_repository, test/fixtures/model_repository and
// test/fixtures/real_vocab_repository (decoders and tokenizer folders at real vocabulary widths).
// The bytes come from @switchyard/onnx-builder (built to dist by `npx tsc -b` first) and are the same on
// every run. The config.pbtxt files are hand-written and committed; this script never touches them.
//
//   node scripts/generate-models.mjs              rewrite every generated file
//   node scripts/generate-models.mjs --if-absent  write only the files that are missing
//   --examples     only examples/model_repository (what `npm start` serves; not the test fixtures)
//   --root <dir>   write under <dir>/examples/... and <dir>/test/fixtures/... instead (tests use it)
//   --quiet        print nothing
// Each file is written to a temporary name and renamed into place, so a concurrent reader (a test
// loading the fixture repository) sees the old bytes or the new ones, never a half-written file.
import { mkdir, writeFile, access, rename } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exampleRepositoryFiles, fixtureRepositoryFiles, realVocabRepositoryFiles } from '@switchyard/onnx-builder';

const USAGE = 'usage: node scripts/generate-models.mjs [--if-absent] [--examples] [--quiet] [--root <dir>]\n';

function parseArgs(argv) {
  const opts = { ifAbsent: false, examplesOnly: false, quiet: false, root: fileURLToPath(new URL('..', import.meta.url)) };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--if-absent') opts.ifAbsent = true;
    else if (arg === '--examples') opts.examplesOnly = true;
    else if (arg === '--quiet' || arg === '-q') opts.quiet = true;
    else if (arg === '--root' && i + 1 < argv.length) opts.root = resolve(argv[++i]);
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write(USAGE);
      process.exit(0);
    } else {
      process.stderr.write(`generate-models: unknown argument ${arg}\n${USAGE}`);
      process.exit(2);
    }
  }
  return opts;
}

async function exists(path) {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

const opts = parseArgs(process.argv.slice(2));
const ROOT = opts.root;
const REPOSITORIES = [
  { dir: join(ROOT, 'examples', 'model_repository'), files: () => exampleRepositoryFiles() },
  ...(opts.examplesOnly
    ? []
    : [
        { dir: join(ROOT, 'test', 'fixtures', 'model_repository'), files: () => fixtureRepositoryFiles() },
        { dir: join(ROOT, 'test', 'fixtures', 'real_vocab_repository'), files: () => realVocabRepositoryFiles() },
      ]),
];
let written = 0;
let kept = 0;
for (const repo of REPOSITORIES) {
  for (const file of repo.files()) {
    const target = join(repo.dir, ...file.path.split('/'));
    if (opts.ifAbsent && (await exists(target))) {
      kept++;
      continue;
    }
    await mkdir(dirname(target), { recursive: true });
    const temp = `${target}.${process.pid}.tmp`;
    await writeFile(temp, file.build());
    await rename(temp, target);
    written++;
    if (!opts.quiet) process.stdout.write(`wrote ${relative(ROOT, target)}\n`);
  }
}
if (!opts.quiet) process.stdout.write(`generate-models: ${written} written, ${kept} already present\n`);
