import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { progressText, run } from './main.js';
import { DEFAULTS, UsageError, parseSimulateArgs } from './options.js';

describe('parseSimulateArgs', () => {
  it('takes a synthetic spec and the planner, engine and SLO flags', () => {
    const a = parseSimulateArgs(['--synthetic', 'sin:min=1,max=3,period=600', '--mode=sla', '--min-replicas', '0', '--max-replicas=4', '--ttft-slo-ms', '300', '--num-gpu-blocks', '64', '--max-model-len', '4096']);
    expect(a).toMatchObject({ synthetic: 'sin:min=1,max=3,period=600', mode: 'sla', minReplicas: 0, maxReplicas: 4, ttftSloMs: 300, numGpuBlocks: 64, maxModelLen: 4096 });
    expect(parseSimulateArgs(['--help']).help).toBe(true);
  });

  it.each([
    [[], 'exactly one of --trace'],
    [['--trace', 'a', '--synthetic', 'constant:rate=1'], 'exactly one of --trace'],
    [['--synthetic', 'constant:rate=1', '--min-replicas', '5', '--max-replicas', '2'], 'above --max-replicas'],
    [['--synthetic', 'constant:rate=1', '--profile', 'p.json'], '--profile is for --mode sla'],
    [['--synthetic', 'constant:rate=1', '--num-gpu-blocks', '4', '--max-model-len', '1000'], 'exceeds the KV cache'],
    [['--synthetic', 'constant:rate=1', '--name', '../escape'], '--name'],
    [['--synthetic', 'constant:rate=1', '--mode', 'magic'], '--mode'],
    [['--synthetic', 'constant:rate=1', '--max-replicas', '0'], '--max-replicas'],
  ])('refuses %j', (argv, fragment) => {
    expect(() => parseSimulateArgs(argv)).toThrow(UsageError);
    expect(() => parseSimulateArgs(argv)).toThrow(fragment);
  });
});

describe('run', () => {
  it('replays a Mooncake trace and writes the plot and the results', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'simulate-'));
    const trace = join(dir, 'trace.jsonl');
    const lines: string[] = [];
    for (let i = 0; i < 40; i++) lines.push(JSON.stringify({ timestamp: i * 250, input_length: 600 + (i % 5) * 100, output_length: 10 + (i % 7), hash_ids: [1, 2, i + 100] }));
    writeFileSync(trace, lines.join('\n') + '\n');
    const write = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    let out = '';
    try {
      await run({ ...DEFAULTS, trace, traceBlockSize: 256, mode: 'static', replicas: 2, outputDir: dir, name: 'small', json: true });
      out = String(write.mock.calls[0]?.[0]);
    } finally {
      write.mockRestore();
    }
    const printed = JSON.parse(out);
    expect(printed).toMatchObject({ requests: 40, finished: 40, replicas: { min: 2, max: 2 } });
    expect(printed.prefixHitRate).toBeGreaterThan(0);
    expect(readFileSync(join(dir, 'small.svg'), 'utf8')).toContain('<svg');
    expect(JSON.parse(readFileSync(join(dir, 'small.json'), 'utf8')).result.timeline.length).toBeGreaterThan(0);
  });
});

describe('progressText', () => {
  it('says where the run is in trace time and what it has seen', () => {
    expect(progressText({ simulatedMs: 125_000, requests: 310, finished: 300, inFlight: 10, replicas: 2 }, 3.3)).toBe(
      'simulating: 2m05s of trace time, 310 requests (300 done, 10 in flight), 2 replicas, 3.3 s elapsed',
    );
  });
});
