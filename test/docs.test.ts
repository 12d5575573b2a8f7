/**
 * The docs show only what exists. In every fenced code block of README.md and docs/*.md:
 * - each `npx switchyard <app> ...` / `node bin/switchyard.mjs <app> ...` command line names an app
 *   the `switchyard` command dispatches, and its whole argument list is accepted by that app's own
 *   flag parser (the same function its `main` calls), so a flag that does not exist, or a value it
 *   refuses, fails here;
 * - each `npm run <script>`, `npm start` and `npm test` names a script of package.json.
 * Flags of other tools (curl, npm, kubectl, python, `npm run cluster -- ...`) are never read: only the
 * words of a switchyard command line are. The flag tables (a first column `flag`, under a heading
 * naming the app) list only flags that app's parser knows. Outside code blocks, every relative link
 * resolves to a file and, into a Markdown page, to one of its headings; every docs page is in the
 * README's map.
 * Pure: no server starts (one `switchyard --help` lists the commands).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parsePlannerArgs, parseProfileArgs } from '@switchyard/planner-app';
import { parseRouterArgs } from '@switchyard/router';
import { parseSimulateArgs } from '@switchyard/simulator-app';
import { repoRoot } from '@switchyard/testing';
import { parseWorkerArgs } from '@switchyard/worker';

const ROOT = repoRoot();

/** A flag the minimal argv gives unless the command line gives one of `unless` itself. */
interface Required {
  unless: string[];
  argv: string[];
}
interface AppParser {
  parse: (argv: readonly string[]) => unknown;
  /** What makes an otherwise partial command line valid (the flags each app requires). */
  required: Required[];
}

const ETCD = ['--etcd', 'http://127.0.0.1:2379'];
const NATS = ['--nats', 'nats://127.0.0.1:4222'];
/** Each `switchyard` command (and subcommand) and its parser. */
const PARSERS: Record<string, AppParser> = {
  worker: { parse: parseWorkerArgs, required: [{ unless: ['model-repository'], argv: ['--model-repository', 'examples/model_repository'] }] },
  router: {
    parse: parseRouterArgs,
    required: [
      { unless: ['etcd'], argv: ETCD },
      { unless: ['nats'], argv: NATS },
      { unless: ['redis'], argv: ['--redis', 'redis://127.0.0.1:6379'] },
    ],
  },
  planner: {
    parse: parsePlannerArgs,
    required: [
      { unless: ['etcd'], argv: ETCD },
      { unless: ['nats'], argv: NATS },
      { unless: ['model'], argv: ['--model', 'mock_llm'] },
    ],
  },
  'planner profile': {
    parse: parseProfileArgs,
    required: [
      { unless: ['url'], argv: ['--url', 'http://127.0.0.1:8000'] },
      { unless: ['model'], argv: ['--model', 'mock_llm'] },
      { unless: ['out'], argv: ['--out', 'profile.json'] },
    ],
  },
  simulate: { parse: parseSimulateArgs, required: [{ unless: ['trace', 'synthetic'], argv: ['--synthetic', 'sin:min=0.4,max=4,period=3600'] }] },
};

interface Where {
  file: string;
  line: number;
}
interface SwitchyardCommand extends Where {
  app: string;
  args: string[];
}
interface NpmScript extends Where {
  script: string;
}

// ---- markdown ----------------------------------------------------------------------------------

interface CodeBlock {
  line: number;
  text: string;
}

/** Fenced code blocks (``` or ~~~, indented inside list items too) and the prose outside them. */
export function splitMarkdown(markdown: string): { blocks: CodeBlock[]; prose: Array<{ line: number; text: string }> } {
  const blocks: CodeBlock[] = [];
  const prose: Array<{ line: number; text: string }> = [];
  const lines = markdown.split('\n');
  let fence: { marker: string; line: number; body: string[] } | undefined;
  lines.forEach((text, i) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(text);
    if (fence === undefined) {
      if (open) fence = { marker: open[1]!, line: i + 2, body: [] };
      else prose.push({ line: i + 1, text });
    } else if (open && open[1]!.startsWith(fence.marker) && text.trim() === open[1]) {
      blocks.push({ line: fence.line, text: fence.body.join('\n') });
      fence = undefined;
    } else {
      fence.body.push(text);
    }
  });
  if (fence !== undefined) throw new Error(`code block opened on line ${fence.line - 1} is never closed`);
  return { blocks, prose };
}

