import { describe, expect, it } from 'vitest';
import { discoveredModelsTable, modelStatusTable, renderTable } from './table.js';

describe('renderTable', () => {
  it('draws a box sized to the widest cell of each column', () => {
    expect(renderTable(['A', 'Long header'], [['wide cell', 'x']])).toBe(
      ['+-----------+-------------+', '| A         | Long header |', '+-----------+-------------+', '| wide cell | x           |', '+-----------+-------------+', ''].join('\n'),
    );
  });

  it('escapes control characters in cells', () => {
    expect(renderTable(['A'], [['x\x1b[2J\ny']])).toContain('| x\\u001b[2J\\u000ay |');
  });
});

describe('modelStatusTable', () => {
  it("looks like tritonserver's start-up table, READY or the state with its reason", () => {
    const table = modelStatusTable([
      { name: 'simple', version: '1', state: 'READY' },
      { name: 'broken', version: '1', state: 'UNAVAILABLE', reason: 'failed to load: no model file' },
      { name: 'unloaded' },
    ]);
    expect(table).toBe(
      [
        '+--------+---------+--------------------------------------------+',
        '| Model  | Version | Status                                     |',
        '+--------+---------+--------------------------------------------+',
        '| simple | 1       | READY                                      |',
        '| broken | 1       | UNAVAILABLE: failed to load: no model file |',
        '+--------+---------+--------------------------------------------+',
        '',
      ].join('\n'),
    );
  });

  it('prints the empty table when no model was loaded', () => {
    expect(modelStatusTable([])).toBe('+-------+---------+--------+\n| Model | Version | Status |\n+-------+---------+--------+\n+-------+---------+--------+\n');
  });
});

describe('discoveredModelsTable', () => {
  it('lists models by name with their kind and workers, counting those past four', () => {
    const table = discoveredModelsTable([
      { name: 'zeta', kind: 'tensor', instances: ['a'] },
      { name: 'llama', kind: 'llm', instances: ['w1', 'w2', 'w3', 'w4', 'w5', 'w6'] },
    ]);
    expect(table.split('\n').slice(1, 5)).toEqual([
      '| Model | Kind   | Workers                    |',
      '+-------+--------+----------------------------+',
      '| llama | llm    | 6: w1, w2, w3, w4, +2 more |',
      '| zeta  | tensor | 1: a                       |',
    ]);
  });
});
