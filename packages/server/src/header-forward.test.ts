import { describe, expect, it } from 'vitest';
import { MAX_FORWARDED_HEADERS, compileHeaderForwardPattern, forwardHeaders, rawHeaderPairs } from './header-forward.js';

describe('header forwarding', () => {
  it("partial, case-insensitive match on the name, as Triton's (?i) + RE2::PartialMatch", () => {
    const p = compileHeaderForwardPattern('my-');
    expect(p.forwards('X-My-Header')).toBe(true);
    expect(p.forwards('x-my-other')).toBe(true);
    expect(p.forwards('content-type')).toBe(false);
    expect(compileHeaderForwardPattern('^x-trace$').forwards('X-Trace')).toBe(true);
    expect(compileHeaderForwardPattern('^x-trace$').forwards('x-trace-id')).toBe(false);
  });

  it('adds matching headers as string parameters, the header winning over a body parameter of its name', () => {
    const parameters: Record<string, unknown> = { a: 1, 'X-My-Header': 'from the body' };
    forwardHeaders(compileHeaderForwardPattern('^x-my'), rawHeaderPairs(['X-My-Header', 'hello', 'Host', 'h', 'x-my-n', '42']), parameters as never);
    expect(parameters).toEqual({ a: 1, 'X-My-Header': 'hello', 'x-my-n': '42' });
    forwardHeaders(undefined, [['x-my-header', 'ignored']], parameters as never);
    expect(parameters['x-my-header']).toBeUndefined();
  });

  it('never forwards names the server reads as request controls', () => {
    const all = compileHeaderForwardPattern('.*');
    for (const name of ['sequence_id', 'Sequence_Start', 'sequence_end', 'priority', 'timeout', 'binary_data_output', 'triton_enable_empty_final_response', 'TRITON_x', '__proto__']) {
      expect(all.forwards(name), name).toBe(false);
    }
    expect(all.forwards('x-anything')).toBe(true);
  });

  it('bounds what a client can make it do: name length, header count', () => {
    const all = compileHeaderForwardPattern('.');
    expect(all.forwards('x'.repeat(256))).toBe(true);
    expect(all.forwards('x'.repeat(257))).toBe(false);
    const many = Array.from({ length: MAX_FORWARDED_HEADERS + 1 }, (_, i) => [`x-${i}`, 'v'] as const);
    expect(() => forwardHeaders(all, many, {})).toThrow(`at most ${MAX_FORWARDED_HEADERS} request headers may be forwarded`);
    expect(() => forwardHeaders(all, many.slice(1), {})).not.toThrow();
  });

  it('matches in linear time: a pattern that backtracks exponentially elsewhere stays fast', () => {
    const evil = compileHeaderForwardPattern('^(a+)+$');
    const started = process.hrtime.bigint();
    for (let i = 0; i < 200; i++) expect(evil.forwards(`${'a'.repeat(250)}!`)).toBe(false);
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(5000);
  });

  it("refuses what RE2 refuses, with RE2's reason, and overlong patterns", () => {
    expect(() => compileHeaderForwardPattern('(a)\\1')).toThrow(/not a valid RE2 regular expression: .*invalid escape sequence/);
    expect(() => compileHeaderForwardPattern('(?=x)')).toThrow(/not a valid RE2 regular expression/);
    expect(() => compileHeaderForwardPattern('(')).toThrow(/not a valid RE2 regular expression/);
    expect(() => compileHeaderForwardPattern('a'.repeat(4097))).toThrow('longer than 4096');
  });
});
