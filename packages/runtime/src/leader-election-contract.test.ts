/**
 * The LeaderElection contract, run against both implementations: the etcd one on a real etcd
 * (started by @switchyard/testing) and the memory twin. Whatever one does (who leads, who waits, who
 * takes over on close and on a lost lease, what listeners hear) the other must do too.
 */
import { randomBytes } from 'node:crypto';
import { startEtcd, type EtcdServer } from '@switchyard/testing';
import { Etcd3 } from 'etcd3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { electionKey, namespace } from './addressing.js';
import { EtcdLeaderElection } from './etcd-leader-election.js';
import type { LeaderElection, LeadershipChange } from './leader-election.js';
import { MemoryElectionStore, type MemoryLeaderElection } from './memory-leader-election.js';

const ELECTION = 'planner';

interface Harness {
  readonly name: string;
  setup(): Promise<void>;
  teardown(): Promise<void>;
  candidate(ns: string, candidateId: string): Promise<LeaderElection>;
  /** The candidate's lease is lost from outside (memory: expired; etcd: revoked by another client). */
  loseLease(c: LeaderElection): Promise<void>;
  /** Who holds the election, as the store says. */
  holder(ns: string): Promise<string | undefined>;
}

function memoryHarness(): Harness {
  let store = new MemoryElectionStore();
  return {
    name: 'memory',
    setup: async () => {
      store = new MemoryElectionStore();
    },
    teardown: async () => {},
    candidate: async (ns, id) => store.campaign(ns, ELECTION, id),
    loseLease: async (c) => (c as MemoryLeaderElection).expireLease(),
    holder: async (ns) => store.holder(ns, ELECTION),
  };
}