// ---- shell -------------------------------------------------------------------------------------

/**
 * The simple commands of a shell snippet, as word lists after quote removal: `\`-newline joins
 * lines, `#` starts a comment, `&& || | ; & ( ) < >` and newlines separate commands (a redirection's
 * target becomes a command of its own, which matches nothing). `$VAR` stays as written.
 */
export function shellCommands(script: string): Array<{ line: number; words: string[] }> {
  const out: Array<{ line: number; words: string[] }> = [];
  let words: string[] = [];
  let word: string | undefined;
  let line = 1;
  let start = 1;
  const endWord = (): void => {
    if (word !== undefined) {
      if (words.length === 0) start = line;
      words.push(word);
    }
    word = undefined;
  };
  const endCommand = (): void => {
    endWord();
    if (words.length > 0) out.push({ line: start, words });
    words = [];
  };
  for (let i = 0; i < script.length; i++) {
    const c = script[i]!;
    if (c === '\\' && script[i + 1] === '\n') {
      i++;
      line++;
      continue;
    }
    if (c === '\\') {
      word = (word ?? '') + (script[i + 1] ?? '');
      i++;
    } else if (c === "'") {
      const end = script.indexOf("'", i + 1);
      const body = end === -1 ? script.slice(i + 1) : script.slice(i + 1, end);
      line += body.split('\n').length - 1;
      word = (word ?? '') + body;
      i = end === -1 ? script.length : end;
    } else if (c === '"') {
      let body = '';
      let j = i + 1;
      for (; j < script.length && script[j] !== '"'; j++) {
        if (script[j] === '\\' && '"\\$`'.includes(script[j + 1] ?? '')) j++;
        if (script[j] === '\n') line++;
        body += script[j];
      }
      word = (word ?? '') + body;
      i = j;
    } else if (c === '#' && word === undefined) {
      while (i + 1 < script.length && script[i + 1] !== '\n') i++;
    } else if (c === '\n') {
      endCommand();
      line++;
    } else if (c === ' ' || c === '\t') {
      endWord();
    } else if ('&|;()<>'.includes(c)) {
      endCommand();
    } else {
      word = (word ?? '') + c;
    }
  }
  endCommand();
  return out;
}

/** The switchyard command or npm script one simple command runs, if any. */
export function classify(words: readonly string[]): { app: string; args: string[] } | { script: string } | undefined {
  let w = [...words];
  while (w.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(w[0]!)) w = w.slice(1); // FOO=1 cmd ...
  if (w[0] === '$') w = w.slice(1); // a prompt
  // `node scripts/with-node.mjs 26 -- <command>` runs the command on another Node.js line
  if (w[0] === 'node' && w[1]?.endsWith('scripts/with-node.mjs')) {
    const dashes = w.indexOf('--');
    return dashes === -1 ? undefined : classify(w.slice(dashes + 1));
  }
  const viaNpx = w[0] === 'npx' && w[1] === 'switchyard';
  const viaNode = w[0] === 'node' && /(^|\/)bin\/switchyard\.mjs$/.test(w[1] ?? '');
  if (viaNpx || viaNode) {
    const [app = '', ...args] = w.slice(2);
    if (app === 'planner' && args[0] === 'profile') return { app: 'planner profile', args: args.slice(1) };
    return { app, args };
  }
  if (w[0] === 'npm') {
    if (w[1] === 'run' || w[1] === 'run-script') return { script: w[2] ?? '' };
    if (w[1] === 'start' || w[1] === 'test') return { script: w[1] };
  }
  return undefined;
}

/** The flag names (`--name` or `--name=value`) of a switchyard argument list; `--` alone ends them. */
export function flagNames(args: readonly string[]): string[] {
  const names: string[] = [];
  for (const a of args) {
    if (a === '--') break;
    if (a.startsWith('--')) names.push(a.slice(2).split('=')[0]!);
  }
  return names;
}

/** The argument list as the app receives it: the documented one after what the app requires. */
export function withRequired(parser: AppParser, args: readonly string[]): string[] {
  const given = new Set(flagNames(args));
  const required = parser.required.filter((r) => !r.unless.some((f) => given.has(f))).flatMap((r) => r.argv);
  // `$VAR` would be expanded by the shell; any value stands in for it
  return [...required, ...args.map((a) => a.replace(/\$\{?[A-Za-z_][A-Za-z0-9_]*\}?/g, 'x'))];
}

