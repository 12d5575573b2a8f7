/**
 * `switchyard planner profile` as a user runs it, against a real `switchyard worker` serving the
 * simulated engine (the mocker, slowed down so its prefill cost stands out over HTTP): a small
 * sweep writes a profile that `parseProfile` accepts, whose prefill TTFT grows with the input length
 * as the mocker's timing model does, and whose KV capacity is the model's; the worker unreachable,
 * an unknown model and a model that is not an LLM each end with exit 1 and the reason. (Flags and
 * usage errors: apps/planner/src/profile-command.test.ts.)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { polynomialTimingModel } from '@switchyard/llm';
import { parseProfile } from '@switchyard/planner';
import { repoRoot, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';

/**
 * The fixture's mock_llm slowed down four times (speedup_ratio 0.25: a 512-token prefill takes about
 * 98 ms, a 2047-token one 197 ms), so the latencies stand well above the noise of a busy machine,
 * with room for prompts of 2048 tokens.
 */
const SLOWDOWN = 4;
const MOCK_CONFIG = readFileSync(join(repoRoot(), 'test/fixtures/llm_repository/mock_llm/config.pbtxt'), 'utf8')
  .replace(/(key: "num_gpu_blocks" value: \{ string_value: )"\d+"/, '$1"512"')
  .replace(/(key: "max_model_len" value: \{ string_value: )"\d+"/, '$1"2048"')
  .replace(/(key: "speedup_ratio" value: \{ string_value: )"[\d.]+"/, `$1"${1 / SLOWDOWN}"`);

let repo: FixtureRepository;
let worker: WorkerProcess;
let dir: string;

beforeAll(async () => {
  expect(MOCK_CONFIG).toContain('string_value: "512"');
  expect(MOCK_CONFIG).toContain('speedup_ratio" value: { string_value: "0.25"');
  const files = Object.fromEntries(llmFixtureRepositoryFiles().filter((f) => f.path.startsWith('mock_llm/')).map((f) => [f.path, f.build()]));
  repo = fixtureRepository('llm_repository', {
    overlay: { square_int32: 'test/fixtures/javascript_repository/square_int32' },
    files: { ...files, 'mock_llm/config.pbtxt': new TextEncoder().encode(MOCK_CONFIG) },
  });
  // only the mocker and square_int32 serve here: the ONNX LLMs' files are not built
  rmSync(join(repo.path, 'tiny_llm'), { recursive: true, force: true });
  rmSync(join(repo.path, 'tiny_llm_fp16'), { recursive: true, force: true });
  worker = await startWorkerProcess({ modelRepositories: [repo.path] });
  dir = mkdtempSync(join(tmpdir(), 'switchyard-profile-'));
}, 60_000);
afterAll(async () => {
  await worker?.stop();
  repo?.remove();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Runs the command to completion (asynchronously: the worker in this process's tests keeps serving). */
function profile(...args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(repoRoot(), 'bin/switchyard.mjs'), 'planner', 'profile', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

describe('switchyard planner profile', () => {
  it('measures the mocker and writes a profile the planner accepts, TTFT growing with ISL', async () => {
    const out = join(dir, 'profile.json');
    const r = await profile(
      `--url=${worker.httpUrl}`,
      '--model=mock_llm',
      `--out=${out}`,
      '--max-isl=2048',
      '--isl-points=4',
      '--context-points=2',
      '--concurrency-points=2',
      '--max-concurrency=4',
      '--decode-osl=8',
      '--repeats=2',
    );
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('profile written');
    const p = parseProfile(JSON.parse(readFileSync(out, 'utf8')));
    const pre = p.prefill!;
    expect(pre.isl).toEqual([512, 1024, 1535, 2047]);
    // The mocker's prefill law (× SLOWDOWN), plus the same overhead for every length.
    const law = (isl: number): number => polynomialTimingModel.prefillMs(isl) * SLOWDOWN;
    expect(pre.ttftMs[3]! - pre.ttftMs[0]!).toBeGreaterThan((law(2047) - law(512)) / 3);
    for (let i = 0; i < pre.isl.length; i++) expect(pre.ttftMs[i]!).toBeGreaterThan(law(pre.isl[i]!) * 0.9);
    for (const t of pre.throughputTokensPerSec) expect(t).toBeGreaterThan(0);
    const dec = p.decode!;
    expect(dec.kvCapacityTokens).toBe(512 * 16);
    expect(dec.contextLength.length).toBe(2);
    expect(dec.kvUsage.length).toBeGreaterThanOrEqual(2);
    // A decode step costs at least the law's figure at its usage (5.7 ms at none, × SLOWDOWN) ...
    for (const row of dec.itlMs) for (const itl of row) expect(itl).toBeGreaterThan(5 * SLOWDOWN);
    // ... and grows with KV usage (the law: 17.6 ms at 0.25, 31.8 ms at 0.75, × SLOWDOWN): the longer context's column spans both.
    const top = dec.kvUsage.length - 1;
    expect(dec.itlMs[top]![1]! - dec.itlMs[0]![1]!).toBeGreaterThan(5 * SLOWDOWN);
  }, 60_000);

  it('exits 1 with the reason when the worker is unreachable, lacks the model, or the model is not an LLM', async () => {
    const out = join(dir, 'never.json');
    const [unreachable, unknown, notLlm] = await Promise.all([
      profile('--url=http://127.0.0.1:1', '--model=mock_llm', `--out=${out}`),
      profile(`--url=${worker.httpUrl}`, '--model=no_such_model', `--out=${out}`),
      profile(`--url=${worker.httpUrl}`, '--model=square_int32', `--out=${out}`),
    ]);
    expect(unreachable.status).toBe(1);
    expect(unreachable.stdout).toContain('worker unreachable at http://127.0.0.1:1');
    expect(unknown.status).toBe(1);
    expect(unknown.stdout).toContain("serves no model 'no_such_model'");
    expect(notLlm.status).toBe(1);
    expect(notLlm.stdout).toContain("model 'square_int32' is not an LLM");
    expect(() => readFileSync(out)).toThrow();
  }, 60_000);
});
