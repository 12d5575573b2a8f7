/**
 * The simulator's one source of randomness: a seeded xoshiro128** (the engine's own generator),
 * with the draws the generators and the router need. Same seed, same stream.
 */
import { Xoshiro128 } from '@switchyard/llm/internal';

export class SeededRandom {
  private readonly rng: Xoshiro128;

  constructor(seed: number) {
    this.rng = new Xoshiro128(seed);
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.rng.nextFloat();
  }

  /** Exponential with `rate` (> 0): the gap to the next Poisson arrival. */
  exponential(rate: number): number {
    return -Math.log(1 - this.next()) / rate;
  }

  /** Standard normal (Box–Muller; one draw of the pair is used). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** A log-normal integer with mean `mean` and log-σ `sigma`, clamped to [1, max]. σ 0 → `round(mean)`. */
  logNormalInt(mean: number, sigma: number, max: number): number {
    const x = sigma === 0 ? mean : mean * Math.exp(sigma * this.normal() - (sigma * sigma) / 2);
    return Math.min(max, Math.max(1, Math.round(x)));
  }
}