/** The planner flags whose value is the command line of the workers it starts (one shell-like string). */
const WORKER_TEMPLATE_FLAGS = ['worker-args', 'prefill-worker-args', 'decode-worker-args'];

/** The values of `--name=value` / `--name value` in an argument list. */
function flagValues(args: readonly string[], name: string): string[] {
  const values: string[] = [];
  args.forEach((a, i) => {
    if (a.startsWith(`--${name}=`)) values.push(a.slice(name.length + 3));
    else if (a === `--${name}` && args[i + 1] !== undefined) values.push(args[i + 1]!);
  });
  return values;
}

/** Why the app refuses the documented arguments, or undefined when it accepts them. */
export function refusal(app: string, args: readonly string[]): string | undefined {
  const parser = PARSERS[app];
  if (parser === undefined) return `'${app}' is not a switchyard command (${Object.keys(PARSERS).join(', ')})`;
  try {
    parser.parse(withRequired(parser, args));
  } catch (e) {
    return (e as Error).message;
  }
  // The planner keeps its workers' flags as text until it starts one: check them as the worker will.
  if (app === 'planner') {
    for (const flag of WORKER_TEMPLATE_FLAGS) {
      for (const value of flagValues(args, flag)) {
        // each placeholder ({http_port}, {replica}, ...) a value of its own, as each replica gets
        const placeholders = new Map<string, string>();
        const words = shellCommands(value)
          .flatMap((c) => c.words)
          .map((w) => w.replace(/\{[a-z_]+\}/g, (p) => placeholders.get(p) ?? placeholders.set(p, String(20000 + placeholders.size)).get(p)!));
        // and the planner's own cluster flags, which its workers inherit
        const inherited = ['etcd', 'nats', 'namespace'].flatMap((f) => (flagNames(words).includes(f) ? [] : flagValues(withRequired(parser, args), f).slice(-1).map((v) => `--${f}=${v}`)));
        const why = refusal('worker', [...inherited, ...words]);
        if (why !== undefined) return `in --${flag}: ${why}`;
      }
    }
  }
  return undefined;
}

/** Whether the app's parser knows the flag at all (its value aside). */
export function knows(app: string, name: string): boolean {
  return refusal(app, [`--${name}`]) !== `unknown flag '--${name}'`;
}

/**
 * The flags of the flag tables (first header cell `flag`) in prose: each table under the nearest
 * heading that names its app ("Worker flags", "Router flags"); the first column's `--name` tokens.
 */
