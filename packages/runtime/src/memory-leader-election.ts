/**
 * In-memory LeaderElection: `MemoryElectionStore` plays etcd for every candidate of a test (or of one
 * process); each `MemoryLeaderElection` is one candidate. Semantics follow the etcd implementation:
 * the first candidate to campaign on a free election leads; the others wait, in the order they
 * campaigned, and the first of them takes over when the leader closes or loses its lease. Changes are
 * delivered synchronously (etcd's arrive a moment later: tests wait for them alike).
 *
 * Test hook: `expireLease()` — the candidate's lease is lost: it steps down at once, the next waiting
 * candidate takes over, and it campaigns again under a new lease at the back of the queue (as the
 * etcd candidate does once etcd says its lease is gone).
 */
import { invalidArgument } from '@switchyard/common';
import { electionKey, namespace } from './addressing.js';
import { MAX_CANDIDATE_ID_LENGTH, notifyLeadership, type LeaderElection, type LeadershipListener } from './leader-election.js';

interface Election {
  holder: MemoryLeaderElection | undefined;
  readonly waiting: MemoryLeaderElection[];
}

/** The shared store (etcd stand-in): election key → holder and waiting candidates. */
export class MemoryElectionStore {
  private readonly elections = new Map<string, Election>();
  private nextId = 1;

  /** Start campaigning as a new candidate of election `name` in namespace `ns`. */
  campaign(ns: string, name: string, candidateId = `candidate-${this.nextId++}`): MemoryLeaderElection {
    if (candidateId.length === 0 || candidateId.length > MAX_CANDIDATE_ID_LENGTH) throw invalidArgument(`candidate id must be 1-${MAX_CANDIDATE_ID_LENGTH} characters`);
    const key = electionKey(namespace(ns), name);
    let e = this.elections.get(key);
    if (e === undefined) {
      e = { holder: undefined, waiting: [] };
      this.elections.set(key, e);
    }
    const c = new MemoryLeaderElection(this, key, candidateId);
    this.join(key, c);
    return c;
  }

  /** The id of the candidate leading `name` in `ns`, if any (for assertions). */
  holder(ns: string, name: string): string | undefined {
    return this.elections.get(electionKey(namespace(ns), name))?.holder?.candidateId;
  }

  /** @internal */
  election(key: string): Election {
    return this.elections.get(key)!;
  }

  /** @internal the candidate campaigns: leads if the election is free, else waits. */
  join(key: string, c: MemoryLeaderElection): void {
    const e = this.election(key);
    if (e.holder === undefined) {
      e.holder = c;
      c.changed(true, 'elected');
    } else {
      e.waiting.push(c);
    }
  }

  /** @internal the candidate leaves (closed or lease lost); the first waiting one takes over. */
  leave(key: string, c: MemoryLeaderElection, reason: string): void {
    const e = this.election(key);
    if (e.holder === c) {
      e.holder = undefined;
      c.changed(false, reason);
      const next = e.waiting.shift();
      if (next !== undefined) {
        e.holder = next;
        next.changed(true, 'elected');
      }
    } else {
      const i = e.waiting.indexOf(c);
      if (i !== -1) e.waiting.splice(i, 1);
    }
  }
}

export class MemoryLeaderElection implements LeaderElection {
  private readonly listeners = new Set<LeadershipListener>();
  private leading = false;
  private closed = false;

  /** @internal use `MemoryElectionStore.campaign`. */
  constructor(
    private readonly store: MemoryElectionStore,
    private readonly key: string,
    readonly candidateId: string,
  ) {}

  isLeader(): boolean {
    return this.leading;
  }

  leader(): string | undefined {
    return this.store.election(this.key).holder?.candidateId;
  }

  onChange(listener: LeadershipListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Test hook: this candidate's lease is lost (see the module comment). */
  expireLease(): void {
    if (this.closed) return;
    this.store.leave(this.key, this, 'lease lost: expired');
    this.store.join(this.key, this);
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.store.leave(this.key, this, 'closed');
    this.closed = true;
    this.listeners.clear();
    return Promise.resolve();
  }

  /** @internal */
  changed(leading: boolean, reason: string): void {
    if (this.leading === leading) return;
    this.leading = leading;
    notifyLeadership(this.listeners, { leading, reason }, () => {});
  }
}
