/**
 * The `switchyard worker` command as a user runs it: --help, bad flags, metrics after traffic,
 * and SIGTERM draining a request that is in flight.
 */
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot, startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { get, post, range } from './lib/tensors.js';

const BIN = join(repoRoot(), 'bin', 'switchyard.mjs');
const simpleBody = { inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', data: range(16) })) };

describe('switchyard worker command', () => {
  it('--help lists the flags and exits 0', () => {
    const r = spawnSync(process.execPath, [BIN, 'worker', '--help'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('--model-repository');
    expect(r.stdout).toContain('--http-max-input-size');
  });

  it('bad flags exit 2 with a message', () => {
    const r = spawnSync(process.execPath, [BIN, 'worker', '--model-repository=/x', '--no-such-flag'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("unknown flag '--no-such-flag'");
  });

  it('the same model repository given twice serves its models once, as tritonserver does', async () => {
    const root = 'test/fixtures/model_repository';
    const worker = await startWorkerProcess({ modelRepositories: [root, root, `./${root}/`], args: ['--model-control-mode=explicit', '--load-model=simple'] });
    try {
      expect((await get(worker.httpUrl + '/v2/models/simple/ready')).status).toBe(200);
      expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
    } finally {
      await worker.stop();
    }
  });

  it('metrics reflect traffic with Triton names and labels', async () => {
    const worker = await startWorkerProcess({ modelRepositories: ['test/fixtures/model_repository'], args: ['--model-control-mode=explicit', '--load-model=simple'] });
    try {
      for (let i = 0; i < 3; i++) expect((await post(worker.httpUrl + '/v2/models/simple/infer', simpleBody)).status).toBe(200);
      await post(worker.httpUrl + '/v2/models/simple/infer', { inputs: [] });
      const res = await fetch(worker.metricsUrl + '/metrics');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/plain');
      const text = await res.text();
      expect(text).toContain('nv_inference_request_success{model="simple",version="1"} 3');
      expect(text).toContain('nv_inference_count{model="simple",version="1"} 3');
      expect(text).toContain('nv_inference_exec_count{model="simple",version="1"} 3');
      expect(text).toMatch(/nv_inference_request_failure\{model="simple",reason="(OTHER|REJECTED)",version="1"\} 1/);
      expect(text).toContain('nv_inference_pending_request_count{model="simple",version="1"} 0');
      expect(text).toMatch(/nv_cpu_memory_total_bytes \d+/);
    } finally {
      await worker.stop();
    }
  });

  it('SIGTERM finishes the request in flight, then exits 0', async () => {
    const worker = await startWorkerProcess({ modelRepositories: ['test/fixtures/model_repository'], args: ['--model-control-mode=explicit', '--load-model=simple'] });
    const body = Buffer.from(JSON.stringify(simpleBody));
    let exited: ReturnType<WorkerProcess['stop']> | undefined;
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: worker.ports.http, path: '/v2/models/simple/infer', method: 'POST', headers: { 'Content-Length': String(body.length) } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body: text }));
      });
      req.on('error', reject);
      // Half the body now, the rest after the signal: the request is in flight when SIGTERM lands.
      req.write(body.subarray(0, 20));
      setTimeout(() => {
        exited = worker.stop('SIGTERM');
        setTimeout(() => req.end(body.subarray(20)), 300);
      }, 300);
    });
    const r = await response;
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body).outputs[0].data).toEqual(range(16, (i) => 2 * i));
    const exit = await exited!;
    expect(exit.code).toBe(0);
    expect(worker.logs().some((l) => l['msg'] === 'worker stopped')).toBe(true);
    // And it no longer accepts connections.
    await expect(get(worker.httpUrl + '/v2/health/live')).rejects.toThrow();
  });
});