function etcdHarness(): Harness {
  let etcd: EtcdServer;
  let admin: Etcd3;
  const prefix = `election-${randomBytes(4).toString('hex')}/`;
  return {
    name: 'etcd',
    setup: async () => {
      etcd = await startEtcd();
      admin = new Etcd3({ hosts: etcd.url });
    },
    teardown: async () => {
      admin?.close();
      await etcd?.stop();
    },
    candidate: (ns, id) => EtcdLeaderElection.connect({ url: etcd.url, namespace: ns, name: ELECTION, candidateId: id, keyPrefix: prefix, leaseTtlSeconds: 3 }),
    loseLease: async (c) => {
      await admin.leaseClient.leaseRevoke({ ID: (c as EtcdLeaderElection).currentLeaseId });
    },
    holder: async (ns) => {
      const text = await admin.namespace(prefix).get(electionKey(namespace(ns), ELECTION)).string();
      return text === null ? undefined : (JSON.parse(text) as { candidateId: string }).candidateId;
    },
  };
}

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each([memoryHarness, etcdHarness].map((make) => [make().name, make] as const))('LeaderElection contract: %s', (_name, make) => {
  const h = make();
  const open: LeaderElection[] = [];
  let nsCount = 0;
  let ns = '';
  const candidate = async (id: string, inNs = ns): Promise<{ c: LeaderElection; changes: LeadershipChange[] }> => {
    const c = await h.candidate(inNs, id);
    open.push(c);
    const changes: LeadershipChange[] = [];
    // a candidate that won at once heard it before anyone could subscribe: record the start too
    if (c.isLeader()) changes.push({ leading: true, reason: 'at start' });
    c.onChange((ch) => changes.push(ch));
    return { c, changes };
  };

  beforeAll(() => h.setup(), 60_000);
  afterAll(() => h.teardown());
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
    ns = `ns-${++nsCount}-${randomBytes(2).toString('hex')}`;
  });
  beforeAll(() => {
    ns = `ns-0-${randomBytes(2).toString('hex')}`;
  });

  it('a lone candidate leads, and the store names it', async () => {
    const { c } = await candidate('a');
    await waitFor('a leads', () => c.isLeader());
    expect(c.leader()).toBe('a');
    expect(await h.holder(ns)).toBe('a');
  });

  it('a second candidate waits while the first leads, and knows who leads', async () => {
    const a = await candidate('a');
    await waitFor('a leads', () => a.c.isLeader());
    const b = await candidate('b');
    await new Promise((r) => setTimeout(r, 200));
    expect(b.c.isLeader()).toBe(false);
    expect(b.c.leader()).toBe('a');
    expect(b.changes).toEqual([]);
    expect(await h.holder(ns)).toBe('a');
  });

  it('closing the leader hands over to the waiting candidate; the closed one hears `closed`', async () => {
    const a = await candidate('a');
    await waitFor('a leads', () => a.c.isLeader());
    const b = await candidate('b');
    await a.c.close();
    await a.c.close(); // idempotent
    expect(a.c.isLeader()).toBe(false);
    expect(a.changes.map((x) => x.leading)).toEqual([true, false]);
    expect(a.changes[1]!.reason).toBe('closed');
    await waitFor('b leads', () => b.c.isLeader());
    expect(b.changes.map((x) => x.leading)).toEqual([true]);
    expect(await h.holder(ns)).toBe('b');
  });

  it('closing a waiting candidate leaves the leader alone; closing the last leaves the election free', async () => {
    const a = await candidate('a');
    await waitFor('a leads', () => a.c.isLeader());
    const b = await candidate('b');
    await b.c.close();
    expect(a.c.isLeader()).toBe(true);
    expect(await h.holder(ns)).toBe('a');
    await a.c.close();
    await waitFor('the election is free', async () => (await h.holder(ns)) === undefined);
    expect(b.changes).toEqual([]);
  });

  it('a leader that loses its lease steps down, the waiting candidate takes over, and the old leader waits', async () => {
    const a = await candidate('a');
    await waitFor('a leads', () => a.c.isLeader());
    const b = await candidate('b');
    await h.loseLease(a.c);
    await waitFor('a stepped down and b leads', () => !a.c.isLeader() && b.c.isLeader());
    expect(a.changes.map((x) => x.leading)).toEqual([true, false]);
    expect(a.changes[1]!.reason).toMatch(/^lease lost|election key deleted/);
    // a campaigns again under a new lease: it takes over when b goes
    await new Promise((r) => setTimeout(r, 200));
    expect(a.c.isLeader()).toBe(false);
    await b.c.close();
    await waitFor('a leads again', () => a.c.isLeader());
    expect(await h.holder(ns)).toBe('a');
  });

  it('a lone leader that loses its lease leads again under a new one', async () => {
    const a = await candidate('a');
    await waitFor('a leads', () => a.c.isLeader());
    await h.loseLease(a.c);
    await waitFor('a stepped down', () => a.changes.length >= 2);
    await waitFor('a leads again', () => a.c.isLeader());
    expect(a.changes.map((x) => x.leading)).toEqual([true, false, true]);
    expect(await h.holder(ns)).toBe('a');
  });

  it('of three candidates, never more than one leads while leaders are closed one after another', async () => {
    const cs = [await candidate('a'), await candidate('b'), await candidate('c')];
    let maxLeaders = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        maxLeaders = Math.max(maxLeaders, cs.filter((x) => x.c.isLeader()).length);
        await new Promise((r) => setTimeout(r, 1));
      }
    })();
    const leaders: string[] = [];
    for (let i = 0; i < 3; i++) {
      await waitFor(`a leader among the ${3 - i} left`, () => cs.some((x) => x.c.isLeader()));
      const leader = cs.find((x) => x.c.isLeader())!;
      leaders.push(leader.c.candidateId);
      await leader.c.close();
    }
    sampling = false;
    await sampler;
    expect(maxLeaders).toBe(1);
    expect([...leaders].sort()).toEqual(['a', 'b', 'c']);
  });

  it('elections in different namespaces are independent', async () => {
    const a = await candidate('a');
    const b = await candidate('b', `${ns}-other`);
    await waitFor('both lead', () => a.c.isLeader() && b.c.isLeader());
  });

  it('refuses a bad namespace or candidate id', async () => {
    await expect(h.candidate('Bad Namespace', 'a')).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(h.candidate(ns, '')).rejects.toMatchObject({ code: 'invalid_argument' });
  });
});
