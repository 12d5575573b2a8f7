/**
 * The router's live dashboard in a real browser: Debian's Chromium (installed by the test harness,
 * `CHROMIUM_BINARY`) driven by playwright-core, against a local cluster (test/support/cluster.ts:
 * private etcd, NATS, Redis; mocker workers; a router) and a planner in dry-run publishing its
 * decisions on the event plane. The page loads from the router's HTTP port, lists the real workers,
 * follows a worker joining and leaving, and shows the routing decision of a request just made — all
 * over its event stream, without a reload. A screenshot goes to os.tmpdir() (the path is logged).
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type Page, chromium } from 'playwright-core';
import { CHROMIUM_BINARY, ensureBinaries, startAppProcess, type AppProcess } from '@switchyard/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from './support/cluster.js';

let cluster: Cluster;
let browser: Browser;
let page: Page;
let planner: AppProcess | undefined;
const pageErrors: string[] = [];
/** Workers serve the mocker model only: quick to start, and one row each. */
const MOCK_ONLY = ['--model-control-mode=explicit', '--load-model=mock_llm'];

let chromiumPath: string;

// Once per machine: Debian's chromium package (about 100 MB of packages) may take minutes to install.
beforeAll(async () => {
  chromiumPath = (await ensureBinaries([CHROMIUM_BINARY])).get(CHROMIUM_BINARY.binary)!;
}, 900_000);

beforeAll(async () => {
  const [b, c] = await Promise.all([
    chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] }),
    startCluster({ workers: [MOCK_ONLY], waitForModels: ['mock_llm'] }),
  ]);
  [browser, cluster] = [b, c];
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(m.text());
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await planner?.stop('SIGKILL');
  await cluster?.stop();
});

const row = (table: string, instanceId: string) => `#${table} tbody tr[data-instance="${instanceId}"]`;

describe('router dashboard in a browser', () => {
  it('loads, lists the workers, follows one joining and leaving, shows a routing decision and a planner decision', async () => {
    const first = await cluster.instanceIdOf(cluster.workers[0]!);
    await page.goto(`${cluster.router.httpUrl}/dashboard`);
    await page.waitForSelector('#status.live', { timeout: 10_000 });
    await page.waitForSelector(row('workers', first), { timeout: 10_000 });
    expect(await page.locator(row('workers', first)).getAttribute('data-model')).toBe('mock_llm');
    expect(await page.locator(row('workers', first)).getAttribute('data-role')).toBe('aggregated');

    // a worker joins: its row appears without a reload. Meanwhile a planner in dry-run starts: it
    // publishes its decisions on the event plane every second
    const [second, p] = await Promise.all([
      cluster.addWorker(MOCK_ONLY),
      startAppProcess('planner', [
        `--etcd=${cluster.etcd.url}`,
        `--nats=${cluster.nats.url}`,
        `--namespace=${cluster.namespace}`,
        '--model=mock_llm',
        '--adjustment-interval-secs=1',
        '--metrics-port=0',
        '--metrics-address=127.0.0.1',
        '--connector=memory',
        '--dry-run',
      ]),
    ]);
    planner = p;
    const secondId = await cluster.instanceIdOf(second);
    await page.waitForSelector(row('workers', secondId), { timeout: 15_000 });
    await page.waitForSelector(`#worker-events tbody tr[data-instance="${secondId}"][data-event="joined"]`, { timeout: 5_000 });

    // a request: its decision is listed with the worker, the overlap and the cost that chose it
    const res = await fetch(`${cluster.router.httpUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'mock_llm', messages: [{ role: 'user', content: 'Which worker serves this request?' }], max_tokens: 4 }),
    });
    expect(res.status).toBe(200);
    await page.waitForSelector('#decisions tbody tr[data-model="mock_llm"]', { timeout: 5_000 });
    const cells = await page.locator('#decisions tbody tr[data-model="mock_llm"]').first().locator('td').allTextContents();
    // time, model, pool, mode, worker, prompt tokens, overlap blocks, cost, candidates
    expect(cells.slice(1, 4)).toEqual(['mock_llm', 'decode', 'kv']);
    expect([first, secondId]).toContain(cells[4]);
    expect(Number(cells[5])).toBeGreaterThan(0);
    expect(Number.isInteger(Number(cells[6]))).toBe(true);
    expect(Number.isFinite(Number(cells[7]))).toBe(true);
    expect(cells[8]).toBe('2');
    // the TTFT chart drew the request's point
    await page.waitForSelector('#chart-ttft circle[data-series="ttftP50"], #chart-ttft path[data-series="ttftP50"][d*="L"]', { timeout: 5_000 });

    // the planner's decisions are listed
    await page.waitForSelector('#planner tbody tr[data-pool]', { timeout: 15_000 });
    expect(await page.locator('#planner tbody tr[data-pool]').first().textContent()).toContain('mock_llm');

    // the worker leaves: its row goes
    await second.stop();
    await page.waitForSelector(row('workers', secondId), { state: 'detached', timeout: 15_000 });
    await page.waitForSelector(`#worker-events tbody tr[data-instance="${secondId}"][data-event="left"]`, { timeout: 5_000 });
    expect(await page.locator(row('workers', first)).count()).toBe(1);

    // nothing on the page names the cluster's servers
    const html = await page.content();
    for (const url of [cluster.etcd.url, cluster.nats.url, cluster.redis.url]) expect(html).not.toContain(url);
    expect(pageErrors).toEqual([]);

    const shot = join(tmpdir(), `switchyard-dashboard-${process.pid}.png`);
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`dashboard screenshot: ${shot}`);
  }, 60_000);
});
