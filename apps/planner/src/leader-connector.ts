/**
 * `LeaderHeldConnector`: a connector that exists only while this planner leads. The first call
 * after gaining leadership opens the real one (`open`); losing leadership closes it. Only the leader
 * calls a connector (planner-loop.ts), so a waiting planner holds nothing: with the local connector
 * that matters, since its state directory admits one connector at a time (`connector.lock`) and
 * the planner that takes over must adopt the replicas its predecessor started.
 *
 * An `open` that fails (a predecessor still alive holding the lock, an unreachable API) fails that
 * call; the next interval's call opens again. Closing the real connector leaves its replicas
 * running (the `Connector` contract).
 */
import type { Logger } from '@switchyard/common';
import { unavailable } from '@switchyard/common';
import type { Connector, Pool } from '@switchyard/planner';
import type { LeaderElection } from '@switchyard/runtime';

export class LeaderHeldConnector implements Connector {
  private inner: Promise<Connector> | undefined;
  private closed = false;
  private readonly unsubscribe: () => void;
  /** Closings of released connectors still under way (awaited by `close`). */
  private readonly releasing = new Set<Promise<void>>();

  constructor(
    private readonly open: () => Promise<Connector>,
    leadership: Pick<LeaderElection, 'onChange'>,
    private readonly logger: Logger,
  ) {
    this.unsubscribe = leadership.onChange((ch) => {
      if (!ch.leading) this.release();
    });
  }

  async replicas(): Promise<Partial<Record<Pool, number>>> {
    return (await this.connector()).replicas();
  }

  async scale(pool: Pool, target: number): Promise<void> {
    return (await this.connector()).scale(pool, target);
  }

  /** Closes the real connector if open (its replicas keep running). Idempotent. */
  async close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.unsubscribe();
      this.release();
    }
    await Promise.all(this.releasing);
  }

  private connector(): Promise<Connector> {
    if (this.closed) return Promise.reject(unavailable('connector closed'));
    if (this.inner === undefined) {
      // a connector released a moment ago (leadership lost and regained) closes first: it may hold
      // what the new one takes (the local connector's directory lock)
      const opening = Promise.all(this.releasing).then(() => this.open());
      this.inner = opening;
      opening.catch(() => {
        if (this.inner === opening) this.inner = undefined;
      });
    }
    return this.inner;
  }

  private release(): void {
    const inner = this.inner;
    if (inner === undefined) return;
    this.inner = undefined;
    const done = inner
      .then(
        (c) => c.close(),
        () => undefined,
      )
      .then(
        () => this.logger.info({}, 'planner: connector released'),
        (err: unknown) => this.logger.error({ err }, 'planner: closing the connector failed'),
      );
    this.releasing.add(done);
    void done.finally(() => this.releasing.delete(done));
  }
}
