import { silentLogger } from '@switchyard/common';
import { MemoryConnector, type Connector } from '@switchyard/planner';
import { MemoryElectionStore } from '@switchyard/runtime';
import { describe, expect, it } from 'vitest';
import { LeaderHeldConnector } from './leader-connector.js';

/** A memory connector that records when it is opened and closed. */
function opener(): { open: () => Promise<Connector>; events: string[]; fail: { next: boolean } } {
  const events: string[] = [];
  const fail = { next: false };
  let n = 0;
  return {
    events,
    fail,
    open: async () => {
      if (fail.next) {
        fail.next = false;
        events.push('open failed');
        throw new Error('state directory locked');
      }
      const id = ++n;
      events.push(`open ${id}`);
      const c = new MemoryConnector({ aggregated: 1 });
      const close = c.close.bind(c);
      c.close = async () => {
        events.push(`close ${id}`);
        await close();
      };
      return c;
    },
  };
}

const settle = () => new Promise((r) => setTimeout(r, 0));

describe('LeaderHeldConnector', () => {
  it('opens on the first call, closes when leadership goes, opens again on the next call', async () => {
    const store = new MemoryElectionStore();
    const a = store.campaign('ns', 'planner', 'a');
    const b = store.campaign('ns', 'planner', 'b');
    const o = opener();
    const c = new LeaderHeldConnector(o.open, a, silentLogger);
    expect(o.events).toEqual([]); // nothing held before the first call
    expect(await c.replicas()).toEqual({ aggregated: 1 });
    await c.scale('aggregated', 2);
    expect(await c.replicas()).toEqual({ aggregated: 2 });
    expect(o.events).toEqual(['open 1']);

    a.expireLease(); // a steps down (b leads), then campaigns again
    await settle();
    expect(o.events).toEqual(['open 1', 'close 1']);
    await b.close(); // a leads again
    expect(await c.replicas()).toEqual({ aggregated: 1 });
    expect(o.events).toEqual(['open 1', 'close 1', 'open 2']);
    await c.close();
    await c.close();
    expect(o.events).toEqual(['open 1', 'close 1', 'open 2', 'close 2']);
    await expect(c.replicas()).rejects.toMatchObject({ code: 'unavailable' });
    await a.close();
  });

  it('a connector released a moment ago is closed before the next one opens', async () => {
    const store = new MemoryElectionStore();
    const a = store.campaign('ns', 'planner', 'a');
    const events: string[] = [];
    let closing!: () => void;
    let n = 0;
    const open = async (): Promise<Connector> => {
      const id = ++n;
      events.push(`open ${id}`);
      const c = new MemoryConnector({ aggregated: 1 });
      c.close = () => {
        events.push(`closing ${id}`);
        return new Promise<void>((r) => (closing = () => (events.push(`closed ${id}`), r())));
      };
      return c;
    };
    const c = new LeaderHeldConnector(open, a, silentLogger);
    await c.replicas();
    a.expireLease(); // steps down and, alone, leads again at once
    await settle();
    const next = c.replicas();
    await settle();
    expect(events).toEqual(['open 1', 'closing 1']);
    closing();
    await next;
    expect(events).toEqual(['open 1', 'closing 1', 'closed 1', 'open 2']);
    const done = c.close();
    await settle();
    closing();
    await done;
    await a.close();
  });

  it('a failed open fails that call only; the next call opens again', async () => {
    const store = new MemoryElectionStore();
    const a = store.campaign('ns', 'planner', 'a');
    const o = opener();
    const c = new LeaderHeldConnector(o.open, a, silentLogger);
    o.fail.next = true;
    await expect(c.replicas()).rejects.toThrow('state directory locked');
    expect(await c.replicas()).toEqual({ aggregated: 1 });
    expect(o.events).toEqual(['open failed', 'open 1']);
    await c.close();
    await a.close();
  });
});