export function flagTables(markdown: string): Array<{ line: number; app: string | undefined; flags: string[] }> {
  const out: Array<{ line: number; app: string | undefined; flags: string[] }> = [];
  let heading = '';
  let inTable = false;
  for (const { line, text } of splitMarkdown(markdown).prose) {
    if (/^#{1,6}\s/.test(text)) heading = text.toLowerCase();
    if (/^\|\s*flag\s*\|/.test(text)) {
      inTable = true;
      continue;
    }
    if (!text.startsWith('|')) inTable = false;
    if (!inTable || /^\|[-:| ]+\|$/.test(text)) continue;
    const app = Object.keys(PARSERS).find((a) => !a.includes(' ') && heading.includes(a));
    const first = text.split('|')[1] ?? '';
    out.push({ line, app, flags: [...first.matchAll(/--([a-z][a-z0-9-]*)/g)].map((m) => m[1]!) });
  }
  return out;
}

// ---- links -------------------------------------------------------------------------------------

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to '-', repeats numbered. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text } of splitMarkdown(markdown).prose) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (!m) continue;
    const plain = m[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[`*]/g, '');
    const slug = plain.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** Relative link targets in prose (inline code spans left out). */
export function relativeLinks(markdown: string): Array<{ line: number; target: string }> {
  const out: Array<{ line: number; target: string }> = [];
  for (const { line, text } of splitMarkdown(markdown).prose) {
    const prose = text.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      out.push({ line, target });
    }
  }
  return out;
}

// ---- the docs ----------------------------------------------------------------------------------

const DOC_FILES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');

function documented(): { commands: SwitchyardCommand[]; scripts: NpmScript[] } {
  const commands: SwitchyardCommand[] = [];
  const scripts: NpmScript[] = [];
  for (const file of DOC_FILES) {
    for (const block of splitMarkdown(read(file)).blocks) {
      for (const { line, words } of shellCommands(block.text)) {
        const found = classify(words);
        const where = { file, line: block.line + line - 1 };
        if (found && 'app' in found) commands.push({ ...where, ...found });
        else if (found) scripts.push({ ...where, ...found });
      }
    }
  }
  return { commands, scripts };
}

describe('the parts that read the docs', () => {
  it('find code blocks, indented ones too, and leave their lines out of the prose', () => {
    const md = 'a [x](y.md)\n\n```sh\nnpm test\n```\n\n- item\n\n  ```sh\n  npx switchyard worker --x\n  ```\nb';
    const { blocks, prose } = splitMarkdown(md);
    expect(blocks).toEqual([
      { line: 4, text: 'npm test' },
      { line: 10, text: '  npx switchyard worker --x' },
    ]);
    expect(prose.map((p) => p.text)).not.toContain('npm test');
    expect(() => splitMarkdown('```sh\nnpm test\n')).toThrow(/never closed/);
  });

  it('split shell into simple commands: quotes, continuations, comments, operators', () => {
    const sh = [
      "npx switchyard planner --worker-args='--http-port={http_port} --bogus' \\",
      '  --model m   # --not-a-flag',
      'curl -s localhost:8082/metrics | grep nv_ && npm run bench -- --only llm',
      'FUZZ_RUNS=10 npm run fuzz; node scripts/with-node.mjs 26 -- npm test',
      'X="a \\"b\\" $Y" node bin/switchyard.mjs simulate --trace=t.jsonl',
    ].join('\n');
    const cmds = shellCommands(sh);
    expect(cmds.map((c) => c.words)).toEqual([
      ['npx', 'switchyard', 'planner', '--worker-args=--http-port={http_port} --bogus', '--model', 'm'],
      ['curl', '-s', 'localhost:8082/metrics'],
      ['grep', 'nv_'],
      ['npm', 'run', 'bench', '--', '--only', 'llm'],
      ['FUZZ_RUNS=10', 'npm', 'run', 'fuzz'],
      ['node', 'scripts/with-node.mjs', '26', '--', 'npm', 'test'],
      ['X=a "b" $Y', 'node', 'bin/switchyard.mjs', 'simulate', '--trace=t.jsonl'],
    ]);
    expect(cmds.map((c) => c.line)).toEqual([1, 3, 3, 3, 4, 4, 5]);
    expect(cmds.map((c) => classify(c.words))).toEqual([
      { app: 'planner', args: ['--worker-args=--http-port={http_port} --bogus', '--model', 'm'] },
      undefined,
      undefined,
      { script: 'bench' },
      { script: 'fuzz' },
      { script: 'test' },
      { app: 'simulate', args: ['--trace=t.jsonl'] },
    ]);
    expect(classify(['npx', 'switchyard', 'planner', 'profile', '--url', 'u'])).toEqual({ app: 'planner profile', args: ['--url', 'u'] });
    expect(classify(['kubectl', 'apply', '-f', 'x.yaml'])).toBeUndefined();
  });

  it("catch a flag an app does not have, a value it refuses and a command that does not exist", () => {
    expect(refusal('worker', ['--no-such-flag'])).toBe("unknown flag '--no-such-flag'");
    expect(refusal('router', ['--router-mode', 'fastest'])).toMatch(/--router-mode/);
    expect(refusal('planner', ['--http-port', '8000'])).toBe("unknown flag '--http-port'"); // a worker flag, not the planner's
    expect(refusal('serve', [])).toMatch(/not a switchyard command/);
    expect(refusal('worker', ['--model-control-mode=explicit', '--load-model=simple'])).toBeUndefined();
    expect(refusal('simulate', ['--trace=t.jsonl'])).toBeUndefined(); // --synthetic is not added beside --trace
    expect(refusal('worker', ['--openai-api-key=$KEY'])).toBeUndefined();
    // the workers a planner starts take their own flags, checked by the worker's parser
    expect(refusal('planner', ["--worker-args=--model-repository=/m --http-port={http_port}"])).toBeUndefined();
    expect(refusal('planner', ['--worker-args=--model-repository=/m --no-such-flag'])).toBe("in --worker-args: unknown flag '--no-such-flag'");
  });

  it('read flag tables under the heading that names their app', () => {
    const md = '## Worker flags\n\n| flag | default | meaning |\n|---|---|---|\n| `--http-port`, `--grpc-port` | 8000 | `--not-this` |\n\nprose --nor-this\n\n## Other\n\n| flag | x |\n|---|---|\n| `--x` | |';
    expect(flagTables(md)).toEqual([
      { line: 5, app: 'worker', flags: ['http-port', 'grpc-port'] },
      { line: 13, app: undefined, flags: ['x'] },
    ]);
    expect(knows('worker', 'http-port')).toBe(true);
    expect(knows('router', 'model-repository')).toBe(false);
  });

  it('anchor headings as GitHub does', () => {
    const anchors = headingAnchors("# Safe deployment\n## Front-door limits\n## tritonserver's flags\n## `n` and logprobs\n```sh\n# not a heading\n```\n## Metrics\n## Metrics");
    expect([...anchors]).toEqual(['safe-deployment', 'front-door-limits', 'tritonservers-flags', 'n-and-logprobs', 'metrics', 'metrics-1']);
    expect(relativeLinks('see [a](b.md#c), [web](https://x.y) and `[no](code.md)`')).toEqual([{ line: 1, target: 'b.md#c' }]);
  });
});

