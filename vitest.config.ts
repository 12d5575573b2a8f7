import { defineConfig } from 'vitest/config';

// One run over every package's unit tests (src/**) and the end-to-end suites (test/**).
// The `source` export condition makes workspace imports resolve to TypeScript sources.
//
// The official openai SDK the tests drive: its 7.x line where the running Node.js supports it (7.x
// needs Node 22 or newer), else 6.x. Test files import 'openai' (types come from 6.x, whose API the
// tests use is the same); on Node 22+ that import resolves to the `openai7` alias (npm:openai@7.x).
const nodeMajor = Number(process.versions.node.split('.')[0]);
const openaiAlias = nodeMajor >= 22 ? [{ find: /^openai(\/.*)?$/, replacement: 'openai7$1' }] : [];

export default defineConfig({
  resolve: { conditions: ['source'], alias: openaiAlias },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
