import { configDefaults, defineConfig } from 'vitest/config';

// One run over every package's unit tests (src/**) and the end-to-end suites (test/**).
// The `source` export condition makes workspace imports resolve to TypeScript sources.
//
// The official openai SDK the tests drive: its 7.x line where the running Node.js supports it (7.x
// needs Node 22 or newer), else 6.x. Test files import 'openai' (types come from 6.x, whose API the
// tests use is the same); on Node 22+ that import resolves to the `openai7` alias (npm:openai@7.x).
const nodeMajor = Number(process.versions.node.split('.')[0]);
const openaiAlias = nodeMajor >= 22 ? [{ find: /^openai(\/.*)?$/, replacement: 'openai7$1' }] : [];

// Four projects, so a 2-core machine runs the suite in about half the time without making timing
// assertions flaky (scripts/run-tests.mjs runs them; `npx vitest run` runs them one file at a time):
// - `unit`: every package's and app's own tests. They run in one process, without a fresh module
//   graph per file (`isolate: false`): importing the workspace again for each of ~180 files cost
//   about 2 of every 5 minutes they took. A unit test therefore restores whatever global it changes.
// - `e2e`: the end-to-end suites under test/, in one process too (`isolate: false`; a fresh module
//   graph per file cost about 50 s of the ~10 minutes `npm test` takes). They drive servers in child
//   processes; what a file starts in its own process it stops in afterAll.
// - `waiting`: files that spend most of their time waiting on real servers going away and coming
//   back, on leases, planner intervals and timeouts. They use little CPU, so they run beside `unit`
//   and `e2e` (which run one after the other), one file at a time.
// - `alone`: files whose assertions are about the machine's own responsiveness (health answering
//   within a bound while the CPU is saturated, deep recursion limits) run after all the others, with
//   nothing beside them. (etcd-discovery, 2 s leases kept alive from a thread, ran here after it once
//   missed a TTL beside another file; it now passes beside the CPU-bound unit and end-to-end files,
//   9 runs of 9, and waits on etcd outages for most of its 35 s.)
// A file belongs to exactly one project; `npx vitest run <path>` finds it wherever it is.
const WAITING = [
  'test/cluster-etcd-outage.test.ts',
  'test/cluster-faults.test.ts',
  'test/cluster-kserve-faults.test.ts',
  'test/front-door-limits.test.ts',
  'test/planner.test.ts',
  'test/planner-cli.test.ts',
  'test/cluster-scale-to-zero.test.ts',
  'test/local-connector.test.ts',
  'test/model-control.test.ts',
  'test/cluster-routing-modes.test.ts',
  'test/observability.test.ts',
  'packages/runtime/src/etcd-discovery.test.ts',
  'packages/runtime/src/etcd-leader-election.test.ts',
  'packages/runtime/src/leader-election-contract.test.ts',
  // unit tests that mostly wait on real servers and sockets (30-60 % of one core alone): NATS restarts
  // and slow consumers, JetStream retention, Redis restarts, call-home heartbeats and idle timeouts,
  // KV transfer stalls
  'packages/runtime/src/nats-request-plane.test.ts',
  'packages/runtime/src/jetstream-event-plane.test.ts',
  'packages/runtime/src/redis-routing-table.test.ts',
  'packages/runtime/src/call-home/call-home.test.ts',
  'packages/runtime/src/kv-transfer/tcp-kv-transfer-plane.test.ts',
  // mostly waiting: on workers and a router starting under a pseudo-terminal, on span exports and
  // their timeouts to a collector that does not answer
  'test/terminal-output.test.ts',
  'test/tracing.test.ts',
];
const ALONE = ['test/event-loop.test.ts', 'packages/kserve/src/http-codec.fuzz.test.ts'];
const UNIT = ['packages/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts'];
const E2E = ['test/**/*.test.ts'];
const elsewhere = [...configDefaults.exclude, ...WAITING, ...ALONE];

export default defineConfig({
  resolve: { conditions: ['source'], alias: openaiAlias },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT, exclude: elsewhere, isolate: false, maxWorkers: 1, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'e2e', include: E2E, exclude: elsewhere, isolate: false, maxWorkers: 1, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'waiting', include: WAITING, maxWorkers: 1, sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'alone', include: ALONE, maxWorkers: 1, sequence: { groupOrder: 1 } } },
    ],
  },
});