describe('the docs', () => {
  const { commands, scripts } = documented();

  it('show switchyard command lines (the check below has something to check)', () => {
    expect(DOC_FILES.length).toBeGreaterThan(10);
    for (const app of ['worker', 'router', 'planner', 'simulate']) expect(commands.some((c) => c.app === app), app).toBe(true);
    expect(scripts.map((s) => s.script)).toEqual(expect.arrayContaining(['start', 'test', 'cluster', 'bench', 'fuzz']));
  });

  it('name only commands the switchyard command dispatches, each with a parser here', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'switchyard.mjs'), '--help'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    const listed = [...r.stdout.matchAll(/^ {2}([a-z][a-z-]*)\s/gm)].map((m) => m[1]!);
    expect(listed.sort()).toEqual(Object.keys(PARSERS).filter((k) => !k.includes(' ')).sort());
  });

  it("show only flags and values each app's own parser accepts", () => {
    const bad = commands
      .map((c) => ({ c, why: refusal(c.app, c.args) }))
      .filter(({ why }) => why !== undefined)
      .map(({ c, why }) => `${c.file}:${c.line}: switchyard ${c.app} ${c.args.join(' ')}\n  -> ${why}`);
    expect(bad, bad.join('\n')).toEqual([]);
  });

  it("list in their flag tables only flags each app's parser knows", () => {
    const bad: string[] = [];
    let rows = 0;
    for (const file of DOC_FILES) {
      for (const { line, app, flags } of flagTables(read(file))) {
        rows++;
        if (app === undefined) bad.push(`${file}:${line}: a flag table under a heading that names no app (${Object.keys(PARSERS).join(', ')})`);
        else for (const f of flags) if (!knows(app, f)) bad.push(`${file}:${line}: switchyard ${app} has no flag --${f}`);
      }
    }
    expect(rows).toBeGreaterThan(40);
    expect(bad, bad.join('\n')).toEqual([]);
  });

  it('run only npm scripts package.json has', () => {
    const defined = Object.keys((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts);
    const bad = scripts.filter((s) => !defined.includes(s.script)).map((s) => `${s.file}:${s.line}: npm run ${s.script}`);
    expect(bad, bad.join('\n')).toEqual([]);
  });

  it('link to files that exist, and to headings that exist', () => {
    const bad: string[] = [];
    for (const file of DOC_FILES) {
      for (const { line, target } of relativeLinks(read(file))) {
        const [path = '', anchor] = target.split('#');
        const abs = path === '' ? join(ROOT, file) : resolve(dirname(join(ROOT, file)), decodeURI(path));
        if (relative(ROOT, abs).startsWith('..')) bad.push(`${file}:${line}: ${target} leaves the repository`);
        else if (!existsSync(abs)) bad.push(`${file}:${line}: ${target} does not exist`);
        else if (anchor !== undefined && abs.endsWith('.md') && !headingAnchors(readFileSync(abs, 'utf8')).has(anchor)) {
          bad.push(`${file}:${line}: ${target}: no heading '#${anchor}' in ${relative(ROOT, abs)}`);
        }
      }
    }
    expect(bad, bad.join('\n')).toEqual([]);
  });

  it("list every docs page in the README's map", () => {
    const linked = new Set(relativeLinks(read('README.md')).map((l) => l.target.split('#')[0]));
    const missing = DOC_FILES.filter((f) => f.startsWith('docs/') && !linked.has(f));
    expect(missing, `add a row to the README's Documentation table for: ${missing.join(', ')}`).toEqual([]);
  });
});
