import { describe, expect, it } from 'vitest';
import { constrain, type ConstrainInput } from './decision.js';

const input = (o: Partial<ConstrainInput>): ConstrainInput => ({
  pool: 'decode',
  from: 3,
  proposed: 3,
  reason: 'sla_sizing',
  inputs: {},
  bounds: { minReplicas: 1, maxReplicas: 8 },
  maxStep: Infinity,
  scaleDownHeld: false,
  ...o,
});

describe('constrain', () => {
  it('rounds a fractional proposal up and keeps the rule\'s reason', () => {
    expect(constrain(input({ proposed: 4.2 }))).toMatchObject({ to: 5, direction: 'up', reason: 'sla_sizing' });
    expect(constrain(input({ proposed: NaN }))).toMatchObject({ to: 3, direction: 'hold' });
  });

  it('limits the step', () => {
    expect(constrain(input({ proposed: 8, maxStep: 2 }))).toMatchObject({ to: 5 });
    expect(constrain(input({ proposed: 1, maxStep: 1 }))).toMatchObject({ to: 2, direction: 'down' });
  });

  it('holds scale-down during the cooldown, not scale-up', () => {
    expect(constrain(input({ proposed: 1, scaleDownHeld: true }))).toMatchObject({ to: 3, direction: 'hold', reason: 'scale_up_cooldown' });
    expect(constrain(input({ proposed: 6, scaleDownHeld: true }))).toMatchObject({ to: 6, direction: 'up', reason: 'sla_sizing' });
  });

  it('bounds win over the step and the cooldown', () => {
    expect(constrain(input({ from: 12, proposed: 12, maxStep: 1, scaleDownHeld: true }))).toMatchObject({ to: 8, direction: 'down', reason: 'above_max' });
    expect(constrain(input({ from: 0, proposed: 0, bounds: { minReplicas: 2, maxReplicas: 4 } }))).toMatchObject({ to: 2, reason: 'below_min' });
    expect(constrain(input({ proposed: 20 }))).toMatchObject({ to: 8, reason: 'at_max' });
    expect(constrain(input({ from: 1, proposed: 0 }))).toMatchObject({ to: 1, direction: 'hold', reason: 'at_min' });
    expect(constrain(input({ from: 1, proposed: 0, bounds: { minReplicas: 0, maxReplicas: 4 } }))).toMatchObject({ to: 0, direction: 'down' });
  });
});
