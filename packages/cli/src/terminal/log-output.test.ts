import { describe, expect, it } from 'vitest';
import { logOutputOf, timestampFormat } from './log-output.js';

describe('logOutputOf', () => {
  it('keeps JSON lines off a terminal for default and ISO8601', () => {
    expect(logOutputOf({ format: 'default', isTerminal: false, noColor: false })).toEqual({ human: false, color: false, timestamps: 'default' });
    expect(logOutputOf({ format: 'ISO8601', isTerminal: false, noColor: false })).toEqual({ human: false, color: false, timestamps: 'ISO8601' });
  });

  it('switches to coloured human lines on a terminal, without colour under NO_COLOR', () => {
    expect(logOutputOf({ format: 'default', isTerminal: true, noColor: false })).toEqual({ human: true, color: true, timestamps: 'default' });
    expect(logOutputOf({ format: 'ISO8601', isTerminal: true, noColor: true })).toEqual({ human: true, color: false, timestamps: 'ISO8601' });
  });

  it('json forces JSON lines on a terminal; human forces human lines (uncoloured) off one', () => {
    expect(logOutputOf({ format: 'json', isTerminal: true, noColor: false }).human).toBe(false);
    expect(logOutputOf({ format: 'human', isTerminal: false, noColor: false })).toEqual({ human: true, color: false, timestamps: 'default' });
  });

  it("maps every format to Triton's log_format setting", () => {
    expect(['default', 'ISO8601', 'json', 'human'].map((f) => timestampFormat(f as 'json'))).toEqual(['default', 'ISO8601', 'default', 'default']);
  });
});
