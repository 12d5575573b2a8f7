import { type Logger, internal, unavailable } from '@switchyard/common';
import { describe, expect, it } from 'vitest';
import { settlementFailed } from './llm-worker-chooser.js';

function recordingLogger(): Logger & { lines: Array<[string, string]> } {
  const lines: Array<[string, string]> = [];
  const at = (level: string) => (a: unknown, b?: string) => void lines.push([level, typeof a === 'string' ? a : (b ?? '')]);
  const logger: Logger & { lines: Array<[string, string]> } = { lines, trace: at('trace'), debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), child: () => logger };
  return logger;
}

describe('settlementFailed', () => {
  it('logs an unreachable table at debug (the table keeps the settlement and sends it again), anything else as a warning', () => {
    const logger = recordingLogger();
    settlementFailed(logger, 'release')(unavailable('redis: connection closed'));
    settlementFailed(logger, 'markPrefillDone')(internal('script error'));
    settlementFailed(logger, 'release')(new Error('boom'));
    expect(logger.lines.map(([level]) => level)).toEqual(['debug', 'warn', 'warn']);
    expect(logger.lines[0]![1]).toContain('release not applied yet');
    expect(logger.lines[1]![1]).toBe('router: markPrefillDone failed');
  });
});
